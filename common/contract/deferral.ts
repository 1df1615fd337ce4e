// An attempt the worker did not make because the endpoint is isolated: the workflow waits durably and asks again.
// Sandbox-safe.

/** `type` of the non-retryable failure that hands the wait back to the workflow (not an attempt at the receiver). */
export const DELIVERY_DEFERRED = 'WebhookDeliveryDeferred';

export interface DeliveryDeferredDetails {
  /**
   * `circuit-open`: the registration's breaker is open, or half-open with another attempt probing. `paused`: a member
   * paused the webhook, or its receiver answered 410 Gone; the workflow waits without running its give-up window.
   * `slowed-down`: the receiver asked the endpoint to slow down (429, 502, 503, 504): it waits for the resumer.
   * `rate-limited`: the registration's rate per second is reached; the workflow waits for the resumer, its give-up
   * window standing still as for a pause.
   */
  reason: 'circuit-open' | 'endpoint-busy' | 'paused' | 'slowed-down' | 'rate-limited';
  /**
   * How long the workflow waits (a durable timer) before the next attempt. For an open breaker this is a long
   * safety net: the resumer's signal normally ends the wait when it is time to probe or to go on.
   */
  waitMs: number;
  /** The activity attempt that was deferred: the ones before it reached the receiver. */
  attempt: number;
  /** Why the breaker opened: the receiver's last failure, for the delivery's final error if it gives up waiting. */
  lastError?: string;
  statusCode?: number;
}

/**
 * The signal the worker's resumer sends a delivery waiting for an open breaker: probe now (half-open) or go on
 * (closed). Its argument is the wait token the delivery was listed under.
 */
export const RESUME_DELIVERY_SIGNAL = 'resumeDelivery';

/**
 * The resume signal's argument: the wait token, and the workflow it was sent to. A workflow ignores one naming
 * another (a signal copied from one delivery's history to another's); histories from before it carry a bare number.
 */
export interface ResumeDeliverySignal {
  workflowId: string;
  waitToken: number;
}

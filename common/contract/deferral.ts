// An attempt the worker did not make because the endpoint is isolated: the workflow waits durably and asks again.
// Sandbox-safe.

/** `type` of the non-retryable failure that hands the wait back to the workflow (not an attempt at the receiver). */
export const DELIVERY_DEFERRED = 'WebhookDeliveryDeferred';

export interface DeliveryDeferredDetails {
  /** `circuit-open`: the registration's breaker is open, or half-open with another attempt probing. */
  reason: 'circuit-open' | 'endpoint-busy';
  /** How long the workflow sleeps (a durable timer) before the next attempt; spread so waiters resume gradually. */
  waitMs: number;
  /** The activity attempt that was deferred: the ones before it reached the receiver. */
  attempt: number;
  /** Why the breaker opened: the receiver's last failure, for the delivery's final error if it gives up waiting. */
  lastError?: string;
  statusCode?: number;
}

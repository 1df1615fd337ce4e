// What the workflow and its activities hand each other. Sandbox-safe: no imports of Node.
import type { SubscribableType, WebhookType } from './events';

/** Retry schedule of a delivery, in ms (worker config: DELIVERY_*). */
export interface DeliveryRetryPolicy {
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
  giveUpAfterMs: number;
}

/** Result of the local lookup activity; recorded in history, so building options from it is deterministic. */
export interface DeliveryPlan {
  /** Set when the input is not a valid event: the message names the problem. */
  problem?: string;
  registered: boolean;
  /** The registration's subscribed types; never its URL or secret. */
  types: SubscribableType[];
  retry: DeliveryRetryPolicy;
  attemptTimeoutMs: number;
  /** False when the worker found the ProjectId/WebhookType search attributes missing on the namespace. */
  searchAttributes: boolean;
  /**
   * The worker's choice of the fast path (DELIVERY_FIRST_ATTEMPT_LOCAL): the first attempt as a local activity.
   * Recorded with the lookup, so the choice replays; absent in histories from before it, which replay without.
   */
  firstAttemptLocal?: boolean;
  /**
   * On the fast path, the attempt after a wait for the endpoint (its attempts in flight, or its open breaker) is a
   * local activity too: one workflow task when the wait ends, instead of two and an activity task. Absent in
   * histories from before it, whose attempts after a wait replay as durable activities.
   */
  localAfterWait?: boolean;
  /**
   * The first attempt, made by the lookup itself when the worker took the fast path and the event is to be sent:
   * one local activity and one database read of the registration for both. Absent in histories from before it, and
   * when the lookup's timeout leaves no room for an attempt; the workflow then makes the first attempt itself.
   */
  firstAttempt?: RecordedAttempt;
}

/** An attempt's result carried as data: its outcome, or the failure it threw (rebuilt by the workflow). */
export type RecordedAttempt = { outcome: DeliveryAttemptOutcome } | { failure: RecordedFailure };

export interface RecordedFailure {
  /** The ApplicationFailure's type (FailureType, DELIVERY_DEFERRED), or the name of another error. */
  type: string;
  message: string;
  nonRetryable: boolean;
  /** AttemptFailureDetails or DeliveryDeferredDetails. */
  details?: unknown[];
  /** The receiver's Retry-After floor, when it set one. */
  nextRetryDelayMs?: number;
}

export interface DeliveryAttemptInput {
  projectId: string;
  webhookType: WebhookType;
  /** The payload serialised once by the workflow: these exact bytes are signed and sent at every attempt. */
  body: string;
  /** The X-Webhook-Id to send when it is not the workflow id (a redelivery). */
  webhookId?: string;
  /**
   * Attempts of this delivery made before this activity ran (its first attempt on the worker, or the ones before a
   * wait for the breaker): the attempt numbers, the delivery log's rows and the Retry-After floor continue from them.
   */
  earlierAttempts?: number;
  /**
   * The number of the wait this attempt would start if an open breaker defers it: the worker lists the delivery as
   * a waiter under it, and the resumer's signal names it, so a late signal never ends a later wait.
   */
  waitToken?: number;
  /**
   * The run this attempt was scheduled by (sealed inside the encrypted input): the activity refuses to run for any
   * other, so a copied attempt input scheduled by a foreign workflow sends nothing. Absent in inputs from before it.
   */
  boundTo?: WorkflowRun;
}

/** One run of a workflow, as Temporal names it. */
export interface WorkflowRun {
  workflowId: string;
  runId: string;
}

/** How a delivery ended, as the workflow reports it to the delivery log. */
export interface DeliveryOutcomeReport {
  webhookId: string;
  projectId: string;
  webhookType: string;
  status: 'failed' | 'skipped';
  /** The last error in words: status or error code, never a body. */
  lastError: string;
}

export type DeliveryAttemptOutcome =
  | { status: 'delivered'; attempt: number; statusCode: number; durationMs: number }
  | { status: 'skipped'; reason: 'registration-deleted'; attempt: number };

/**
 * The longest one attempt may run: the receiver's timeout (WEBHOOK_TIMEOUT_MS) and a margin for reading the
 * registration and signing. The attempt activity's start-to-close timeout, and the lease of a breaker's probe.
 */
export const attemptDeadlineMs = (attemptTimeoutMs: number): number => attemptTimeoutMs + 5_000;

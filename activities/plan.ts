import { ApplicationFailure, Context } from '@temporalio/activity';
import { validateDeliveryInput } from '../common/contract/validate';
import { findRegistration } from '../db';
import {
  attemptDeadlineMs,
  isSubscribed,
  type DeliverWebhookEventInput,
  type DeliveryAttemptOutcome,
  type DeliveryPlan,
  type RecordedAttempt,
  type RecordedFailure,
} from '../common/contract';
import type { createAttempt } from './attempt';
import type { DeliveryLog } from './delivery-log';
import type { ActivityDeps } from './deps';
import { assertEventBound } from './input-binding';

/** What the lookup leaves itself besides the attempt's deadline: its own reads and the attempt's log writes. */
export const LOOKUP_MARGIN_MS = 5_000;

/**
 * Local activity: validates the event (ajv cannot run in the workflow sandbox), says whether the project has a
 * webhook and which types it subscribes to, and hands over the worker's retry policy. Never the URL or secret.
 *
 * On the fast path (DELIVERY_FIRST_ATTEMPT_LOCAL) it also makes the first attempt, with the registration it has just
 * read, and records how it went: a delivery to a receiver that answers at once is then one local activity in one
 * workflow task. It does so only when its start-to-close timeout leaves room for a whole attempt, so a lookup that
 * times out is never one whose POST is still running.
 */
export function createPlanDelivery({
  db,
  config,
  searchAttributes = true,
  requireBoundInputs = false,
  logger,
  deliveryLog,
  attempt,
}: Pick<ActivityDeps, 'db' | 'config' | 'searchAttributes' | 'requireBoundInputs'> &
  Partial<Pick<ActivityDeps, 'logger'>> & {
    deliveryLog?: DeliveryLog;
    attempt?: ReturnType<typeof createAttempt>;
  }) {
  return async function planDelivery(input: unknown): Promise<DeliveryPlan> {
    const local = config.DELIVERY_FIRST_ATTEMPT_LOCAL ?? true;
    const plan: DeliveryPlan = {
      registered: false,
      types: [],
      retry: {
        initialIntervalMs: config.DELIVERY_INITIAL_INTERVAL_MS,
        backoffCoefficient: config.DELIVERY_BACKOFF_COEFFICIENT,
        maximumIntervalMs: config.DELIVERY_MAX_INTERVAL_MS,
        giveUpAfterMs: config.DELIVERY_GIVE_UP_AFTER_MS,
      },
      attemptTimeoutMs: config.WEBHOOK_TIMEOUT_MS,
      searchAttributes,
      firstAttemptLocal: local,
      localAfterWait: local,
    };
    const problem = validateDeliveryInput(input);
    if (problem !== undefined) return { ...plan, problem };
    const event = input as DeliverWebhookEventInput;
    // Before anything is read or sent: a copy of another delivery's input, run by our workflow or someone else's.
    assertEventBound(event, requireBoundInputs, logger);
    const registration = await findRegistration(db, event.projectId);
    await deliveryLog?.planned(event, registration?.types);
    if (!registration) return plan;
    const found: DeliveryPlan = { ...plan, registered: true, types: registration.types };
    if (!attempt || !found.firstAttemptLocal || !isSubscribed(registration.types, event.webhookType)) return found;
    const timeoutMs = Context.current().info.startToCloseTimeoutMs;
    if (timeoutMs < attemptDeadlineMs(config.WEBHOOK_TIMEOUT_MS) + LOOKUP_MARGIN_MS) return found;
    const firstAttempt = await recorded(() =>
      attempt(
        {
          projectId: event.projectId,
          webhookType: event.webhookType,
          // The bytes the workflow would serialise: the durable attempts after this one send the same.
          body: JSON.stringify(event.payload),
          webhookId: event.webhookId,
          earlierAttempts: 0,
          waitToken: 1,
        },
        { registration },
      ),
    );
    return { ...found, firstAttempt };
  };
}

/** The attempt's outcome, or the failure it threw, as data: the lookup itself never fails once a POST was made. */
async function recorded(run: () => Promise<DeliveryAttemptOutcome>): Promise<RecordedAttempt> {
  try {
    return { outcome: await run() };
  } catch (error) {
    return { failure: recordedFailure(error) };
  }
}

function recordedFailure(error: unknown): RecordedFailure {
  if (error instanceof ApplicationFailure)
    return {
      type: error.type ?? 'Error',
      message: error.message,
      nonRetryable: error.nonRetryable === true,
      ...(error.details?.length && { details: [...error.details] }),
      ...(typeof error.nextRetryDelay === 'number' && { nextRetryDelayMs: error.nextRetryDelay }),
    };
  // Anything else (a database error before the POST, say) is retried, as an activity's plain Error would be.
  const { name, message } = error instanceof Error ? error : new Error(String(error));
  return { type: name, message, nonRetryable: false };
}

import {
  ActivityFailure,
  ApplicationFailure,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from '../activities';
import {
  DELIVERY_DEFERRED,
  FailureType,
  ProjectIdKey,
  WebhookTypeKey,
  isSubscribed,
  notSubscribedMessage,
  type AttemptFailureDetails,
  type DeliverWebhookEventInput,
  type DeliverWebhookEventResult,
  type DeliveryDeferredDetails,
  type DeliveryFailedDetails,
  type DeliveryPlan,
  priorityKeyOf,
} from '../common/contract';

type Activities = ReturnType<typeof createActivities>;

// The lookup reads Postgres: a transient outage is retried for as long as a delivery would be.
const { planDelivery } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10s',
  scheduleToCloseTimeout: '24h',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
  summary: 'Validate the event and look up the webhook registration',
});

// The delivery log learns of a give-up here; a database outage is retried like the lookup.
const { recordDeliveryOutcome } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30s',
  scheduleToCloseTimeout: '24h',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
  summary: 'Record the delivery outcome and raise the operator alert',
});

/**
 * Delivers one event to the project's webhook: validate, look up the registration, then POST with retries.
 * The workflow id is the delivery's idempotency key, sent as X-Webhook-Id.
 */
export async function deliverWebhookEvent(input: DeliverWebhookEventInput): Promise<DeliverWebhookEventResult> {
  const { projectId, webhookType } = input;
  // A redelivery carries the original event's X-Webhook-Id, so receivers deduplicate.
  const webhookId = input.webhookId ?? workflowInfo().workflowId;
  const plan: DeliveryPlan = await planDelivery(input);

  if (plan.problem !== undefined) {
    throw ApplicationFailure.create({ type: FailureType.InvalidEvent, message: plan.problem, nonRetryable: true });
  }
  // Only a validated event names its project and type in the UI's filters.
  if (plan.searchAttributes) {
    upsertSearchAttributes([
      { key: ProjectIdKey, value: projectId },
      { key: WebhookTypeKey, value: webhookType },
    ]);
  }
  if (!plan.registered) {
    log.info('No webhook registered for the project: event skipped', { projectId, webhookType });
    return { status: 'skipped', webhookId, reason: 'no-webhook', attempts: 0 };
  }
  if (!isSubscribed(plan.types, webhookType)) throw notSubscribed(projectId, webhookType);
  const isTest = webhookType === 'TEST';

  // The give-up window runs from the first attempt, across waits for an open circuit breaker (workflow time).
  const giveUpAt = Date.now() + plan.retry.giveUpAfterMs;
  // Attempts that reached the receiver in earlier calls, ended by a deferral.
  let earlierAttempts = 0;
  // The receiver's last failure as a deferral reported it, for a give-up that comes while no attempt runs.
  let lastKnown: Pick<DeliveryFailedDetails, 'statusCode' | 'lastError'> | undefined;
  for (;;) {
    // Options come from the recorded lookup result and workflow time, so creating this proxy per call is deterministic.
    const { deliverWebhookAttempt } = proxyActivities<Activities>({
      startToCloseTimeout: plan.attemptTimeoutMs + 5_000,
      ...(isTest
        ? { retry: { maximumAttempts: 1 } }
        : {
            scheduleToCloseTimeout: Math.max(1, giveUpAt - Date.now()),
            retry: {
              initialInterval: plan.retry.initialIntervalMs,
              backoffCoefficient: plan.retry.backoffCoefficient,
              maximumInterval: plan.retry.maximumIntervalMs,
            },
          }),
      // Emergencies first whenever attempts are queued; the fairness key is inherited from the workflow.
      priority: { priorityKey: priorityKeyOf(webhookType) },
      summary: isTest
        ? `POST TEST event to project ${projectId}'s webhook`
        : `POST ${webhookType} to project ${projectId}'s webhook`,
    });

    try {
      const outcome = await deliverWebhookAttempt({
        projectId,
        webhookType,
        body: JSON.stringify(input.payload),
        webhookId: input.webhookId,
      });
      if (outcome.status === 'skipped') {
        log.warn('Webhook deleted while the delivery was pending: event not delivered', { projectId, webhookType });
        return {
          status: 'skipped',
          webhookId,
          reason: outcome.reason,
          attempts: earlierAttempts + outcome.attempt - 1,
        };
      }
      return {
        status: 'delivered',
        webhookId,
        attempts: earlierAttempts + outcome.attempt,
        statusCode: outcome.statusCode,
        durationMs: outcome.durationMs,
      };
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      const last = lastApplicationFailure(error);
      if (last?.type === FailureType.NotSubscribed) throw notSubscribed(projectId, webhookType, error);
      if (last?.type === DELIVERY_DEFERRED) {
        const deferral = last.details?.[0] as DeliveryDeferredDetails;
        earlierAttempts += deferral.attempt - 1;
        if (deferral.lastError) lastKnown = { statusCode: deferral.statusCode, lastError: deferral.lastError };
        const remaining = giveUpAt - Date.now();
        // A durable timer, not a stream of failing attempts; a test is answered at once instead.
        if (!isTest && remaining > deferral.waitMs) {
          await sleep(deferral.waitMs);
          continue;
        }
        if (!isTest) await sleep(Math.max(1, remaining));
        throw await giveUp(webhookId, projectId, webhookType, error, {
          attempts: earlierAttempts,
          statusCode: deferral.statusCode,
          lastError: deferral.lastError ?? last.message,
        });
      }
      // The window closed before the attempt after a wait could run (a timeout, no attempt): report the receiver.
      if (!last && lastKnown)
        throw await giveUp(webhookId, projectId, webhookType, error, { attempts: earlierAttempts, ...lastKnown });
      const attempt = (last?.details?.[0] as AttemptFailureDetails | undefined) ?? undefined;
      throw await giveUp(webhookId, projectId, webhookType, error, {
        attempts: earlierAttempts + (attempt?.attempt ?? 1),
        statusCode: attempt?.statusCode,
        errorCode: attempt?.errorCode,
        lastError: last?.message ?? error.cause?.message ?? error.message,
      });
    }
  }
}

/** Gives up: the delivery log learns of it (histories from before the log replay without), then the failure. */
async function giveUp(
  webhookId: string,
  projectId: string,
  webhookType: string,
  cause: ActivityFailure,
  outcome: Omit<DeliveryFailedDetails, 'projectId' | 'webhookType'>,
): Promise<ApplicationFailure> {
  const failure = deliveryFailed(projectId, webhookType, cause, outcome);
  if (patched('delivery-log'))
    await recordDeliveryOutcome({ webhookId, projectId, webhookType, status: 'failed', lastError: outcome.lastError });
  return failure;
}

/** The workflow's own failure once the give-up window is over or an attempt failed for good. */
function deliveryFailed(
  projectId: string,
  webhookType: string,
  cause: ActivityFailure,
  outcome: Omit<DeliveryFailedDetails, 'projectId' | 'webhookType'>,
): ApplicationFailure {
  const details: DeliveryFailedDetails = { projectId, webhookType, ...outcome };
  log.error('Webhook delivery failed: giving up', { ...details });
  return ApplicationFailure.create({
    type: FailureType.DeliveryFailed,
    message: `Delivery of ${webhookType} to project ${projectId} failed after ${details.attempts} attempt(s): ${details.lastError}`,
    nonRetryable: true,
    details: [details],
    cause,
  });
}

function notSubscribed(projectId: string, webhookType: string, cause?: Error): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.NotSubscribed,
    message: notSubscribedMessage(projectId, webhookType),
    nonRetryable: true,
    cause,
  });
}

/** The last attempt's ApplicationFailure, found below a timeout or directly under the ActivityFailure. */
function lastApplicationFailure(error: Error | undefined): ApplicationFailure | undefined {
  for (let current = error; current; current = current.cause instanceof Error ? current.cause : undefined) {
    if (current instanceof ApplicationFailure) return current;
  }
  return undefined;
}

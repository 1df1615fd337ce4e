import {
  ActivityFailure,
  ApplicationFailure,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from '../activities';
import {
  FailureType,
  ProjectIdKey,
  WebhookTypeKey,
  isSubscribed,
  notSubscribedMessage,
  type AttemptFailureDetails,
  type DeliverWebhookEventInput,
  type DeliverWebhookEventResult,
  type DeliveryFailedDetails,
  type DeliveryPlan,
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

  // Options come from the recorded lookup result, so creating this proxy per execution is deterministic.
  const { deliverWebhookAttempt } = proxyActivities<Activities>({
    startToCloseTimeout: plan.attemptTimeoutMs + 5_000,
    ...(isTest
      ? { retry: { maximumAttempts: 1 } }
      : {
          scheduleToCloseTimeout: plan.retry.giveUpAfterMs,
          retry: {
            initialInterval: plan.retry.initialIntervalMs,
            backoffCoefficient: plan.retry.backoffCoefficient,
            maximumInterval: plan.retry.maximumIntervalMs,
          },
        }),
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
      return { status: 'skipped', webhookId, reason: outcome.reason, attempts: outcome.attempt - 1 };
    }
    return {
      status: 'delivered',
      webhookId,
      attempts: outcome.attempt,
      statusCode: outcome.statusCode,
      durationMs: outcome.durationMs,
    };
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    const last = lastApplicationFailure(error);
    if (last?.type === FailureType.NotSubscribed) throw notSubscribed(projectId, webhookType, error);
    const attempt = (last?.details?.[0] as AttemptFailureDetails | undefined) ?? undefined;
    const details: DeliveryFailedDetails = {
      projectId,
      webhookType,
      attempts: attempt?.attempt ?? 1,
      statusCode: attempt?.statusCode,
      errorCode: attempt?.errorCode,
      lastError: last?.message ?? error.cause?.message ?? error.message,
    };
    log.error('Webhook delivery failed: giving up', { ...details });
    // Histories from before the delivery log replay without this activity.
    if (patched('delivery-log'))
      await recordDeliveryOutcome({
        webhookId,
        projectId,
        webhookType,
        status: 'failed',
        lastError: details.lastError,
      });
    throw ApplicationFailure.create({
      type: FailureType.DeliveryFailed,
      message: `Delivery of ${webhookType} to project ${projectId} failed after ${details.attempts} attempt(s): ${details.lastError}`,
      nonRetryable: true,
      details: [details],
      cause: error,
    });
  }
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

import {
  ActivityFailure,
  ApplicationFailure,
  TemporalFailure,
  condition,
  defineSignal,
  setHandler,
  log,
  metricMeter,
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
  RESUME_DELIVERY_SIGNAL,
  ProjectIdKey,
  deliverySearchAttributes,
  isSubscribed,
  notSubscribedMessage,
  type AttemptFailureDetails,
  type DeliverWebhookEventInput,
  type DeliverWebhookEventResult,
  type DeliveryDeferredDetails,
  type DeliveryFailedDetails,
  type DeliveryAttemptInput,
  type DeliveryAttemptOutcome,
  type DeliveryPlan,
  type RecordedAttempt,
  type WebhookType,
  attemptDeadlineMs,
  policyDelay,
  priorityKeyOf,
  unencryptedPayloadOf,
  type UnencryptedPayload,
  bindingRefusal,
  eventBinding,
  resumeSignalBinding,
  type InputRefusalDetails,
  type ResumeDeliverySignal,
} from '../common/contract';

type Activities = ReturnType<typeof createActivities>;

/** The worker's resumer: this delivery's wait for an open breaker is over (probe now, or go on). */
export const resumeDelivery = defineSignal<[signalled: ResumeDeliverySignal | number]>(RESUME_DELIVERY_SIGNAL);

// The lookup reads Postgres: a transient outage is retried for as long as a delivery would be. On the fast path it
// also makes the first attempt when this timeout has room for one (WEBHOOK_TIMEOUT_MS + 10 s at most).
const { planDelivery } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30s',
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
 *
 * The common case costs the engine one workflow task: the first attempt runs as a local activity right after the
 * lookup, and a receiver that answers 2xx at once completes the workflow in that same task. A failed attempt hands
 * over to the durable activity, which continues the same retry schedule (and the same attempt numbers). An attempt
 * deferred by the endpoint's guard made no request: the one after the wait is local again.
 */
export async function deliverWebhookEvent(event: DeliverWebhookEventInput): Promise<DeliverWebhookEventResult> {
  const input = acceptedInput(event);
  const { projectId, webhookType } = input;
  // A redelivery carries the original event's X-Webhook-Id, so receivers deduplicate.
  const webhookId = input.webhookId ?? workflowInfo().workflowId;
  const plan: DeliveryPlan = await planDelivery(input);

  if (plan.problem !== undefined) {
    throw ApplicationFailure.create({ type: FailureType.InvalidEvent, message: plan.problem, nonRetryable: true });
  }
  // Clients give the search attributes at start; a validated event started without them (by hand) gets them here.
  if (plan.searchAttributes && workflowInfo().typedSearchAttributes.get(ProjectIdKey) === undefined) {
    upsertSearchAttributes(deliverySearchAttributes(projectId, webhookType));
  }
  if (!plan.registered) {
    log.info('No webhook registered for the project: event skipped', { projectId, webhookType });
    return { status: 'skipped', webhookId, reason: 'no-webhook', attempts: 0 };
  }
  if (!isSubscribed(plan.types, webhookType)) throw notSubscribed(projectId, webhookType);
  const isTest = webhookType === 'TEST';
  const body = JSON.stringify(input.payload);

  // The give-up window runs from the first attempt, across waits for an open circuit breaker (workflow time), and
  // stands still while the webhook is paused.
  let giveUpAt = Date.now() + plan.retry.giveUpAfterMs;
  // Attempts that reached the receiver before the current call: the local first one, or those before a deferral.
  let earlierAttempts = 0;
  // The receiver's last failure as a deferral reported it, for a give-up that comes while no attempt runs.
  let lastKnown: Pick<DeliveryFailedDetails, 'statusCode' | 'lastError'> | undefined;
  // Read from the recorded lookup, not patched(): no extra marker and search-attribute upsert per delivery.
  let local = plan.firstAttemptLocal === true;
  // The lookup may have made the first attempt already (one local activity for both); it counts as the local one.
  let recordedFirst = plan.firstAttempt;
  // Waits for an open breaker so far, and the latest one the resumer's signal ended.
  let waits = 0;
  let resumed = 0;
  setHandler(resumeDelivery, (signalled) => {
    const waitToken = acceptedSignal(signalled);
    if (waitToken !== undefined) resumed = Math.max(resumed, waitToken);
  });
  // Every attempt is sealed for this run: a copy scheduled by another workflow is refused by the activity.
  const { workflowId, runId } = workflowInfo();
  for (;;) {
    const attemptInput = {
      projectId,
      webhookType,
      body,
      webhookId: input.webhookId,
      earlierAttempts,
      waitToken: waits + 1,
      boundTo: { workflowId, runId },
    };
    const attempt = recordedFirst
      ? recordedAttempt(recordedFirst)
      : local
        ? localAttempt(plan, webhookType, projectId)
        : durableAttempt(plan, webhookType, projectId, giveUpAt, earlierAttempts);
    recordedFirst = undefined;
    try {
      const outcome = await attempt(attemptInput);
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
    } catch (thrown) {
      // A local attempt's failure arrives as it was thrown (no ActivityFailure around it); a timeout as TimeoutFailure.
      const error = failureOfAttempt(thrown, local);
      const last = lastApplicationFailure(error);
      if (last?.type === FailureType.NotSubscribed) throw notSubscribed(projectId, webhookType, error);
      const refusal = last?.type === FailureType.InputNotBound ? (last.details?.[0] as InputRefusalDetails) : undefined;
      if (refusal?.binding === 'unbound' && !local) {
        // An attempt scheduled before attempts were sealed, refused by a worker that requires it (nothing was sent):
        // the same delivery goes on with a sealed one, from the attempts the refused one had made.
        earlierAttempts = refusal.attempt;
        continue;
      }
      const remaining = giveUpAt - Date.now();
      if (last?.type === DELIVERY_DEFERRED) {
        const deferral = last.details?.[0] as DeliveryDeferredDetails;
        earlierAttempts = deferral.attempt - 1;
        if (deferral.lastError) lastKnown = { statusCode: deferral.statusCode, lastError: deferral.lastError };
        if (deferral.reason === 'paused') {
          // Held by a pause: no attempt was made and the window does not run, until the resumer's signal (paced,
          // falls first) or the pause's own end. Only this reason's histories take this path (no patch needed).
          const heldFrom = Date.now();
          const waitToken = (waits += 1);
          await condition(() => resumed >= waitToken, deferral.waitMs);
          giveUpAt += Date.now() - heldFrom;
          local = plan.localAfterWait === true;
          continue;
        }
        // A durable wait, not a stream of failing attempts: until the timer, or the resumer's signal for this wait
        // (time to probe, or the breaker closed). A test is answered at once instead.
        if (!isTest) {
          const waitToken = (waits += 1);
          const woken = await condition(() => resumed >= waitToken, Math.min(deferral.waitMs, Math.max(1, remaining)), {
            summary: deferral.reason,
          });
          if (woken || remaining > deferral.waitMs) {
            // No attempt was made: the next one is local again on the fast path, in the task the wait ends with.
            local = plan.localAfterWait === true;
            continue;
          }
        }
        throw await giveUp(webhookId, projectId, webhookType, error, {
          attempts: earlierAttempts,
          statusCode: deferral.statusCode,
          lastError: deferral.lastError ?? last.message,
        });
      }
      const failed = last?.details?.[0] as AttemptFailureDetails | undefined;
      const report = {
        attempts: failed?.attempt ?? earlierAttempts + 1,
        statusCode: failed?.statusCode,
        errorCode: failed?.errorCode,
        lastError: last?.message ?? error.cause?.message ?? error.message,
      };
      // A local attempt failed and may be retried: the durable activity takes over after the policy's interval for
      // this attempt, or the receiver's longer Retry-After (a floor, never an accelerator).
      if (local && !isTest && !last?.nonRetryable) {
        const waitMs = Math.max(policyDelay(plan.retry, report.attempts), failed?.retryDelayMs ?? 0);
        earlierAttempts = report.attempts;
        lastKnown = { statusCode: report.statusCode, lastError: report.lastError };
        local = false;
        if (remaining > waitMs) {
          await sleep(waitMs, { summary: 'retry' });
          continue;
        }
        await sleep(Math.max(1, remaining), { summary: 'give-up window' });
        throw await giveUp(webhookId, projectId, webhookType, error, report);
      }
      // The window closed before the attempt after a wait could run (a timeout, no attempt): report the receiver.
      if (!last && lastKnown)
        throw await giveUp(webhookId, projectId, webhookType, error, { attempts: earlierAttempts, ...lastKnown });
      throw await giveUp(webhookId, projectId, webhookType, error, report);
    }
  }
}

/** Recorded when a refusal is decided: a history replays as it ran, whatever ALLOW_UNENCRYPTED_EVENTS says now. */
const UNENCRYPTED_EVENT_REFUSED = 'unencrypted-event-refused';
const UNENCRYPTED_SIGNAL_IGNORED = 'unencrypted-signal-ignored';

/**
 * Whether a payload that arrived unencrypted (the worker's codec marked it) is refused. Decided once, live: a refusal
 * records a patch marker, an acceptance records nothing, and a replay follows the history. So a delivery accepted
 * during the migration window still replays after it closes, and no event costs a command unless it is refused.
 */
function refused(marker: UnencryptedPayload, patchId: string): boolean {
  if (marker.allowed) return workflowInfo().unsafe.isReplaying && patched(patchId);
  return patched(patchId);
}

/**
 * The event, or the refusal of one a client without our payload key started (production, no migration window):
 * nothing is looked up or sent, and the workflow fails for good.
 */
function acceptedInput(event: DeliverWebhookEventInput): DeliverWebhookEventInput {
  const marker = unencryptedPayloadOf(event);
  if (!marker) return boundInput(event);
  if (!refused(marker, UNENCRYPTED_EVENT_REFUSED)) return boundInput(marker.value as DeliverWebhookEventInput);
  log.warn('Unencrypted event refused: its input was not encrypted with PAYLOAD_ENCRYPTION_KEYS; nothing sent');
  metricMeter.createCounter('webhook_unencrypted_refused', 'payloads').add(1, { what: 'event' });
  throw ApplicationFailure.create({
    type: FailureType.UnencryptedEventRefused,
    message:
      'Event refused: its input is not encrypted with the payload key (PAYLOAD_ENCRYPTION_KEYS); emit it with ' +
      "the service's codec (connectTemporalClient), or open a migration window with ALLOW_UNENCRYPTED_EVENTS=true",
    nonRetryable: true,
  });
}

/**
 * The event, or the refusal of an input sealed for another workflow id: a copy of another delivery's input (read
 * from its history) started again under a new id. Nothing is looked up or sent. No history has a mismatch to replay
 * (inputs were sealed after it shipped); one sealed for none is for the lookup to judge, which knows the worker's
 * settings.
 */
function boundInput(event: DeliverWebhookEventInput): DeliverWebhookEventInput {
  if (eventBinding(event, workflowInfo().workflowId) !== 'other') return event;
  log.warn('Event refused: its input was sealed for another workflow id; nothing sent', {
    sealedFor: event.workflowId,
  });
  metricMeter.createCounter('webhook_input_refused', 'payloads').add(1, { what: 'event', binding: 'other' });
  throw ApplicationFailure.create({
    type: FailureType.InputNotBound,
    message: bindingRefusal('Event', 'other'),
    nonRetryable: true,
  });
}

/** Recorded when a bare wait token (a signal from before signals named their workflow) is ignored. */
const UNBOUND_SIGNAL_IGNORED = 'unbound-signal-ignored';

/**
 * A resumeDelivery signal's wait token, as sent to this workflow. Ignored: one sent without our payload key (in
 * production), one naming another workflow (copied from another delivery's history), and a bare number (histories
 * from before it replay as they ran). An ignored signal only means the wait runs to its timer.
 */
function acceptedSignal(signalled: ResumeDeliverySignal | number): number | undefined {
  const marker = unencryptedPayloadOf(signalled);
  if (marker && refused(marker, UNENCRYPTED_SIGNAL_IGNORED)) {
    log.warn('Unencrypted resumeDelivery signal ignored: not encrypted with PAYLOAD_ENCRYPTION_KEYS');
    metricMeter.createCounter('webhook_unencrypted_refused', 'payloads').add(1, { what: 'signal' });
    return undefined;
  }
  const value = marker ? (marker.value as ResumeDeliverySignal | number) : signalled;
  const { binding, waitToken } = resumeSignalBinding(value, workflowInfo().workflowId);
  if (binding === 'bound' || (binding === 'unbound' && !patched(UNBOUND_SIGNAL_IGNORED))) return waitToken;
  log.warn('resumeDelivery signal ignored: not sealed for this workflow', { binding });
  metricMeter.createCounter('webhook_input_refused', 'payloads').add(1, { what: 'signal', binding });
  return undefined;
}

/** The first attempt as the lookup recorded it: its outcome, or its failure rebuilt as the local attempt throws it. */
function recordedAttempt(recorded: RecordedAttempt) {
  return (_input: DeliveryAttemptInput): Promise<DeliveryAttemptOutcome> => {
    if ('outcome' in recorded) return Promise.resolve(recorded.outcome);
    const { type, message, nonRetryable, details, nextRetryDelayMs } = recorded.failure;
    return Promise.reject(
      ApplicationFailure.create({ type, message, nonRetryable, details, nextRetryDelay: nextRetryDelayMs }),
    );
  };
}

/** A local attempt (the first, or the next after a wait), in the workflow task that asks for it: one try. */
function localAttempt(plan: DeliveryPlan, webhookType: WebhookType, projectId: string) {
  return proxyLocalActivities<Activities>({
    startToCloseTimeout: attemptDeadlineMs(plan.attemptTimeoutMs),
    retry: { maximumAttempts: 1 },
    summary: attemptSummary(webhookType, projectId),
  }).deliverWebhookAttempt;
}

/**
 * The durable attempts: an activity task retried by Temporal until the give-up window ends (a test gets one try).
 * Its schedule continues the delivery's: the first retry waits what the policy puts after attempt earlierAttempts+1.
 * Options come from the recorded lookup result and workflow time, so creating this proxy per call is deterministic.
 */
function durableAttempt(
  plan: DeliveryPlan,
  webhookType: WebhookType,
  projectId: string,
  giveUpAt: number,
  earlierAttempts: number,
) {
  return proxyActivities<Activities>({
    startToCloseTimeout: attemptDeadlineMs(plan.attemptTimeoutMs),
    ...(webhookType === 'TEST'
      ? { retry: { maximumAttempts: 1 } }
      : {
          scheduleToCloseTimeout: Math.max(1, giveUpAt - Date.now()),
          retry: {
            initialInterval: policyDelay(plan.retry, earlierAttempts + 1),
            backoffCoefficient: plan.retry.backoffCoefficient,
            maximumInterval: plan.retry.maximumIntervalMs,
          },
        }),
    // Emergencies first whenever attempts are queued; the fairness key is inherited from the workflow.
    priority: { priorityKey: priorityKeyOf(webhookType) },
    summary: attemptSummary(webhookType, projectId),
  }).deliverWebhookAttempt;
}

const attemptSummary = (webhookType: WebhookType, projectId: string) =>
  webhookType === 'TEST'
    ? `POST TEST event to project ${projectId}'s webhook`
    : `POST ${webhookType} to project ${projectId}'s webhook`;

/** Gives up: the delivery log learns of it (histories from before the log replay without), then the failure. */
async function giveUp(
  webhookId: string,
  projectId: string,
  webhookType: string,
  cause: TemporalFailure,
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
  cause: TemporalFailure,
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

/** The failure an attempt ended with; anything else (a bug in the workflow) is rethrown. */
function failureOfAttempt(thrown: unknown, local: boolean): TemporalFailure {
  if (thrown instanceof ActivityFailure || (local && thrown instanceof TemporalFailure)) return thrown;
  throw thrown;
}

/** The last attempt's ApplicationFailure, found below a timeout or directly under the ActivityFailure. */
function lastApplicationFailure(error: Error | undefined): ApplicationFailure | undefined {
  for (let current = error; current; current = current.cause instanceof Error ? current.cause : undefined) {
    if (current instanceof ApplicationFailure) return current;
  }
  return undefined;
}

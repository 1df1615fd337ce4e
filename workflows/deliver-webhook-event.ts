import {
  ActivityFailure,
  ApplicationFailure,
  TemporalFailure,
  condition,
  defineSignal,
  setHandler,
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
  type WorkflowRun,
  attemptDeadlineMs,
  policyDelay,
  priorityKeyOf,
  type InputRefusalDetails,
  type ResumeDeliverySignal,
} from '../common/contract';
import { acceptedInput, acceptedSignal } from './accepted-input';

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
 * Delivers one event to the project's webhook: validate, look up the registration, attempt, wait for the endpoint or
 * the next retry, give up. The workflow id is the delivery's idempotency key, sent as X-Webhook-Id.
 *
 * The common case costs the engine one workflow task: the lookup makes the first attempt with the registration it has
 * just read, and a receiver that answers 2xx at once completes the workflow in that same task. A failed attempt hands
 * over to the durable activity, which continues the same retry schedule (and the same attempt numbers). An attempt
 * deferred by the endpoint's guard made no request: the one after the wait is local again.
 *
 * The subscription rule (`isSubscribed`: TEST always, another type only when subscribed) is decided here, once, on the
 * registration the lookup read. The lookup applies it only to choose whether to make the first attempt (it must not
 * send what this refuses); each attempt applies it again as a defence against a registration changed meanwhile.
 */
export async function deliverWebhookEvent(event: DeliverWebhookEventInput): Promise<DeliverWebhookEventResult> {
  const input = acceptedInput(event);
  const { projectId, webhookType } = input;
  // A redelivery carries the original event's X-Webhook-Id, so receivers deduplicate.
  const webhookId = input.webhookId ?? workflowInfo().workflowId;
  const plan = await lookUp(input);
  if (!plan.registered) {
    log.info('No webhook registered for the project: event skipped', { projectId, webhookType });
    return { status: 'skipped', webhookId, reason: 'no-webhook', attempts: 0 };
  }
  if (!isSubscribed(plan.types, webhookType)) throw notSubscribed(projectId, webhookType);
  const delivery = beginDelivery(input, plan, webhookId);
  for (;;) {
    const attempt = await attemptDelivery(delivery);
    if ('outcome' in attempt) return deliveryResult(delivery, attempt.outcome);
    // The attempt's defence against a registration changed meanwhile: it no longer subscribes to the type.
    if (attempt.last?.type === FailureType.NotSubscribed) throw notSubscribed(projectId, webhookType, attempt.error);
    const next = await waitForNextAttempt(delivery, attempt);
    if (next !== 'attempt again') throw await giveUp(delivery, attempt.error, next);
  }
}

/** Validates the event and looks up the registration (one local activity): an invalid event fails for good. */
async function lookUp(input: DeliverWebhookEventInput): Promise<DeliveryPlan> {
  const plan: DeliveryPlan = await planDelivery(input);
  if (plan.problem !== undefined) {
    throw ApplicationFailure.create({ type: FailureType.InvalidEvent, message: plan.problem, nonRetryable: true });
  }
  // Clients give the search attributes at start; a validated event started without them (by hand) gets them here.
  if (plan.searchAttributes && workflowInfo().typedSearchAttributes.get(ProjectIdKey) === undefined) {
    upsertSearchAttributes(deliverySearchAttributes(input.projectId, input.webhookType));
  }
  return plan;
}

type AttemptActivity = (input: DeliveryAttemptInput) => Promise<DeliveryAttemptOutcome>;

/** One delivery under way: what every attempt sends, and where its schedule stands. */
interface Delivery {
  readonly projectId: string;
  readonly webhookType: WebhookType;
  /** The X-Webhook-Id of every attempt. */
  readonly webhookId: string;
  /** The X-Webhook-Id the event was started with (a redelivery's), handed to the attempts as given. */
  readonly givenWebhookId: string | undefined;
  readonly plan: DeliveryPlan;
  readonly isTest: boolean;
  /** The payload serialised once: every attempt signs and sends these bytes. */
  readonly body: string;
  /** Every attempt is sealed for this run: a copy scheduled by another workflow is refused by the activity. */
  readonly boundTo: WorkflowRun;
  /** The local attempt (the first, or the next after a wait): its options are the delivery's, so built once. */
  readonly localAttempt: AttemptActivity;
  /** The give-up window runs from the first attempt, across waits for the endpoint, and stands still while paused. */
  giveUpAt: number;
  /** Attempts that reached the receiver before the current call: the local first one, or those before a deferral. */
  earlierAttempts: number;
  /** The receiver's last failure as a deferral reported it, for a give-up that comes while no attempt runs. */
  lastKnown?: Pick<DeliveryFailedDetails, 'statusCode' | 'lastError'>;
  /** The next attempt is local (read from the recorded lookup, not patched(): no marker per delivery). */
  local: boolean;
  /** The first attempt, made by the lookup (one local activity for both): it counts as the local one. */
  recordedFirst: RecordedAttempt | undefined;
  /** Waits for the endpoint so far, and the latest one the resumer's signal ended. */
  waits: number;
  resumed: number;
}

function beginDelivery(input: DeliverWebhookEventInput, plan: DeliveryPlan, webhookId: string): Delivery {
  const { projectId, webhookType } = input;
  const { workflowId, runId } = workflowInfo();
  const delivery: Delivery = {
    projectId,
    webhookType,
    webhookId,
    givenWebhookId: input.webhookId,
    plan,
    isTest: webhookType === 'TEST',
    body: JSON.stringify(input.payload),
    boundTo: { workflowId, runId },
    localAttempt: proxyLocalActivities<Activities>({
      startToCloseTimeout: attemptDeadlineMs(plan.attemptTimeoutMs),
      retry: { maximumAttempts: 1 },
      summary: attemptSummary(webhookType, projectId),
    }).deliverWebhookAttempt,
    giveUpAt: Date.now() + plan.retry.giveUpAfterMs,
    earlierAttempts: 0,
    local: plan.firstAttemptLocal === true,
    recordedFirst: plan.firstAttempt,
    waits: 0,
    resumed: 0,
  };
  setHandler(resumeDelivery, (signalled) => {
    const waitToken = acceptedSignal(signalled);
    if (waitToken !== undefined) delivery.resumed = Math.max(delivery.resumed, waitToken);
  });
  return delivery;
}

/** An attempt that failed: its failure, and the ApplicationFailure it carries (the activity's verdict), if any. */
interface FailedAttempt {
  error: TemporalFailure;
  last: ApplicationFailure | undefined;
}

/** The next attempt: the one the lookup recorded, a local activity, or the durable activity. */
async function attemptDelivery(delivery: Delivery): Promise<{ outcome: DeliveryAttemptOutcome } | FailedAttempt> {
  const input: DeliveryAttemptInput = {
    projectId: delivery.projectId,
    webhookType: delivery.webhookType,
    body: delivery.body,
    webhookId: delivery.givenWebhookId,
    earlierAttempts: delivery.earlierAttempts,
    waitToken: delivery.waits + 1,
    boundTo: delivery.boundTo,
  };
  const attempt = delivery.recordedFirst
    ? recordedAttempt(delivery.recordedFirst)
    : delivery.local
      ? delivery.localAttempt
      : durableAttempt(delivery);
  delivery.recordedFirst = undefined;
  try {
    return { outcome: await attempt(input) };
  } catch (thrown) {
    // A local attempt's failure arrives as it was thrown (no ActivityFailure around it); a timeout as TimeoutFailure.
    const error = failureOfAttempt(thrown, delivery.local);
    return { error, last: lastApplicationFailure(error) };
  }
}

function deliveryResult(delivery: Delivery, outcome: DeliveryAttemptOutcome): DeliverWebhookEventResult {
  const { projectId, webhookType, webhookId } = delivery;
  if (outcome.status === 'skipped') {
    log.warn('Webhook deleted while the delivery was pending: event not delivered', { projectId, webhookType });
    return { status: 'skipped', webhookId, reason: outcome.reason, attempts: outcome.attempt - 1 };
  }
  const { attempt: attempts, statusCode, durationMs } = outcome;
  return { status: 'delivered', webhookId, attempts, statusCode, durationMs };
}

/** What a give-up reports: the attempts that reached the receiver and its last answer. */
type GiveUpReport = Omit<DeliveryFailedDetails, 'projectId' | 'webhookType'>;

/** After a failed attempt: the wait for the endpoint or for the retry, then 'attempt again'; else the give-up. */
async function waitForNextAttempt(
  delivery: Delivery,
  { error, last }: FailedAttempt,
): Promise<'attempt again' | GiveUpReport> {
  const refusal = last?.type === FailureType.InputNotBound ? (last.details?.[0] as InputRefusalDetails) : undefined;
  if (refusal?.binding === 'unbound' && !delivery.local) {
    // An attempt scheduled before attempts were sealed, refused by a worker that requires it (nothing was sent):
    // the same delivery goes on with a sealed one, from the attempts the refused one had made.
    delivery.earlierAttempts = refusal.attempt;
    return 'attempt again';
  }
  const remaining = delivery.giveUpAt - Date.now();
  if (last?.type === DELIVERY_DEFERRED) return waitForEndpoint(delivery, last, remaining);
  const failed = last?.details?.[0] as AttemptFailureDetails | undefined;
  const report = {
    attempts: failed?.attempt ?? delivery.earlierAttempts + 1,
    statusCode: failed?.statusCode,
    errorCode: failed?.errorCode,
    lastError: last?.message ?? error.cause?.message ?? error.message,
  };
  if (delivery.local && !delivery.isTest && !last?.nonRetryable)
    return waitToHandOver(delivery, report, failed?.retryDelayMs, remaining);
  // The window closed before the attempt after a wait could run (a timeout, no attempt): report the receiver.
  if (!last && delivery.lastKnown) return { attempts: delivery.earlierAttempts, ...delivery.lastKnown };
  return report;
}

/**
 * An attempt the endpoint's guard deferred (no request was made): held while the webhook is paused, else a durable
 * wait within the give-up window. A test is answered at once instead.
 */
async function waitForEndpoint(
  delivery: Delivery,
  deferred: ApplicationFailure,
  remaining: number,
): Promise<'attempt again' | GiveUpReport> {
  const deferral = deferred.details?.[0] as DeliveryDeferredDetails;
  delivery.earlierAttempts = deferral.attempt - 1;
  if (deferral.lastError) delivery.lastKnown = { statusCode: deferral.statusCode, lastError: deferral.lastError };
  // Held by a pause, or queued for the endpoint's rate: nothing failed, so the give-up window stands still.
  const windowStill = deferral.reason === 'paused' || (deferral.reason === 'rate-limited' && !delivery.isTest);
  if (windowStill) await holdWithWindowStill(delivery, deferral.waitMs);
  else if (delivery.isTest || !(await waitForResumer(delivery, deferral, remaining)))
    return {
      attempts: delivery.earlierAttempts,
      statusCode: deferral.statusCode,
      lastError: deferral.lastError ?? deferred.message,
    };
  // No attempt was made: the next one is local again on the fast path, in the task the wait ends with.
  delivery.local = delivery.plan.localAfterWait === true;
  return 'attempt again';
}

/**
 * Held by a pause or queued for the endpoint's rate: the give-up window stands still until the resumer's signal
 * (paced, falls first) or the timer (the pause's own end, or a safety net). Only these reasons' histories take this
 * path, so it needs no patch.
 */
async function holdWithWindowStill(delivery: Delivery, waitMs: number): Promise<void> {
  const heldFrom = Date.now();
  const waitToken = (delivery.waits += 1);
  await condition(() => delivery.resumed >= waitToken, waitMs);
  delivery.giveUpAt += Date.now() - heldFrom;
}

/**
 * A durable wait, not a stream of failing attempts: until the resumer's signal for this wait (time to probe, or the
 * breaker closed) or the timer. False when the give-up window closes first.
 */
async function waitForResumer(delivery: Delivery, deferral: DeliveryDeferredDetails, remaining: number) {
  const waitToken = (delivery.waits += 1);
  const timeoutMs = Math.min(deferral.waitMs, Math.max(1, remaining));
  const woken = await condition(() => delivery.resumed >= waitToken, timeoutMs, { summary: deferral.reason });
  return woken || remaining > deferral.waitMs;
}

/**
 * A local attempt failed and may be retried: the durable activity takes over after the policy's interval for this
 * attempt, or the receiver's longer Retry-After (a floor, never an accelerator), when the window has room for it.
 */
async function waitToHandOver(
  delivery: Delivery,
  report: GiveUpReport,
  retryDelayMs: number | undefined,
  remaining: number,
): Promise<'attempt again' | GiveUpReport> {
  const waitMs = Math.max(policyDelay(delivery.plan.retry, report.attempts), retryDelayMs ?? 0);
  delivery.earlierAttempts = report.attempts;
  delivery.lastKnown = { statusCode: report.statusCode, lastError: report.lastError };
  delivery.local = false;
  if (remaining > waitMs) {
    await sleep(waitMs, { summary: 'retry' });
    return 'attempt again';
  }
  await sleep(Math.max(1, remaining), { summary: 'give-up window' });
  return report;
}

/** The first attempt as the lookup recorded it: its outcome, or its failure rebuilt as the local attempt throws it. */
function recordedAttempt(recorded: RecordedAttempt): AttemptActivity {
  return (_input) => {
    if ('outcome' in recorded) return Promise.resolve(recorded.outcome);
    const { type, message, nonRetryable, details, nextRetryDelayMs } = recorded.failure;
    return Promise.reject(
      ApplicationFailure.create({ type, message, nonRetryable, details, nextRetryDelay: nextRetryDelayMs }),
    );
  };
}

/**
 * The durable attempts: an activity task retried by Temporal until the give-up window ends (a test gets one try).
 * Its schedule continues the delivery's: the first retry waits what the policy puts after attempt earlierAttempts+1.
 * Its options change with each hand-over (what is left of the window, where the schedule stands), so each is built
 * for its call, from the recorded lookup result and workflow time: deterministic.
 */
function durableAttempt(delivery: Delivery): AttemptActivity {
  const { plan, webhookType, projectId } = delivery;
  return proxyActivities<Activities>({
    startToCloseTimeout: attemptDeadlineMs(plan.attemptTimeoutMs),
    ...(delivery.isTest
      ? { retry: { maximumAttempts: 1 } }
      : {
          scheduleToCloseTimeout: Math.max(1, delivery.giveUpAt - Date.now()),
          retry: {
            initialInterval: policyDelay(plan.retry, delivery.earlierAttempts + 1),
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
async function giveUp(delivery: Delivery, cause: TemporalFailure, outcome: GiveUpReport): Promise<ApplicationFailure> {
  const { webhookId, projectId, webhookType } = delivery;
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
  outcome: GiveUpReport,
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

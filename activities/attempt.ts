import type { KeyObject } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  FailureType,
  isSubscribed,
  notSubscribedMessage,
  priorityKeyOf,
  type AttemptFailureDetails,
  type DeliveryAttemptInput,
  type DeliveryAttemptOutcome,
  type RetrySchedule,
} from '../common/contract';
import type { Logger } from '../common/telemetry/logger';
import { registrationSecretAad, type SecretBox } from '../common/crypto/secrets';
import { asymmetricSignatureHeader, signPayload, standardWebhookSignatureHeader } from '../common/crypto/signature';
import { createSigningKeyCache, type SigningKeyCache } from '../common/crypto/signing-keys';
import {
  HTTPS_REQUIRED,
  parseWebhookUrl,
  refusedScheme,
  webhookUrlPolicy,
  type WebhookUrlPolicy,
} from '../common/registration/webhook-url';
import {
  eraseExpiredPreviousSecrets,
  findRegistration,
  forgetAttemptedWaiter,
  forgetUnregisteredWaiter,
  holdForGone,
  isPaused,
  type Db,
  type RegistrationRow,
} from '../db';
import type { DeliveryLog } from './delivery-log';
import { assertAttemptBound, currentRun } from './input-binding';
import { createEndpointGuard } from './endpoint/breaker';
import type { ActivityDeps } from './deps';
import { createPrepareDelivery, DELIVERY_OPTIONS, type PreparedDelivery } from './delivery-options';
import { ProxyUnavailableError, type ReceiverResponse } from './http/client';
import { createPauseHold, type HeldAttempt } from './endpoint/pause';
import { classifyStatus, type ReceiverAnswer } from './http/answer';
import { createSlowDown, isSlowedDown } from './endpoint/slow-down';
import { createRateLimit } from './endpoint/rate-limit';
import { ForbiddenTargetError } from './http/ssrf';

/** Who this attempt is, for the X-Webhook-Id header and every log line. */
interface AttemptContext {
  /** The event's idempotency key, the same for every attempt: the workflow id, or the original's on a redelivery. */
  webhookId: string;
  workflowId: string;
  attempt: number;
  log: Logger;
}

/**
 * One delivery attempt, in named steps: read the registration afresh (a DELETE stops delivery, a re-registration
 * brings its new URL and secret), open its secret, sign the workflow's bytes with this attempt's timestamp, POST
 * them, and classify the receiver's answer for Temporal's retry policy. The lookup, which has just read the
 * registration, hands it over for the first attempt instead of a second read.
 */
export function createAttempt(deps: ActivityDeps, deliveryLog: DeliveryLog) {
  const { db, secretBox, logger, config, http } = deps;
  const retrySchedule: RetrySchedule = {
    initialIntervalMs: config.DELIVERY_INITIAL_INTERVAL_MS,
    backoffCoefficient: config.DELIVERY_BACKOFF_COEFFICIENT,
    maximumIntervalMs: config.DELIVERY_MAX_INTERVAL_MS,
  };
  const throughEndpointGuard = createEndpointGuard(deps);
  const holdWhilePaused = createPauseHold(deps);
  const slowDown = createSlowDown(deps);
  const rateLimit = createRateLimit(deps);
  const prepareDelivery = createPrepareDelivery(deps, deps.deliveryOptions ?? DELIVERY_OPTIONS);
  // v1a: each registration's private keys parsed once, not on every attempt (again when a rotation changes them).
  const signingKeys = createSigningKeyCache(secretBox);

  return async function attempt(
    input: DeliveryAttemptInput,
    lookup?: { registration: RegistrationRow | undefined },
  ): Promise<DeliveryAttemptOutcome> {
    const { projectId, webhookType, body } = input;
    // The lookup checked its own input; an attempt scheduled as an activity must be sealed for the scheduling run.
    if (!lookup) assertAttemptBound(input, deps.requireBoundInputs ?? false, logger);
    // The lookup's own retries (a database error before any POST) are not attempts of the delivery.
    const context = attemptContext(logger, input, lookup ? 1 : Context.current().info.attempt);
    const logKey = {
      id: context.webhookId,
      projectId,
      type: webhookType,
      workflowId: context.workflowId,
      runId: currentRun().runId,
      attempt: context.attempt,
    };
    assertHeaderSafeId(context.webhookId);
    // Start-to-close counts from the activity's start: an option's own request (a token) ends before it.
    const deadlineMs = Date.now() + Context.current().info.startToCloseTimeoutMs;

    const registration = lookup ? lookup.registration : await findRegistration(db, projectId);
    if (!registration) {
      context.log.warn('webhook registration deleted: delivery stopped, event not delivered');
      // Kept for a registration that did not come: nobody is to wake it any more.
      if ((input.waitToken ?? 1) > 1) await forgetUnregisteredWaiter(db, projectId, context.workflowId);
      await deliveryLog.skipped(logKey, 'The webhook was deleted while the delivery was pending');
      return { status: 'skipped', reason: 'registration-deleted', attempt: context.attempt };
    }
    if (!isSubscribed(registration.types, webhookType)) {
      // Spec section 6, for types changed while the delivery was pending: not delivered, failed for good (not
      // retried), and logged skipped with the reason, as the lookup logs an event of a type not subscribed.
      const reason = notSubscribedMessage(projectId, webhookType);
      context.log.warn('webhook no longer subscribes to the type: delivery stopped, event not delivered');
      await deliveryLog.skipped(logKey, reason);
      throw ApplicationFailure.create({ type: FailureType.NotSubscribed, message: reason, nonRetryable: true });
    }
    const held: Omit<HeldAttempt, 'pausedUntil'> = {
      registrationId: registration.id,
      isTest: webhookType === 'TEST',
      waitToken: input.waitToken,
      priority: priorityKeyOf(webhookType),
      ...context,
    };
    // Paused, or held since the receiver answered 410: nothing is sent; the delivery waits for the pause's end or the
    // member's resume (read with the registration, no extra query).
    if (isPaused(registration))
      await holdWhilePaused({ ...held, pausedUntil: registration.pausedUntil }, () => deliveryLog.held(logKey));
    // The receiver asked to slow down (this delivery or another): nothing is sent before then.
    if (isSlowedDown(registration, held.isTest))
      await slowDown.wait({
        ...held,
        slowedUntil: registration.slowedUntil!,
        statusCode: registration.slowedStatusCode,
      });
    const url = receiverUrl(registration, webhookUrlPolicy(config));
    const secrets = await openSecrets(db, secretBox, signingKeys, registration, context);
    // Custom headers, client certificate, OAuth, route: what the registration's options add to this attempt's request.
    const delivery = await prepareDelivery(registration, {
      url,
      log: context.log,
      attempt: context.attempt,
      deadlineMs,
    });
    const target = {
      registrationId: registration.id,
      isTest: webhookType === 'TEST',
      priority: priorityKeyOf(webhookType),
      waitToken: input.waitToken,
      projectId,
      ...context,
    };
    // The registration's rate per second (read with it: no query without one): a slot now or soon, else queued.
    const slot = await rateLimit.reserve({ ...target, rateLimitPerSecond: registration.rateLimitPerSecond });
    const posted = throughEndpointGuard(target, async () => {
      await rateLimit.keep(slot);
      const started = performance.now();
      const elapsed = () => Math.round(performance.now() - started);
      let response: ReceiverResponse;
      try {
        // The options' headers first: the service's signed headers win over any (the API refuses those names). An
        // option's authorization is obtained here, past the breaker; a 401 may have it obtained afresh, and sent again.
        // Signed right before each request, past the rate limit's wait and the token's fetch: the timestamp is fresh.
        response = await delivery.send((headers) =>
          http.post(url, { ...headers, ...signedHeaders(secrets, context.webhookId, body) }, body, delivery.connection),
        );
      } catch (error) {
        throw await deliveryLog.failedAttempt(
          logKey,
          unreachableFailure(error, url, elapsed(), context, config.WEBHOOK_TIMEOUT_MS, delivery),
        );
      }
      const durationMs = elapsed();
      const answer = classifyStatus(
        response.statusCode,
        response.retryAfter,
        retrySchedule,
        context.attempt,
        Date.now(),
      );
      if (answer.kind === 'slow-down' && !held.isTest)
        await slowDown.slowDown(registration.id, answer.slowForMs, response.statusCode, context.log);
      const logged = deliveryLog.attempt(logKey, () => classifyAnswer(response, answer, url, durationMs, context));
      if (answer.kind !== 'gone') return logged;
      // 410: the attempt is logged failed; the delivery is held with the registration's others until a resume.
      return logged.catch(async (failure: unknown) => {
        const hold = await holdForGone(db, registration.id, response.statusCode);
        if (hold?.started)
          context.log.warn('receiver answered 410 Gone: the webhook’s deliveries are held until a member resumes');
        if (!hold || held.isTest) throw failure;
        // The attempt that got the 410 counts as made: the next one is the one after it.
        return holdWhilePaused(
          { ...held, pausedUntil: null, attempt: context.attempt + 1, goneStatusCode: response.statusCode },
          () => deliveryLog.held(logKey),
        );
      });
    });
    // The first attempt waited for nothing; one after a wait lets the less urgent waiters go once it has ended.
    if ((input.waitToken ?? 1) <= 1) return posted;
    try {
      return await posted;
    } finally {
      await forgetAttemptedWaiter(db, registration.id, context.workflowId, input.waitToken!).catch((error: unknown) =>
        context.log.warn({ err: error }, 'woken waiter not forgotten: the resumer lets the others go after its lease'),
      );
    }
  };
}

/** The attempt number counts the delivery's attempts, local first one included, across waits for the breaker. */
function attemptContext(logger: Logger, input: DeliveryAttemptInput, runAttempt: number): AttemptContext {
  const { projectId, webhookType } = input;
  const info = Context.current().info;
  const workflowId = info.workflowExecution?.workflowId ?? info.activityId;
  const webhookId = input.webhookId ?? workflowId;
  const attempt = (input.earlierAttempts ?? 0) + runAttempt;
  return { webhookId, workflowId, attempt, log: logger.child({ projectId, webhookType, workflowId, attempt }) };
}

/** Visible ASCII only: undici refuses a header outside Latin-1, which would fail every attempt for 24 h. */
const HEADER_SAFE_ID = /^[\x21-\x7e]{1,1000}$/;

/** A workflow id (started by hand, say) that cannot travel as X-Webhook-Id fails the delivery at once. */
function assertHeaderSafeId(webhookId: string): void {
  if (HEADER_SAFE_ID.test(webhookId)) return;
  throw ApplicationFailure.create({
    type: FailureType.InvalidEvent,
    message: 'The workflow id cannot be sent as X-Webhook-Id: use only visible ASCII characters (A-Z a-z 0-9 . _ : -)',
    nonRetryable: true,
  });
}

/** The same rule as registration: a URL registered before https became required is not delivered to either. */
function receiverUrl(registration: RegistrationRow, policy: WebhookUrlPolicy): URL {
  const url = parseWebhookUrl(registration.url);
  if (url && refusedScheme(url, policy))
    throw ApplicationFailure.create({
      type: FailureType.InvalidUrl,
      message: `The registered webhook URL ${HTTPS_REQUIRED} (ALLOW_HTTP_WEBHOOK_URLS=false)`,
      nonRetryable: true,
    });
  if (url) return url;
  throw ApplicationFailure.create({
    type: FailureType.InvalidUrl,
    message: 'The registered webhook URL is not an http(s) URL without credentials',
    nonRetryable: true,
  });
}

/** What signs an attempt: the secrets, and under v1a the Ed25519 private keys (parsed, cached); each newest first. */
interface SigningMaterial {
  secrets: [current: string, ...previous: string[]];
  privateKeys: KeyObject[];
}

/**
 * The signing secrets, newest first: the current one, and the one a rotation replaced while its overlap lasts; under
 * v1a the same for the Ed25519 private keys. Retryable when one cannot be opened: another worker (or this one, given
 * the right WEBHOOK_SECRET_KEY) may open it. A previous secret or key found expired is erased here (the worker's sweep
 * erases the ones no delivery reads).
 */
async function openSecrets(
  db: Db,
  secretBox: SecretBox,
  signingKeys: SigningKeyCache,
  registration: RegistrationRow,
  { log }: AttemptContext,
): Promise<SigningMaterial> {
  const { previousSecretSealed, previousSecretExpiresAt } = registration;
  const now = Date.now();
  const overlapping = previousSecretSealed !== null && (previousSecretExpiresAt?.getTime() ?? 0) > now;
  const keyOverlapping = (registration.previousSigningKeyExpiresAt?.getTime() ?? 0) > now;
  const expired =
    (previousSecretSealed !== null && !overlapping) ||
    (registration.previousSigningKeySealed !== null && !keyOverlapping);
  if (expired)
    await eraseExpiredPreviousSecrets(db, registration.id).catch((error: unknown) =>
      log.warn({ err: error }, 'could not erase an expired previous webhook secret; the sweep will'),
    );
  const open = (sealed: string) => secretBox.open(sealed, registrationSecretAad(registration.id));
  try {
    const current = open(registration.secretSealed);
    return {
      secrets: overlapping ? [current, open(previousSecretSealed)] : [current],
      privateKeys: registration.signatureScheme === 'v1a' ? signingKeys.open(registration, keyOverlapping) : [],
    };
  } catch {
    log.error('cannot open the webhook secret: is WEBHOOK_SECRET_KEY the one the registration was sealed with?');
    throw ApplicationFailure.create({
      type: FailureType.SecretUnavailable,
      message: 'The webhook signing secret could not be opened with this worker’s WEBHOOK_SECRET_KEY',
    });
  }
}

/**
 * Spec sections 5 and 6: X-Timestamp of this attempt and X-Signature over `{timestamp}.{body}` with the newest secret;
 * and Standard Webhooks: webhook-id, webhook-timestamp (the same instant, in seconds) and webhook-signature with every
 * active secret, so a receiver still holding the replaced secret keeps verifying during a rotation's overlap; under
 * v1a, first a `v1a` Ed25519 signature with every active key pair, so a receiver holding only the public key verifies.
 */
function signedHeaders(
  { secrets, privateKeys }: SigningMaterial,
  webhookId: string,
  body: string,
): Record<string, string> {
  const signedAt = Date.now();
  const timestamp = String(signedAt);
  const timestampSeconds = String(Math.floor(signedAt / 1000));
  return {
    'content-type': 'application/json',
    'user-agent': 'webhook-delivery-service',
    'x-timestamp': timestamp,
    'x-signature': signPayload(secrets[0], timestamp, body),
    'x-webhook-id': webhookId,
    'webhook-id': webhookId,
    'webhook-timestamp': timestampSeconds,
    'webhook-signature':
      privateKeys.length > 0
        ? asymmetricSignatureHeader(privateKeys, secrets, webhookId, timestampSeconds, body)
        : standardWebhookSignatureHeader(secrets, webhookId, timestampSeconds, body),
  };
}

/**
 * No answer: the SSRF guard's refusal is final; the egress proxy's refusal and anything else (timeout, refused, reset,
 * DNS) are retried.
 */
function unreachableFailure(
  error: unknown,
  url: URL,
  durationMs: number,
  { attempt, log }: AttemptContext,
  timeoutMs: number,
  delivery: Pick<PreparedDelivery, 'unreachable'>,
): ApplicationFailure {
  // An option's refusal (a client certificate key that could not be opened, a token endpoint that gave no token): as
  // it was thrown.
  if (error instanceof ApplicationFailure) return error;
  if (error instanceof ForbiddenTargetError) {
    log.error({ host: url.host, category: error.category, durationMs }, 'webhook target refused by the SSRF guard');
    return ApplicationFailure.create({
      type: FailureType.TargetForbidden,
      message: error.message,
      nonRetryable: true,
      details: [{ attempt, durationMs, errorCode: error.code } satisfies AttemptFailureDetails],
    });
  }
  if (error instanceof ProxyUnavailableError) {
    // The proxy's failure, not the receiver's: retried on the delivery's schedule, never counted by its breaker.
    log.warn({ host: url.host, errorCode: error.code, durationMs }, 'webhook delivery attempt failed: egress proxy');
    return ApplicationFailure.create({
      type: FailureType.ProxyUnavailable,
      message: error.message,
      details: [{ attempt, durationMs, errorCode: error.code } satisfies AttemptFailureDetails],
    });
  }
  const errorCode = errorCodeOf(error);
  log.warn({ host: url.host, errorCode, durationMs }, 'webhook delivery attempt failed: receiver unreachable');
  // An option names the failure in its terms (a handshake refused over the client certificate): the breaker's message.
  const refusal = delivery.unreachable(errorCode);
  return ApplicationFailure.create({
    type: FailureType.ReceiverUnreachable,
    message:
      refusal ??
      (errorCode === 'TIMEOUT'
        ? `Receiver did not answer within ${timeoutMs} ms (TIMEOUT)`
        : `Receiver unreachable: ${errorCode}`),
    details: [{ attempt, durationMs, errorCode } satisfies AttemptFailureDetails],
  });
}

/**
 * 2xx is delivered; 410 is not retried (the caller holds the delivery); any other status is retried, after at least the
 * receiver's Retry-After on 429, 502, 503 and 504 (activities/http/answer.ts).
 */
function classifyAnswer(
  response: ReceiverResponse,
  answer: ReceiverAnswer,
  url: URL,
  durationMs: number,
  { attempt, log }: AttemptContext,
): DeliveryAttemptOutcome {
  const { statusCode } = response;
  if (answer.kind === 'delivered') {
    log.info({ statusCode, durationMs }, 'webhook delivered');
    return { status: 'delivered', attempt, statusCode, durationMs };
  }
  if (answer.kind === 'gone') {
    log.warn({ host: url.host, statusCode, durationMs }, 'webhook delivery attempt failed: receiver gone');
    throw ApplicationFailure.create({
      type: FailureType.ReceiverGone,
      message: `Receiver answered HTTP ${statusCode} Gone: deliveries held until a member resumes the webhook`,
      nonRetryable: true,
      details: [{ attempt, durationMs, statusCode } satisfies AttemptFailureDetails],
    });
  }
  const retryDelay = answer.kind === 'slow-down' ? answer.retryDelayMs : undefined;
  log.warn(
    { host: url.host, statusCode, durationMs, nextRetryDelay: retryDelay },
    'webhook delivery attempt failed: receiver status',
  );
  throw ApplicationFailure.create({
    type: FailureType.ReceiverStatus,
    message: `Receiver answered HTTP ${statusCode}${statusCode >= 300 && statusCode < 400 ? ' (redirects are not followed)' : ''}`,
    details: [{ attempt, durationMs, statusCode, retryDelayMs: retryDelay } satisfies AttemptFailureDetails],
    nextRetryDelay: retryDelay,
  });
}

function errorCodeOf(error: unknown): string {
  for (let current = error; current instanceof Error; current = current.cause) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code.length > 0) return code;
  }
  return error instanceof Error ? error.name : 'UNKNOWN';
}

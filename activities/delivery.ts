import { performance } from 'node:perf_hooks';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { registrationSecretAad } from '../common/secrets';
import { signPayload } from '../common/signature';
import { parseWebhookUrl } from '../common/webhook-url';
import { findRegistration } from '../db';
import {
  FailureType,
  isSubscribed,
  notSubscribedMessage,
  type AttemptFailureDetails,
  type DeliveryAttemptInput,
  type DeliveryAttemptOutcome,
} from '../workflows/contract';
import type { ActivityDeps } from './deps';
import { nextRetryDelay as retryDelayAfter, parseRetryAfter } from './retry-after';
import { ForbiddenTargetError } from './ssrf';

/**
 * One delivery attempt. Reads the registration afresh (a DELETE stops delivery, a re-registration brings its
 * new URL and secret), signs the workflow's bytes with this attempt's timestamp and POSTs them.
 */
export function createDeliverWebhookAttempt(deps: ActivityDeps) {
  const { db, secretBox, logger, config, http } = deps;
  const retrySchedule = {
    initialIntervalMs: config.DELIVERY_INITIAL_INTERVAL_MS,
    backoffCoefficient: config.DELIVERY_BACKOFF_COEFFICIENT,
    maximumIntervalMs: config.DELIVERY_MAX_INTERVAL_MS,
  };

  return async function deliverWebhookAttempt(input: DeliveryAttemptInput): Promise<DeliveryAttemptOutcome> {
    const { projectId, webhookType, body } = input;
    const info = Context.current().info;
    // The workflow id is the event's idempotency key: the same for every attempt.
    const workflowId = info.workflowExecution?.workflowId ?? info.activityId;
    const attempt = info.attempt;
    const log = logger.child({ projectId, webhookType, workflowId, attempt });

    const registration = await findRegistration(db, projectId);
    if (!registration) {
      log.warn('webhook registration deleted: delivery stopped, event not delivered');
      return { status: 'skipped', reason: 'registration-deleted', attempt };
    }
    if (!isSubscribed(registration.types, webhookType)) {
      throw ApplicationFailure.create({
        type: FailureType.NotSubscribed,
        message: notSubscribedMessage(projectId, webhookType),
        nonRetryable: true,
      });
    }
    const url = parseReceiverUrl(registration.url);
    let secret: string;
    try {
      secret = secretBox.open(registration.secretSealed, registrationSecretAad(registration.id));
    } catch {
      log.error('cannot open the webhook secret: is WEBHOOK_SECRET_KEY the one the registration was sealed with?');
      throw ApplicationFailure.create({
        type: FailureType.SecretUnavailable,
        message: 'The webhook signing secret could not be opened with this worker’s WEBHOOK_SECRET_KEY',
      });
    }

    const timestamp = String(Date.now());
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'webhook-delivery-service',
      'x-timestamp': timestamp,
      'x-signature': signPayload(secret, timestamp, body),
      'x-webhook-id': workflowId,
    };
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);

    let response;
    try {
      response = await http.post(url, headers, body);
    } catch (error) {
      const durationMs = elapsed();
      if (error instanceof ForbiddenTargetError) {
        log.error({ host: url.host, range: error.range, durationMs }, 'webhook target refused by the SSRF guard');
        throw ApplicationFailure.create({
          type: FailureType.TargetForbidden,
          message: error.message,
          nonRetryable: true,
          details: [{ attempt, durationMs, errorCode: error.code } satisfies AttemptFailureDetails],
        });
      }
      const errorCode = errorCodeOf(error);
      log.warn({ host: url.host, errorCode, durationMs }, 'webhook delivery attempt failed: receiver unreachable');
      throw ApplicationFailure.create({
        type: FailureType.ReceiverUnreachable,
        message:
          errorCode === 'TIMEOUT'
            ? `Receiver did not answer within ${config.WEBHOOK_TIMEOUT_MS} ms (TIMEOUT)`
            : `Receiver unreachable: ${errorCode}`,
        details: [{ attempt, durationMs, errorCode } satisfies AttemptFailureDetails],
      });
    }

    const durationMs = elapsed();
    const { statusCode } = response;
    if (statusCode >= 200 && statusCode < 300) {
      log.info({ statusCode, durationMs }, 'webhook delivered');
      return { status: 'delivered', attempt, statusCode, durationMs };
    }
    const nextRetryDelay =
      statusCode === 429 || statusCode === 503
        ? retryDelayAfter(retrySchedule, attempt, parseRetryAfter(response.retryAfter, Date.now()))
        : undefined;
    log.warn(
      { host: url.host, statusCode, durationMs, nextRetryDelay },
      'webhook delivery attempt failed: receiver status',
    );
    throw ApplicationFailure.create({
      type: FailureType.ReceiverStatus,
      message: `Receiver answered HTTP ${statusCode}${statusCode >= 300 && statusCode < 400 ? ' (redirects are not followed)' : ''}`,
      details: [{ attempt, durationMs, statusCode } satisfies AttemptFailureDetails],
      nextRetryDelay,
    });
  };
}

function parseReceiverUrl(text: string): URL {
  const url = parseWebhookUrl(text);
  if (!url) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidUrl,
      message: 'The registered webhook URL is not an http(s) URL without credentials',
      nonRetryable: true,
    });
  }
  return url;
}

function errorCodeOf(error: unknown): string {
  for (let current = error; current instanceof Error; current = current.cause) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code.length > 0) return code;
  }
  return error instanceof Error ? error.name : 'UNKNOWN';
}

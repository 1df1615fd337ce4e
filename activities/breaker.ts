import { ApplicationFailure } from '@temporalio/activity';
import { ISOLATION_DEFAULTS } from '../common/config';
import {
  DELIVERY_DEFERRED,
  FailureType,
  type AttemptFailureDetails,
  type DeliveryDeferredDetails,
} from '../common/contract';
import type { Logger } from '../common/logger';
import { admitAttempt, recordFailure, recordSuccess, type BreakerThresholds, type ReceiverFailure } from '../db';
import type { ActivityDeps } from './deps';

/** Only what the receiver did counts against its breaker; our own refusals (SSRF, bad URL, secret) do not. */
const RECEIVER_FAILURES: ReadonlySet<string> = new Set([FailureType.ReceiverStatus, FailureType.ReceiverUnreachable]);

export interface EndpointAttempt {
  registrationId: string;
  /** TEST attempts skip the breaker (an operator checking a fix) but count towards the concurrency limit. */
  isTest: boolean;
  /** The activity attempt number, reported with a deferral. */
  attempt: number;
  log: Logger;
}

/**
 * Isolation of one receiver from everyone else's deliveries: at most ENDPOINT_MAX_CONCURRENT_ATTEMPTS attempts in
 * flight per registration in this worker, and a circuit breaker per registration in Postgres. An attempt it does
 * not let through throws a non-retryable WebhookDeliveryDeferred: the workflow sleeps durably and asks again, so a
 * failing endpoint costs timers, not activity slots or requests.
 */
export function createEndpointGuard({ db, config }: Pick<ActivityDeps, 'db' | 'config'>) {
  const settings = { ...ISOLATION_DEFAULTS, ...definedOnly(config) };
  const thresholds: BreakerThresholds = {
    failureThreshold: settings.BREAKER_FAILURE_THRESHOLD,
    openMs: settings.BREAKER_OPEN_MS,
    maxOpenMs: settings.BREAKER_MAX_OPEN_MS,
    probeLeaseMs: config.WEBHOOK_TIMEOUT_MS + 5_000,
  };
  const inFlight = new Map<string, number>();
  // Waiters wake spread over at least the rest of the open period, so a large backlog re-checks (and, once closed,
  // resumes) at a bounded rate instead of all at once when the period ends.
  const spread = (ms: number) => Math.ceil(ms + Math.random() * Math.max(settings.BREAKER_RESUME_SPREAD_MS, ms));

  return async function throughEndpointGuard<T>(target: EndpointAttempt, post: () => Promise<T>): Promise<T> {
    const { registrationId, isTest, log } = target;
    const busy = inFlight.get(registrationId) ?? 0;
    if (busy >= settings.ENDPOINT_MAX_CONCURRENT_ATTEMPTS) {
      // One of the attempts in flight ends within the attempt timeout: ask again about then.
      throw deferred(target, 'endpoint-busy', Math.ceil(config.WEBHOOK_TIMEOUT_MS * (0.5 + Math.random())));
    }
    inFlight.set(registrationId, busy + 1);
    try {
      const admission = isTest
        ? { state: 'closed' as const, failures: 0 }
        : await admitAttempt(db, registrationId, thresholds.probeLeaseMs);
      if (admission.state === 'open')
        throw deferred(target, 'circuit-open', spread(admission.waitMs), admission.lastFailure);
      if (admission.state === 'probe') log.info('circuit breaker half-open: this attempt probes the receiver');
      let result: T;
      try {
        result = await post();
      } catch (error) {
        if (!isTest && error instanceof ApplicationFailure && RECEIVER_FAILURES.has(error.type ?? '')) {
          const floorMs = typeof error.nextRetryDelay === 'number' ? error.nextRetryDelay : 0;
          const statusCode = (error.details?.[0] as AttemptFailureDetails | undefined)?.statusCode;
          const breaker = await recordFailure(
            db,
            registrationId,
            thresholds,
            { message: error.message, statusCode },
            floorMs,
          );
          if (breaker.openUntil && breaker.openUntil.getTime() > Date.now() && breaker.probeUntil === null)
            log.warn(
              { consecutiveFailures: breaker.consecutiveFailures, openUntil: breaker.openUntil.toISOString() },
              'circuit breaker open: deliveries to this webhook wait',
            );
        }
        throw error;
      }
      // The healthy path stays one read: there is something to reset only after a failure or a probe.
      if (!isTest && (admission.state === 'probe' || admission.failures > 0)) await recordSuccess(db, registrationId);
      if (admission.state === 'probe') log.info('circuit breaker closed: the probe was delivered');
      return result;
    } finally {
      const left = (inFlight.get(registrationId) ?? 1) - 1;
      if (left > 0) inFlight.set(registrationId, left);
      else inFlight.delete(registrationId);
    }
  };
}

export type EndpointGuard = ReturnType<typeof createEndpointGuard>;

function deferred(
  target: EndpointAttempt,
  reason: DeliveryDeferredDetails['reason'],
  waitMs: number,
  lastFailure?: ReceiverFailure,
) {
  return ApplicationFailure.create({
    type: DELIVERY_DEFERRED,
    message:
      reason === 'circuit-open'
        ? `Circuit breaker open for this webhook: next attempt in ${waitMs} ms`
        : `Too many attempts in flight to this webhook: next attempt in ${waitMs} ms`,
    nonRetryable: true,
    details: [
      {
        reason,
        waitMs,
        attempt: target.attempt,
        ...(lastFailure && { lastError: lastFailure.message, statusCode: lastFailure.statusCode }),
      } satisfies DeliveryDeferredDetails,
    ],
  });
}

/** The settings the caller gave, without undefined ones (which would override the defaults). */
function definedOnly(config: ActivityDeps['config']): Partial<typeof ISOLATION_DEFAULTS> {
  const given: Record<string, number> = {};
  for (const key of Object.keys(ISOLATION_DEFAULTS) as (keyof typeof ISOLATION_DEFAULTS)[]) {
    const value = config[key];
    if (value !== undefined) given[key] = value;
  }
  return given;
}

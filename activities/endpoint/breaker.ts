import { trace } from '@opentelemetry/api';
import { ApplicationFailure } from '@temporalio/activity';
import { ISOLATION_DEFAULTS } from '../../common/config';
import {
  DELIVERY_DEFERRED,
  FailureType,
  PRIORITY_KEYS,
  attemptDeadlineMs,
  type AttemptFailureDetails,
  type DeliveryDeferredDetails,
} from '../../common/contract';
import type { Logger } from '../../common/telemetry/logger';
import { ATTRIBUTE } from '../../common/telemetry/span-attributes';
import {
  addBreakerWaiter,
  admitAttempt,
  recordFailure,
  recordSuccess,
  type BreakerThresholds,
  type ReceiverFailure,
} from '../../db';
import type { ActivityDeps } from '../deps';

/** Only what the receiver did counts against its breaker; our own refusals (SSRF, bad URL, secret) do not. */
const RECEIVER_FAILURES: ReadonlySet<string> = new Set([FailureType.ReceiverStatus, FailureType.ReceiverUnreachable]);

export interface EndpointAttempt {
  registrationId: string;
  /** TEST attempts skip the breaker (an operator checking a fix) but count towards the concurrency limit. */
  isTest: boolean;
  /** The delivery's attempt number, reported with a deferral. */
  attempt: number;
  workflowId: string;
  /** Set by workflows that wait for the resumer's signal: the delivery is listed as a waiter under it. */
  waitToken?: number;
  /** The event's priority key: waiters are woken falls first. */
  priority?: number;
  /** Whose endpoint: the project told when its breaker opens and when it recovers. */
  projectId?: string;
  log: Logger;
}

/**
 * Isolation of one receiver from everyone else's deliveries: at most ENDPOINT_MAX_CONCURRENT_ATTEMPTS attempts in
 * flight per registration in this worker, and a circuit breaker per registration in Postgres. An attempt it does
 * not let through throws a non-retryable WebhookDeliveryDeferred: the delivery is listed for the resumer's signal and
 * its workflow waits durably, so a failing endpoint costs neither activity slots nor requests nor workflow tasks.
 */
export function createEndpointGuard({ db, config, notify }: Pick<ActivityDeps, 'db' | 'config' | 'notify'>) {
  const settings = { ...ISOLATION_DEFAULTS, ...definedOnly(config) };
  const thresholds: BreakerThresholds = {
    failureThreshold: settings.BREAKER_FAILURE_THRESHOLD,
    openMs: settings.BREAKER_OPEN_MS,
    maxOpenMs: settings.BREAKER_MAX_OPEN_MS,
    probeLeaseMs: attemptDeadlineMs(config.WEBHOOK_TIMEOUT_MS),
  };
  const slots = createEndpointSlots(settings.ENDPOINT_MAX_CONCURRENT_ATTEMPTS);
  // Waiters wake spread over at least the rest of the open period, so a large backlog re-checks (and, once closed,
  // resumes) at a bounded rate instead of all at once when the period ends.
  const spread = (ms: number) => Math.ceil(ms + Math.random() * Math.max(settings.BREAKER_RESUME_SPREAD_MS, ms));
  // A listed waiter's own timer: the resumer's signal normally ends its wait long before.
  const safetyNet = () => Math.ceil(settings.BREAKER_WAIT_MAX_MS * (0.5 + Math.random() / 2));

  return async function throughEndpointGuard<T>(target: EndpointAttempt, post: () => Promise<T>): Promise<T> {
    const { registrationId, isTest, log } = target;
    // A healthy receiver frees a slot within milliseconds: queue for one briefly, falls first. A hanging one is not
    // waited for, except by a fall.
    const release = await slots.acquire(registrationId, settings.ENDPOINT_QUEUE_WAIT_MS, target.priority);
    if (!release) {
      // The attempts in flight end within the attempt deadline: wait until their outcome is known. Listed as a waiter,
      // the delivery is woken no sooner, and then only if the breaker lets it through: behind a hanging receiver the
      // breaker has opened by then and it waits on, at no cost, for the probe to succeed.
      // A test is answered at once instead, and a workflow from before the waiter list waits on a timer.
      if (isTest || target.waitToken === undefined)
        throw deferred(target, 'endpoint-busy', Math.ceil(config.WEBHOOK_TIMEOUT_MS * (1 + Math.random())));
      await addBreakerWaiter(
        db,
        registrationId,
        target.workflowId,
        target.waitToken,
        thresholds.probeLeaseMs,
        target.priority,
      );
      throw deferred(target, 'endpoint-busy', safetyNet());
    }
    try {
      const admission = isTest
        ? { state: 'closed' as const, failures: 0 }
        : await admitAttempt(db, registrationId, thresholds.probeLeaseMs);
      // Stryker disable next-line all: the attempt span's breaker state is read back from Jaeger by test/worker/tracing.test.ts.
      trace.getActiveSpan()?.setAttribute(ATTRIBUTE.breakerState, admission.state);
      if (admission.state === 'open') {
        if (target.waitToken === undefined)
          throw deferred(target, 'circuit-open', spread(admission.waitMs), admission.lastFailure);
        // Listed as a waiter: the resumer wakes it to probe or to go on; the long timer is only a safety net.
        await addBreakerWaiter(db, registrationId, target.workflowId, target.waitToken, 0, target.priority);
        throw deferred(target, 'circuit-open', safetyNet(), admission.lastFailure);
      }
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
          if (breaker.openUntil && breaker.openUntil.getTime() > Date.now() && breaker.probeUntil === null) {
            log.warn(
              { consecutiveFailures: breaker.consecutiveFailures, openUntil: breaker.openUntil.toISOString() },
              'circuit breaker open: deliveries to this webhook wait',
            );
            if (target.projectId)
              notify?.({
                condition: 'breaker-open',
                projectId: target.projectId,
                facts: { consecutiveFailures: breaker.consecutiveFailures, lastError: error.message },
              });
          }
        }
        throw error;
      }
      // The healthy path stays one read: there is something to reset only after a failure or a probe. The receiver
      // has the event: a reset that cannot be written is logged, never turned into a retry that sends it again (the
      // next failure or probe sets the breaker straight).
      if (!isTest && (admission.state === 'probe' || admission.failures > 0))
        await recordSuccess(db, registrationId).catch((error: unknown) =>
          log.error({ err: error }, 'circuit breaker reset not recorded: the delivery stands'),
        );
      if (admission.state === 'probe') {
        log.info('circuit breaker closed: the probe was delivered');
        if (target.projectId) notify?.({ condition: 'recovered', projectId: target.projectId });
      }
      return result;
    } finally {
      release();
    }
  };
}

/**
 * At most `limit` attempts in flight per registration in this worker; the others queue by priority key (a fall's 1
 * first), in arrival order within one, for at most the wait they are given. acquire() resolves to the slot's release,
 * or to undefined when the wait ran out.
 *
 * Queueing only pays when the endpoint makes progress: when none of its attempts has finished for a whole wait (a
 * receiver that hangs), a new attempt is refused at once instead of holding its slot, and its workflow task, for
 * nothing. A fall queues all the same: the next slot freed within its wait is its, not a later vital's.
 */
export function createEndpointSlots(limit: number, now: () => number = Date.now) {
  interface Queued {
    priority: number;
    granted: () => void;
  }
  /** progressAt: when the endpoint's first attempt began, or its latest one finished. */
  const endpoints = new Map<string, { inFlight: number; queue: Queued[]; progressAt: number }>();
  const release = (key: string) => () => {
    const endpoint = endpoints.get(key)!;
    endpoint.progressAt = now();
    const next = endpoint.queue.shift();
    // The slot passes straight to the next in the queue; the count drops only when nobody waits.
    if (next) next.granted();
    else if (--endpoint.inFlight === 0) endpoints.delete(key);
  };
  return {
    acquire(key: string, waitMs: number, priority: number = PRIORITY_KEYS.TEST): Promise<(() => void) | undefined> {
      let endpoint = endpoints.get(key);
      if (!endpoint) endpoints.set(key, (endpoint = { inFlight: 0, queue: [], progressAt: now() }));
      if (endpoint.inFlight < limit) {
        endpoint.inFlight += 1;
        return Promise.resolve(release(key));
      }
      if (priority > PRIORITY_KEYS.FALL_DETECTION && now() - endpoint.progressAt >= waitMs)
        return Promise.resolve(undefined);
      const queue = endpoint.queue;
      return new Promise((resolve) => {
        const entry: Queued = {
          priority,
          granted: () => {
            clearTimeout(timer);
            resolve(release(key));
          },
        };
        const timer = setTimeout(() => {
          const waiting = queue.indexOf(entry);
          if (waiting >= 0) queue.splice(waiting, 1);
          resolve(undefined);
        }, waitMs);
        // Behind every queued attempt of the same or a more urgent key, ahead of the rest.
        const behind = queue.findIndex((queued) => queued.priority > priority);
        queue.splice(behind < 0 ? queue.length : behind, 0, entry);
      });
    },
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

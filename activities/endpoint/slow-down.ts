import { ApplicationFailure } from '@temporalio/activity';
import { ISOLATION_DEFAULTS } from '../../common/config';
import { DELIVERY_DEFERRED, type DeliveryDeferredDetails } from '../../common/contract';
import type { Logger } from '../../common/telemetry/logger';
import { addBreakerWaiter, slowDownEndpoint } from '../../db';
import type { ActivityDeps } from '../deps';

/**
 * A receiver's "slow down" (429, 502, 503, 504: activities/http/answer.ts) holds back every delivery of its endpoint,
 * not only the one it answered: until the registration's `slowed_until` each attempt is deferred before any request,
 * listed for the breaker resumer (eligible at that time), which then wakes the waiters paced, falls first. The breaker
 * itself is left alone: the answer counts toward its threshold as any failed status does, no more.
 */

/** An attempt of a registration read as slowed down. */
export interface SlowedAttempt {
  registrationId: string;
  slowedUntil: Date;
  /** The status that asked for it, reported with the deferral (for a give-up while waiting). */
  statusCode: number | null;
  attempt: number;
  workflowId: string;
  /** Set by workflows that wait for the resumer's signal: the delivery is listed under it. */
  waitToken?: number;
  priority: number;
  log: Logger;
}

/** Whether an attempt read at `now` must wait for the receiver's slow-down to pass; TEST events never do. */
export const isSlowedDown = (row: { slowedUntil: Date | null }, isTest: boolean, now = Date.now()): boolean =>
  !isTest && row.slowedUntil !== null && row.slowedUntil.getTime() > now;

/** The deferral of an attempt that waits for the slow-down's end: no request was made, and none counts. */
export function slowedDeferral(attempt: number, waitMs: number, statusCode: number | null): ApplicationFailure {
  const lastError = `Receiver answered HTTP ${statusCode ?? 'slow down'}: its deliveries wait`;
  return ApplicationFailure.create({
    type: DELIVERY_DEFERRED,
    message: `Receiver asked to slow down: next attempt in ${waitMs} ms at most`,
    nonRetryable: true,
    details: [
      { reason: 'slowed-down', waitMs, attempt, lastError, ...(statusCode !== null && { statusCode }) },
    ] satisfies DeliveryDeferredDetails[],
  });
}

export function createSlowDown({ db, config }: Pick<ActivityDeps, 'db' | 'config'>) {
  const waitMaxMs = config.BREAKER_WAIT_MAX_MS ?? ISOLATION_DEFAULTS.BREAKER_WAIT_MAX_MS;
  const spreadMs = config.BREAKER_RESUME_SPREAD_MS ?? ISOLATION_DEFAULTS.BREAKER_RESUME_SPREAD_MS;
  return {
    /** Records the receiver's slow-down for its endpoint; a write that fails leaves only this delivery's retry waiting. */
    async slowDown(registrationId: string, forMs: number, statusCode: number, log: Logger): Promise<void> {
      try {
        const until = await slowDownEndpoint(db, registrationId, forMs, statusCode);
        log.info({ statusCode, slowedUntil: until?.toISOString() }, 'receiver asked to slow down: its deliveries wait');
      } catch (error) {
        log.warn({ err: error }, 'slow-down not recorded: only this delivery waits for its retry');
      }
    },

    /** Defers an attempt until the slow-down's end: listed for the resumer, whose signal wakes it, falls first. */
    async wait(slowed: SlowedAttempt): Promise<never> {
      const leftMs = Math.max(1, slowed.slowedUntil.getTime() - Date.now());
      // A workflow from before the waiter list waits on its timer alone, spread past the end.
      if (slowed.waitToken === undefined)
        throw slowedDeferral(slowed.attempt, Math.ceil(leftMs + Math.random() * spreadMs), slowed.statusCode);
      await addBreakerWaiter(db, slowed.registrationId, slowed.workflowId, slowed.waitToken, leftMs, slowed.priority);
      slowed.log.info({ slowedUntil: slowed.slowedUntil.toISOString() }, 'receiver slowed down: delivery waits');
      // The resumer's signal normally ends the wait at the slow-down's end; the timer is a safety net.
      throw slowedDeferral(
        slowed.attempt,
        Math.ceil(leftMs + waitMaxMs * (0.5 + Math.random() / 2)),
        slowed.statusCode,
      );
    },
  };
}

import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/activity';
import { ISOLATION_DEFAULTS } from '../../common/config';
import { DELIVERY_DEFERRED, type DeliveryDeferredDetails } from '../../common/contract';
import type { Logger } from '../../common/telemetry/logger';
import { RATE_HORIZON_MS, RATE_LATE_MS, addBreakerWaiter, takeRateSlot } from '../../db';
import type { ActivityDeps } from '../deps';

/** The attempt a registration's rate may hold back. */
export interface RateLimitedAttempt {
  registrationId: string;
  /** The registration's limit; null: unlimited, and nothing is asked of the database. */
  rateLimitPerSecond: number | null;
  isTest: boolean;
  /** The delivery's attempt number, reported with a deferral (no request is made). */
  attempt: number;
  workflowId: string;
  /** Set by workflows that wait for the resumer's signal: the delivery is listed as a waiter under it. */
  waitToken?: number;
  /** The event's priority key: the resumer wakes falls first, and a new vital queues behind waiting ones. */
  priority: number;
  log: Logger;
}

/** The deferral that hands a delivery's wait for its endpoint's rate to the workflow: no attempt was made. */
export function rateLimitedDeferral(attempt: number, waitMs: number, isTest = false): ApplicationFailure {
  // A TEST is answered at once, never queued: its words say so.
  const outcome = isTest ? 'TEST event not sent, try again in' : 'delivery queued, next attempt in at most';
  return ApplicationFailure.create({
    type: DELIVERY_DEFERRED,
    message: `The webhook's rate limit is reached: ${outcome} ${waitMs} ms`,
    nonRetryable: true,
    details: [{ reason: 'rate-limited', waitMs, attempt } satisfies DeliveryDeferredDetails],
  });
}

/** A slot taken: when this process should send (its clock), and who it is for. */
export interface RateSlotTaken {
  dueAt: number;
  target: RateLimitedAttempt & { rateLimitPerSecond: number };
}

/**
 * Waits for a slot of the registration's rate (db/endpoints/rate-limits.ts): one within RATE_HORIZON_MS is taken and
 * waited for here; else the delivery is listed for the breaker resumer, which wakes it falls first as slots come free,
 * and its workflow waits durably, the give-up window standing still. Nothing is sent and nothing counts against the
 * endpoint. A TEST is answered at once instead. Without a limit nothing is asked of the database.
 *
 * `reserve` runs before the endpoint's guard, so that a burst beyond the rate is queued without holding the endpoint's
 * attempts in flight; `keep` right before the request, so that a slot the worker missed (busy, or waiting for the
 * database) is given up for the next free one rather than sent late, crowding the slots after it into one second.
 */
export function createRateLimit({ db, config }: Pick<ActivityDeps, 'db' | 'config'>) {
  const waitMaxMs = config.BREAKER_WAIT_MAX_MS ?? ISOLATION_DEFAULTS.BREAKER_WAIT_MAX_MS;

  async function takeSlot(target: RateSlotTaken['target'], behindEqual: boolean): Promise<RateSlotTaken> {
    const slot = await takeRateSlot(db, {
      registrationId: target.registrationId,
      perSecond: target.rateLimitPerSecond,
      workflowId: target.workflowId,
      priority: target.priority,
      behindEqual,
    });
    if (slot.taken) {
      if (slot.inMs >= 1) await sleep(Math.ceil(slot.inMs));
      return { dueAt: slot.askedAt + slot.inMs, target };
    }
    return queue(target, slot.nextInMs);
  }

  /** No slot now: listed for the resumer, due when a slot comes within the horizon, and the wait handed over. */
  async function queue(target: RateSlotTaken['target'], nextInMs: number): Promise<never> {
    // A workflow from before the waiter list waits on its timer alone, until the slot is near.
    if (target.isTest || target.waitToken === undefined)
      throw rateLimitedDeferral(target.attempt, Math.max(1, Math.ceil(nextInMs - RATE_HORIZON_MS)), target.isTest);
    await addBreakerWaiter(
      db,
      target.registrationId,
      target.workflowId,
      target.waitToken,
      Math.max(0, Math.floor(nextInMs - RATE_HORIZON_MS)),
      target.priority,
    );
    target.log.debug({ rateLimitPerSecond: target.rateLimitPerSecond }, 'webhook rate limit reached: delivery queued');
    // Listed, the resumer wakes it; the timer is only a safety net.
    throw rateLimitedDeferral(target.attempt, Math.ceil(waitMaxMs * (0.5 + Math.random() / 2)));
  }

  return {
    /** Before the guard: a slot now or soon (waited for), else queued; undefined without a limit. */
    async reserve(target: RateLimitedAttempt): Promise<RateSlotTaken | undefined> {
      const { rateLimitPerSecond } = target;
      if (rateLimitPerSecond === null) return undefined;
      // Woken by the resumer, a delivery goes ahead of those it was chosen before; a new one queues behind them.
      return takeSlot({ ...target, rateLimitPerSecond }, (target.waitToken ?? 1) <= 1);
    },
    /**
     * Right before the request: a slot missed by more than RATE_LATE_MS is traded for the next free one; missed again,
     * the delivery is queued, so that a worker too busy to keep its slots never spends its attempt's deadline on them.
     */
    async keep(taken: RateSlotTaken | undefined): Promise<void> {
      if (!taken || Date.now() - taken.dueAt <= RATE_LATE_MS) return;
      taken.target.log.debug({ lateMs: Date.now() - taken.dueAt }, 'rate slot missed: taking the next one');
      const next = await takeSlot(taken.target, false);
      if (Date.now() - next.dueAt > RATE_LATE_MS) await queue(next.target, 0);
    },
  };
}

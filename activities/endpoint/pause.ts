import { ApplicationFailure } from '@temporalio/activity';
import { ISOLATION_DEFAULTS } from '../../common/config';
import { DELIVERY_DEFERRED, FailureType, type DeliveryDeferredDetails } from '../../common/contract';
import type { Logger } from '../../common/telemetry/logger';
import { holdDelivery } from '../../db';
import type { ActivityDeps } from '../deps';

/** The delivery an attempt would make while its webhook is paused. */
export interface HeldAttempt {
  registrationId: string;
  /** When the pause ends by itself; null for a hold the receiver's 410 began, which lasts until a member resumes. */
  pausedUntil: Date | null;
  /** Set when the receiver answered 410 Gone: the deferral says so, for the delivery's final error if it ever gives up. */
  goneStatusCode?: number;
  isTest: boolean;
  /** The delivery's attempt number, reported with the deferral (no request is made). */
  attempt: number;
  workflowId: string;
  /** Set by workflows that wait for the resumer's signal: the delivery is listed as held under it. */
  waitToken?: number;
  /** The event's priority key: the resumer wakes falls first. */
  priority: number;
  log: Logger;
}

/**
 * How long a held delivery's workflow waits on its own timer: until the pause ends, and `marginMs` beyond (the
 * resumer's signal, paced, normally ends the wait first). A hold without an end (the receiver's 410) waits `marginMs`,
 * then asks again. Never less than 1 ms.
 */
export function heldWaitMs(pausedUntil: Date | null, now: number, marginMs: number): number {
  const untilEnd = pausedUntil === null ? 0 : pausedUntil.getTime() - now;
  return Math.max(1, untilEnd) + Math.max(0, Math.ceil(marginMs));
}

/** How long, at most, a delivery held by a receiver's 410 waits before it reads its registration again. */
export const GONE_RECHECK_MS = 24 * 3_600_000;

/**
 * The deferral that hands a held delivery's wait to its workflow. Made without an attempt (the webhook was paused
 * when read), or after the attempt the receiver answered 410 (`goneStatusCode`), which then counts as made.
 */
export function pausedDeferral(attempt: number, waitMs: number, goneStatusCode?: number): ApplicationFailure {
  const gone = goneStatusCode !== undefined;
  const message = gone
    ? `Receiver answered HTTP ${goneStatusCode} Gone: deliveries held until a member resumes the webhook`
    : `Webhook paused: delivery held, next attempt when the pause ends (at most ${waitMs} ms)`;
  return ApplicationFailure.create({
    type: DELIVERY_DEFERRED,
    message,
    nonRetryable: true,
    details: [
      {
        reason: 'paused',
        waitMs,
        attempt,
        ...(gone && { lastError: message, statusCode: goneStatusCode }),
      } satisfies DeliveryDeferredDetails,
    ],
  });
}

/** A TEST event is answered at once: a paused webhook is not tested. */
export const pausedTestRefusal = (): ApplicationFailure =>
  ApplicationFailure.create({
    type: FailureType.WebhookPaused,
    message: 'The webhook is paused: resume it to send a test event',
    nonRetryable: true,
  });

/**
 * Holds an attempt of a paused webhook: lists the delivery for the resumer (eligible when the pause ends, or at once on
 * resume), marks it `held` in the delivery log through `markHeld`, and throws the deferral. Nothing is sent, and the
 * breaker and the endpoint's health are not touched.
 */
export function createPauseHold({ db, config }: Pick<ActivityDeps, 'db' | 'config'>) {
  const waitMaxMs = config.BREAKER_WAIT_MAX_MS ?? ISOLATION_DEFAULTS.BREAKER_WAIT_MAX_MS;
  const spreadMs = config.BREAKER_RESUME_SPREAD_MS ?? ISOLATION_DEFAULTS.BREAKER_RESUME_SPREAD_MS;
  return async function hold(held: HeldAttempt, markHeld: () => Promise<void>): Promise<never> {
    if (held.isTest) throw pausedTestRefusal();
    const now = Date.now();
    if (held.waitToken !== undefined)
      await holdDelivery(db, held.registrationId, held.workflowId, held.waitToken, held.priority);
    await markHeld();
    held.log.info({ pausedUntil: held.pausedUntil?.toISOString() ?? 'until resumed' }, 'webhook paused: delivery held');
    // Listed, the resumer wakes it and the timer is a safety net; a workflow from before the waiter list waits on its
    // timer alone, spread past the pause's end. A hold without an end re-reads the registration once a day at most: a
    // safety net against a lost resume signal that adds a few history events a day, however long the receiver is gone.
    const marginMs =
      held.pausedUntil === null
        ? GONE_RECHECK_MS * (0.5 + Math.random() / 2)
        : held.waitToken === undefined
          ? Math.random() * spreadMs
          : waitMaxMs * (0.5 + Math.random() / 2);
    throw pausedDeferral(held.attempt, heldWaitMs(held.pausedUntil, now, marginMs), held.goneStatusCode);
  };
}

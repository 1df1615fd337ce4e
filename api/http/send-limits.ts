import type { Knex } from 'knex';
import type { Logger } from '../../common/telemetry/logger';
import { admitSend, extendSendSlot, releaseSendSlot, type SendLimitKind, type SendLimitRule } from '../../db';
import { ApiError } from './errors';
import type { SendTestEvent, TestDeliveryOutcome } from '../webhooks/test-event';
import type { WorkflowEndWatcher } from '../deliveries/redelivery';

/** How often a project may send TEST events: one in flight, and at most `perMinute` in any 60 s. */
export interface TestEventLimits {
  /** TEST_EVENTS_PER_MINUTE (default 10). */
  perMinute: number;
  /** TEST_DELIVERY_WAIT_MS: the test endpoint answers by then, with the outcome or without it. */
  waitMs: number;
  /** WEBHOOK_TIMEOUT_MS: the TEST attempt may go on after the answer until then; the slot's lease covers it. */
  attemptMs?: number;
}

/** How often a project's members may call redeliver and recover (recoveries also run one at a time). */
export interface RedeliveryLimits {
  /** REDELIVER_CALLS_PER_MINUTE (default 60). */
  redeliverPerMinute: number;
  /** RECOVER_CALLS_PER_MINUTE (default 5). */
  recoverPerMinute: number;
}

export const DEFAULT_TEST_EVENT_LIMITS: TestEventLimits = { perMinute: 10, waitMs: 15_000 };
export const DEFAULT_REDELIVERY_LIMITS: RedeliveryLimits = { redeliverPerMinute: 60, recoverPerMinute: 5 };

const MINUTE_MS = 60_000;
/** Time for the release to reach the database after a TEST send's deadline. */
const TEST_LEASE_MARGIN_MS = 1_000;
/**
 * How long a TEST send may hold the slot, should its release never come (its process died): the wait for the answer
 * or the attempt, whichever is longer, and a margin. The release normally comes first, when the attempt ends.
 */
export const testSlotLeaseMs = (limits: TestEventLimits): number =>
  Math.max(limits.waitMs, limits.attemptMs ?? 0) + TEST_LEASE_MARGIN_MS;
/**
 * The longest a recover call may go between two starts of its redeliveries before another may run (if its process
 * died): each start renews the lease.
 */
export const RECOVER_CALL_LEASE_MS = 300_000;

/** 429 with Retry-After (whole seconds): the project sends too often. */
export class SendRateLimitedError extends ApiError {
  constructor(detail: string, retryAfterMs: number) {
    super(429, detail);
    this.headers = { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) };
  }
}

/** The in-flight slot of an admitted send; both methods log a failure rather than throw (the lease ends it anyway). */
export interface SendSlot {
  /** The send ended: another may start. */
  release(): Promise<void>;
  /** The send goes on for `ms` from now (a recovery's scheduled starts): the slot stays taken until then. */
  keepFor(ms: number): Promise<void>;
}

/** Admits sends per project under the limits held in PostgreSQL (shared by every API process), or throws a 429. */
export type SendLimiter = (kind: SendLimitKind, projectId: string) => Promise<SendSlot>;

export interface SendLimiterOptions {
  test?: TestEventLimits;
  redelivery?: RedeliveryLimits;
  /** Replaces the database's clock (tests move time with it). */
  clock?: () => Date;
}

export function createSendLimiter(db: Knex, logger: Logger, options: SendLimiterOptions = {}): SendLimiter {
  const test = options.test ?? DEFAULT_TEST_EVENT_LIMITS;
  const redelivery = options.redelivery ?? DEFAULT_REDELIVERY_LIMITS;
  const rules: Record<SendLimitKind, SendLimitRule> = {
    test: { perWindow: test.perMinute, windowMs: MINUTE_MS, leaseMs: testSlotLeaseMs(test) },
    redeliver: { perWindow: redelivery.redeliverPerMinute, windowMs: MINUTE_MS },
    recover: { perWindow: redelivery.recoverPerMinute, windowMs: MINUTE_MS, leaseMs: RECOVER_CALL_LEASE_MS },
  };
  return async (kind, projectId) => {
    const admission = await admitSend(db, projectId, kind, rules[kind], options.clock?.());
    if (!admission.admitted) {
      const { sends, inFlight } = LIMIT_TEXTS[kind];
      const detail =
        admission.limit === 'in-flight' && inFlight
          ? inFlight(projectId)
          : `At most ${rules[kind].perWindow} ${sends} a minute per project: project ${projectId} reached the limit`;
      throw new SendRateLimitedError(detail, admission.retryAfterMs);
    }
    const slotFailed = (err: unknown) =>
      logger.warn({ err, projectId, kind }, 'send limit slot not updated: its lease frees it');
    return {
      release: () => releaseSendSlot(db, projectId, kind, admission.holder).catch(slotFailed),
      // A lease ending now or before (nothing left to start) frees the slot as a release does.
      keepFor: (ms) => extendSendSlot(db, projectId, kind, admission.holder, ms, options.clock?.()).catch(slotFailed),
    };
  };
}

/** What a 429 names: the sends counted a minute, and the one in flight for the kinds that have a slot. */
const LIMIT_TEXTS: Record<SendLimitKind, { sends: string; inFlight?: (projectId: string) => string }> = {
  test: {
    sends: 'test events',
    inFlight: (projectId) => `A test event for project ${projectId} is already in flight: one at a time per project`,
  },
  redeliver: { sends: 'redeliveries' },
  recover: {
    sends: 'recover calls',
    inFlight: (projectId) =>
      `A recovery of project ${projectId} is still starting its redeliveries: one at a time per project`,
  },
};

/**
 * Wraps the test sender: the TEST slot is taken before the send and freed when the TEST attempt ends, whatever its
 * outcome. An answer without the outcome (TEST_DELIVERY_WAIT_MS passed) leaves the attempt running: the slot stays
 * taken until `watchWorkflowEnd` tells it ended (or, without a watcher, until its lease ends).
 */
export function limitTestEvents(
  send: SendTestEvent,
  limiter: SendLimiter,
  watchWorkflowEnd?: WorkflowEndWatcher,
): SendTestEvent {
  return async (projectId) => {
    const slot = await limiter('test', projectId);
    let outcome: TestDeliveryOutcome;
    try {
      outcome = await send(projectId);
    } catch (error) {
      await slot.release();
      throw error;
    }
    if (outcome.delivered || outcome.category !== 'no-outcome') await slot.release();
    else if (watchWorkflowEnd) void watchWorkflowEnd(outcome.workflowId).then(() => slot.release());
    return outcome;
  };
}

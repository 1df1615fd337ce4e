import type { Db } from '../connection';

/**
 * A registration's rate: at most `perSecond` deliveries in any second, across every worker. Slots are spaced evenly
 * on the database's clock (a generic cell rate: one `next_at` per registration, moved by one UPDATE), a little wider
 * than 1 s / perSecond, so that a delivery whose request takes up to RATE_JITTER_MS longer than the one five slots
 * later still leaves every second of the receiver's clock at or under the rate. An attempt takes a slot at most
 * RATE_HORIZON_MS ahead and waits for it in the activity; further off, it waits durably as a waiter of the breaker
 * resumer (webhook_breaker_waiters), which wakes as many as the slots within that horizon, falls first.
 */

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const TABLE = 'webhook_rate_limits';
// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const WAITERS = 'webhook_breaker_waiters';

/** The most a limit may be set to, and what the API accepts. */
export const MAX_RATE_PER_SECOND = 1_000;
/** How far ahead an attempt takes a slot and waits for it in the activity; further off, it waits durably. */
export const RATE_HORIZON_MS = 1_000;
/** What the spacing leaves for requests that reach the receiver unevenly (scheduling, the network). */
export const RATE_JITTER_MS = 100;
/** A slot whose request could not leave within this of its time (a busy worker) is given up and another taken. */
export const RATE_LATE_MS = 40;

/** The time between two slots of a registration limited to `perSecond`. */
export const rateSpacingMs = (perSecond: number): number => (1_000 + RATE_JITTER_MS) / perSecond;

export type RateSlot =
  /** Taken: send in `inMs` (0: now) from `askedAt` (this process's clock when the statement went to the database). */
  | { taken: true; inMs: number; askedAt: number }
  /** Not taken: the next slot is `nextInMs` away, or more urgent (or, for a first attempt, as urgent) waiters queue. */
  | { taken: false; nextInMs: number };

export interface RateSlotRequest {
  registrationId: string;
  perSecond: number;
  workflowId: string;
  /** The event's priority key: a delivery never goes ahead of a waiting one more urgent than itself. */
  priority: number;
  /** A delivery's attempt that waited for nothing yet also queues behind waiting deliveries as urgent as itself. */
  behindEqual: boolean;
}

/**
 * Takes the registration's next slot if it is within RATE_HORIZON_MS and no waiting delivery should go first, in one
 * statement: concurrent attempts of every worker take distinct slots (the row's lock orders them, each reading the
 * clock once it holds it).
 */
export async function takeRateSlot(db: Db, request: RateSlotRequest): Promise<RateSlot> {
  let askedAt = Date.now();
  const statement = db.raw<{ rows: { in_ms: string | null; next_in_ms: string | null }[] }>(
    `WITH taken AS (
       INSERT INTO ${TABLE} AS l (registration_id, next_at)
       SELECT CAST(:registrationId AS uuid), clock_timestamp() + :spacingMs * interval '1 millisecond'
        WHERE NOT EXISTS (
          SELECT 1 FROM ${WAITERS} w
           WHERE w.registration_id = :registrationId AND w.workflow_id <> :workflowId
             AND w.signalled_at IS NULL AND w.eligible_at <= clock_timestamp()
             AND (w.priority < :priority OR (:behindEqual AND w.priority = :priority)))
       ON CONFLICT (registration_id) DO UPDATE
          SET next_at = GREATEST(l.next_at, clock_timestamp()) + :spacingMs * interval '1 millisecond'
        WHERE l.next_at <= clock_timestamp() + :horizonMs * interval '1 millisecond'
       RETURNING extract(epoch FROM l.next_at - clock_timestamp()) * 1000 - :spacingMs AS in_ms
     )
     SELECT (SELECT in_ms FROM taken) AS in_ms,
            (SELECT extract(epoch FROM next_at - clock_timestamp()) * 1000 FROM ${TABLE}
              WHERE registration_id = :registrationId) AS next_in_ms`,
    {
      registrationId: request.registrationId,
      workflowId: request.workflowId,
      priority: request.priority,
      behindEqual: request.behindEqual,
      spacingMs: rateSpacingMs(request.perSecond),
      horizonMs: RATE_HORIZON_MS,
    },
  );
  // Once a pooled connection has it, not while it waits for one: the slot is counted from the statement's run.
  statement.on('query', () => (askedAt = Date.now()));
  const { rows } = await statement;
  const [row] = rows;
  if (row?.in_ms !== null && row?.in_ms !== undefined)
    return { taken: true, inMs: Math.max(0, Number(row.in_ms)), askedAt };
  return { taken: false, nextInMs: Math.max(0, Number(row?.next_in_ms ?? 0)) };
}

/**
 * SQL: how many waiters of the registration `registrationId` (an SQL expression) one round of the resumer may wake,
 * at most `perSecond` (a bound parameter's name): all of them without a limit, else as many as the slots free within
 * RATE_HORIZON_MS, so that each one woken takes a slot and none is woken only to wait again.
 */
export const rateRoundSize = (registrationId: string, perSecond: string): string =>
  `coalesce((SELECT CASE
       WHEN r.rate_limit_per_second IS NULL THEN ${perSecond}
       ELSE LEAST(${perSecond}, GREATEST(0, floor(
         (${RATE_HORIZON_MS} - GREATEST(0, extract(epoch FROM coalesce(l.next_at, now()) - now()) * 1000))
         / ((1000 + ${RATE_JITTER_MS})::numeric / r.rate_limit_per_second)) + 1))
     END
     FROM webhook_registrations r LEFT JOIN ${TABLE} l ON l.registration_id = r.id
    WHERE r.id = ${registrationId})::int, ${perSecond})`;

/**
 * How many deliveries of the registration wait for its rate: listed, due, and not woken yet, while the breaker lets
 * them through (closed) and no pause holds them.
 */
export async function countRateWaiters(db: Db, registrationId: string): Promise<number> {
  const { rows } = await db.raw<{ rows: { waiting: number }[] }>(
    `SELECT count(*)::int AS waiting FROM ${WAITERS} w
      WHERE w.registration_id = :registrationId AND w.signalled_at IS NULL AND w.eligible_at <= now()
        AND NOT EXISTS (SELECT 1 FROM webhook_circuit_breakers b
                         WHERE b.registration_id = w.registration_id AND b.open_until IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM webhook_registrations r
                         WHERE r.id = w.registration_id AND r.paused_until > now())`,
    { registrationId },
  );
  return rows[0]?.waiting ?? 0;
}

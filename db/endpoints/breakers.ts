import { appendAuditEvent } from '../audit/events';
import type { Db } from '../connection';
import { rateRoundSize } from './rate-limits';

/** What a registration's breaker lets one attempt do, decided by the database's clock (one for every worker). */
export type BreakerAdmission =
  /** Closed, after `failures` consecutive failed attempts (0 when it never failed or was reset). */
  | { state: 'closed'; failures: number }
  /** Half-open: this attempt holds the single probe; its outcome closes or reopens the breaker. */
  | { state: 'probe' }
  /** Open, or half-open with another attempt probing: wait this long before asking again. */
  | { state: 'open'; waitMs: number; lastFailure?: ReceiverFailure };

/** What the receiver last did wrong: the attempt's failure message and status, never a body. */
export interface ReceiverFailure {
  message: string;
  statusCode?: number;
}

export interface BreakerThresholds {
  /** Consecutive failed attempts that open the breaker. */
  failureThreshold: number;
  /** The first open period; each reopening without a success in between doubles it, up to maxOpenMs. */
  openMs: number;
  maxOpenMs: number;
  /** How long the probe may take before another attempt may probe instead (the attempt timeout and a margin). */
  probeLeaseMs: number;
}

export interface BreakerRow {
  registrationId: string;
  consecutiveFailures: number;
  openUntil: Date | null;
  probeUntil: Date | null;
  consecutiveOpens: number;
  lastFailure?: ReceiverFailure;
}

interface Columns {
  registration_id: string;
  consecutive_failures: number;
  open_until: Date | null;
  probe_until: Date | null;
  consecutive_opens: number;
  last_failure: string | null;
  last_status_code: number | null;
}

const toRow = (c: Columns): BreakerRow => ({
  registrationId: c.registration_id,
  consecutiveFailures: c.consecutive_failures,
  openUntil: c.open_until,
  probeUntil: c.probe_until,
  consecutiveOpens: c.consecutive_opens,
  ...(c.last_failure !== null && { lastFailure: lastFailureOf(c) }),
});

const lastFailureOf = (c: Pick<Columns, 'last_failure' | 'last_status_code'>): ReceiverFailure | undefined =>
  c.last_failure === null
    ? undefined
    : { message: c.last_failure, ...(c.last_status_code !== null && { statusCode: c.last_status_code }) };

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const TABLE = 'webhook_circuit_breakers';

/**
 * Admits an attempt, claiming the probe when the open period is over and no other attempt holds it. The healthy path
 * is this one statement; the breaker's first probe after it opened is the half-open transition, claimed in a
 * transaction of its own with its audit row (claimFirstProbe).
 */
export function admitAttempt(db: Db, registrationId: string, probeLeaseMs: number): Promise<BreakerAdmission> {
  return admit(db, registrationId, probeLeaseMs, false);
}

async function admit(
  db: Db,
  registrationId: string,
  probeLeaseMs: number,
  firstProbeTried: boolean,
): Promise<BreakerAdmission> {
  const { rows } = await db.raw<{
    rows: (Pick<Columns, 'last_failure' | 'last_status_code'> & {
      open_ms: string | null;
      probe_ms: string | null;
      claimed: boolean;
      unprobed: boolean;
      consecutive_failures: number;
    })[];
  }>(
    // Only a lapsed probe lease is claimed here: the probe's holder ended without an outcome, still half-open.
    `WITH claim AS (
       UPDATE ${TABLE} SET probe_until = now() + ? * interval '1 millisecond', updated_at = now()
        WHERE registration_id = ? AND open_until <= now() AND probe_until <= now()
        RETURNING registration_id
     )
     SELECT extract(epoch FROM open_until - now()) * 1000 AS open_ms,
            extract(epoch FROM probe_until - now()) * 1000 AS probe_ms,
            EXISTS (SELECT 1 FROM claim) AS claimed, probe_until IS NULL AS unprobed,
            consecutive_failures, last_failure, last_status_code
       FROM ${TABLE} WHERE registration_id = ?`,
    [probeLeaseMs, registrationId, registrationId],
  );
  const [row] = rows;
  if (!row) return { state: 'closed', failures: 0 };
  if (row.open_ms === null) return { state: 'closed', failures: row.consecutive_failures };
  if (row.claimed) return { state: 'probe' };
  const openMs = Number(row.open_ms);
  if (openMs <= 0 && row.unprobed && !firstProbeTried) {
    if (await claimFirstProbe(db, registrationId, probeLeaseMs)) return { state: 'probe' };
    // Another attempt claimed it, or the breaker changed meanwhile: as it is now.
    return admit(db, registrationId, probeLeaseMs, true);
  }
  const lastFailure = lastFailureOf(row);
  // Half-open and another attempt is probing: ask again once its lease would have expired.
  const waitMs = openMs > 0 ? openMs : Math.max(1, Number(row.probe_ms ?? probeLeaseMs));
  return { state: 'open', waitMs: Math.ceil(waitMs), ...(lastFailure && { lastFailure }) };
}

/** The first probe since the breaker opened: half-open, one `system` audit row in the claim's transaction. */
async function claimFirstProbe(db: Db, registrationId: string, probeLeaseMs: number): Promise<boolean> {
  return db.transaction(async (trx) => {
    const claimed = await trx(TABLE)
      .where({ registration_id: registrationId })
      .andWhere('open_until', '<=', trx.fn.now())
      .whereNull('probe_until')
      .update({
        probe_until: trx.raw(`now() + ? * interval '1 millisecond'`, [probeLeaseMs]),
        updated_at: trx.fn.now(),
      })
      .returning<Pick<Columns, 'consecutive_failures' | 'consecutive_opens'>[]>([
        'consecutive_failures',
        'consecutive_opens',
      ]);
    const [row] = claimed;
    if (!row) return false;
    await recordTransition(trx, registrationId, 'breaker.half-open', {
      consecutiveFailures: row.consecutive_failures,
      consecutiveOpens: row.consecutive_opens,
    });
    return true;
  });
}

/** What the trail records of a breaker: the service's own action, on the registration's project. */
async function recordTransition(
  trx: Db,
  registrationId: string,
  action: 'breaker.open' | 'breaker.half-open' | 'breaker.close',
  changes: Record<string, unknown>,
): Promise<void> {
  const registration = await trx<{ id: string; project_id: string }>('webhook_registrations')
    .where({ id: registrationId })
    .first('project_id');
  await appendAuditEvent(trx, {
    actor: { kind: 'system' },
    action,
    outcome: 'ok',
    ...(registration && { projectId: registration.project_id }),
    registrationId,
    changes,
  });
}

const RESET = {
  consecutive_failures: 0,
  last_failure: null,
  last_status_code: null,
  open_until: null,
  probe_until: null,
  consecutive_opens: 0,
};

/**
 * A 2xx closes the breaker; writes only when there is something to reset, so the healthy path stays a read. Closing
 * an open or half-open breaker is a transition, recorded in the trail with it; forgetting a closed one's count is not.
 */
export async function recordSuccess(db: Db, registrationId: string): Promise<void> {
  const closed = await db.transaction(async (trx) => {
    const rows = await trx(TABLE)
      .where({ registration_id: registrationId })
      .whereNotNull('open_until')
      .update({ ...RESET, updated_at: trx.fn.now() })
      .returning('registration_id');
    if (rows.length > 0) await recordTransition(trx, registrationId, 'breaker.close', {});
    return rows.length > 0;
  });
  if (!closed)
    await db(TABLE)
      .where({ registration_id: registrationId })
      .andWhere('consecutive_failures', '>', 0)
      .update({ ...RESET, updated_at: db.fn.now() });
}

/**
 * Counts a failed attempt; opens the breaker when the count reaches the threshold (or the probe failed), for the
 * open period doubled per reopening, and never shorter than the receiver's Retry-After (`floorMs`). An opening is a
 * transition: one `system` audit row in the same transaction. Returns the row as it now is.
 */
export async function recordFailure(
  db: Db,
  registrationId: string,
  thresholds: Omit<BreakerThresholds, 'probeLeaseMs'>,
  failure: ReceiverFailure,
  floorMs = 0,
): Promise<BreakerRow> {
  const { failureThreshold, openMs, maxOpenMs } = thresholds;
  // Opens when closed and at the threshold, or when half-open (a failed probe, or a late failure after the period).
  const opening = `(b.consecutive_failures + 1 >= :threshold AND (b.open_until IS NULL OR b.open_until <= now()))`;
  const period = `now() + GREATEST(LEAST(:openMs * power(2, b.consecutive_opens), :maxOpenMs), :floorMs) * interval '1 millisecond'`;
  return db.transaction(async (trx) => {
    // The row, made when missing and locked to the end of the transaction, as it was: concurrent failures open it once.
    const { rows: before } = await trx.raw<{ rows: { consecutive_opens: number; was_open: boolean }[] }>(
      `INSERT INTO ${TABLE} (registration_id) VALUES (?)
       ON CONFLICT (registration_id) DO UPDATE SET registration_id = EXCLUDED.registration_id
       RETURNING consecutive_opens, open_until IS NOT NULL AS was_open`,
      [registrationId],
    );
    const { rows } = await trx.raw<{ rows: Columns[] }>(
      `UPDATE ${TABLE} AS b SET
         consecutive_failures = b.consecutive_failures + 1,
         open_until = CASE WHEN ${opening} THEN ${period} ELSE b.open_until END,
         probe_until = CASE WHEN ${opening} THEN NULL ELSE b.probe_until END,
         -- A probe that failed has ended: the resumer wakes the next one when this period is over, not a lease later.
         probe_woken_at = CASE WHEN ${opening} THEN NULL ELSE b.probe_woken_at END,
         consecutive_opens = CASE WHEN ${opening} THEN b.consecutive_opens + 1 ELSE b.consecutive_opens END,
         last_failure = :message,
         last_status_code = :statusCode,
         updated_at = now()
       WHERE registration_id = :id
       RETURNING *`,
      {
        id: registrationId,
        threshold: failureThreshold,
        openMs,
        maxOpenMs,
        floorMs,
        message: failure.message,
        statusCode: failure.statusCode ?? null,
      },
    );
    const row = toRow(rows[0] as Columns); // the row locked above
    const [prior] = before;
    if (row.consecutiveOpens > prior!.consecutive_opens)
      await recordTransition(trx, registrationId, 'breaker.open', {
        from: prior!.was_open ? 'half-open' : 'closed',
        consecutiveFailures: row.consecutiveFailures,
        consecutiveOpens: row.consecutiveOpens,
        openUntil: row.openUntil!.toISOString(),
        ...(failure.statusCode !== undefined && { statusCode: failure.statusCode }),
      });
    return row;
  });
}

/** The breaker of a registration, for operators and tests; undefined when it never failed. */
export async function findBreaker(db: Db, registrationId: string): Promise<BreakerRow | undefined> {
  const row = await db<Columns>(TABLE).where({ registration_id: registrationId }).first();
  return row && toRow(row);
}

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const WAITERS = 'webhook_breaker_waiters';

/**
 * A delivery waits for this registration's breaker, under its `waitToken`th wait (the resumer's signal names it):
 * woken when the breaker lets it through, and not within `notBeforeMs` (the end of the attempts in flight it waits for);
 * `priority` is its event's priority key (falls are woken first).
 */
export async function addBreakerWaiter(
  db: Db,
  registrationId: string,
  workflowId: string,
  waitToken: number,
  notBeforeMs = 0,
  priority?: number,
): Promise<void> {
  const eligibleAt = db.raw(`now() + ? * interval '1 millisecond'`, [notBeforeMs]);
  await db(WAITERS)
    .insert({
      registration_id: registrationId,
      workflow_id: workflowId,
      wait_token: waitToken,
      eligible_at: eligibleAt,
      ...(priority !== undefined && { priority }),
    })
    .onConflict(['registration_id', 'workflow_id'])
    .merge({
      wait_token: waitToken,
      since: db.fn.now(),
      eligible_at: eligibleAt,
      woken_at: null,
      signalled_at: null,
      ...(priority !== undefined && { priority }),
    });
}

export interface BreakerWaiter {
  registrationId: string;
  workflowId: string;
  waitToken: number;
}

export interface WakeLimits {
  /** Waiters of a closed breaker woken per registration per second, across all resumers. */
  perSecond: number;
  /** How long a woken probe may take to start before another waiter is woken to probe instead. */
  probeLeaseMs: number;
  /** How long a resumer holds the waiters it took before another may take them again (its signals failed). */
  wakeLeaseMs: number;
}

/**
 * The waiters to wake now, oldest first, held for `wakeLeaseMs` (forgetWokenWaiters deletes them once signalled):
 * up to `perSecond` of a closed breaker's (fewer when the registration's rate has fewer slots free within its horizon:
 * rateRoundSize), and one of a half-open breaker's when no attempt holds or was just woken
 * for its probe; none of an open one's. A round wakes the most urgent priority key of its registration only: the
 * less urgent waiters wait until the more urgent ones are woken and their attempts have ended (forgetWokenWaiters
 * keeps those signalled until then, for `probeLeaseMs` + `wakeLeaseMs` at most), so falls reach the receiver before
 * vitals. One round per registration per second (0.9 s at least, so a resumer ticking every second never misses its
 * turn): the breaker row's lock makes concurrent resumers (one per worker) take turns, so the rate holds however many
 * workers run. A probe round that finds no waiter to wake (the only one locked while it lists itself again) hands its
 * probe lease back, so the next round probes instead of one lease later.
 */
export async function takeWaitersToWake(db: Db, limits: WakeLimits): Promise<BreakerWaiter[]> {
  // A waiter due for a wake: eligible, and not held by another round. The registrations chosen and the waiters
  // picked must agree, or a half-open breaker's probe round would be spent without a waiter to wake.
  const due = `signalled_at IS NULL AND eligible_at <= now()
               AND (woken_at IS NULL OR woken_at <= now() - :wakeLeaseMs * interval '1 millisecond')`;
  // A woken waiter whose attempt has not ended holds back the less urgent ones for this long at most.
  const attemptLease = `(:probeLeaseMs * interval '1 millisecond' + :wakeLeaseMs * interval '1 millisecond')`;
  // Signalled waiters whose attempt never said it ended (its workflow ended meanwhile): their wake is long done.
  await db.raw(`DELETE FROM ${WAITERS} WHERE signalled_at <= now() - ${attemptLease}`, { ...limits });
  const { rows } = await db.raw<{
    rows: { registration_id: string; workflow_id: string | null; wait_token: number | null; round: string }[];
  }>(
    `WITH pending AS (
       SELECT DISTINCT registration_id FROM ${WAITERS} WHERE ${due}
     ),
     turn AS (
       INSERT INTO ${TABLE} AS b (registration_id, resumed_at, updated_at)
       SELECT registration_id, now(), now() FROM pending
       ON CONFLICT (registration_id) DO UPDATE
          SET resumed_at = now(),
              probe_woken_at = CASE WHEN b.open_until IS NULL THEN b.probe_woken_at ELSE now() END
        WHERE (b.resumed_at IS NULL OR b.resumed_at <= now() - interval '900 milliseconds')
          AND (b.open_until IS NULL
               OR (b.open_until <= now() AND (b.probe_until IS NULL OR b.probe_until <= now())
                   AND (b.probe_woken_at IS NULL
                        OR b.probe_woken_at <= now() - :probeLeaseMs * interval '1 millisecond')))
        RETURNING b.registration_id, b.open_until IS NOT NULL AS probe, b.resumed_at::text AS round,
                  CASE WHEN b.open_until IS NULL THEN ${rateRoundSize('b.registration_id', ':perSecond')} ELSE 1 END AS n
     ),
     picked AS (
       SELECT x.registration_id, x.workflow_id
         FROM turn
         CROSS JOIN LATERAL (
           SELECT registration_id, workflow_id FROM ${WAITERS} y
            WHERE y.registration_id = turn.registration_id AND ${due}
              -- The most urgent key due or still being woken: falls before vitals (the events' priority keys).
              AND y.priority = (
                SELECT min(z.priority) FROM ${WAITERS} z
                 WHERE z.registration_id = turn.registration_id AND z.eligible_at <= now()
                   AND (z.signalled_at IS NULL OR z.signalled_at > now() - ${attemptLease}))
            ORDER BY since -- oldest first
            LIMIT turn.n
            FOR UPDATE SKIP LOCKED
         ) x
     ),
     woken AS (
       UPDATE ${WAITERS} w SET woken_at = now()
         FROM picked
        WHERE w.registration_id = picked.registration_id AND w.workflow_id = picked.workflow_id
        RETURNING w.registration_id, w.workflow_id, w.wait_token
     )
     SELECT registration_id, workflow_id, wait_token, NULL AS round FROM woken
     UNION ALL
     SELECT registration_id, NULL, NULL, round FROM turn
      WHERE probe AND NOT EXISTS (SELECT 1 FROM picked WHERE picked.registration_id = turn.registration_id)`,
    { ...limits },
  );
  // The round's own lease only (as text: a JS Date would drop the microseconds).
  // Stryker disable next-line MethodExpression,ConditionalExpression: a woken waiter's row has no round (NULL), which matches no lease: the filter only spares its query
  for (const { registration_id, round } of rows.filter((r) => r.workflow_id === null))
    await db(TABLE)
      .where({ registration_id })
      .whereRaw('probe_woken_at = ?::timestamptz', [round])
      .update({ probe_woken_at: null });
  return rows
    .filter((r) => r.workflow_id !== null)
    .map((r) => ({ registrationId: r.registration_id, workflowId: r.workflow_id!, waitToken: r.wait_token! }));
}

/**
 * Forgets waiters the resumer has woken (their signal went through) or found `ended`, unless they have listed
 * themselves again since. A woken one more urgent than another waiter of its registration stays, signalled, until its
 * attempt has ended (forgetAttemptedWaiter): the less urgent ones are woken after it.
 */
export async function forgetWokenWaiters(
  db: Db,
  waiters: readonly BreakerWaiter[],
  ended: readonly BreakerWaiter[] = [],
): Promise<void> {
  const listed = (list: readonly BreakerWaiter[]) =>
    db(WAITERS).whereIn(
      ['registration_id', 'workflow_id', 'wait_token'],
      list.map((w) => [w.registrationId, w.workflowId, w.waitToken]),
    );
  if (waiters.length > 0) {
    const woken = () => listed(waiters).whereNotNull('woken_at').whereNull('signalled_at');
    await woken()
      .whereExists(
        db(`${WAITERS} as behind`)
          .select(1)
          .whereRaw(`behind.registration_id = ${WAITERS}.registration_id AND behind.priority > ${WAITERS}.priority`),
      )
      .update({ signalled_at: db.fn.now() });
    await woken().delete();
  }
  if (ended.length > 0) await listed(ended).delete();
}

/**
 * The attempt after a wait has ended (delivered, failed, or listed again under its next wait `waitToken`): the waiter
 * of its earlier waits no longer holds back the less urgent waiters of its registration.
 */
export async function forgetAttemptedWaiter(
  db: Db,
  registrationId: string,
  workflowId: string,
  waitToken: number,
): Promise<void> {
  await db(WAITERS)
    .where({ registration_id: registrationId, workflow_id: workflowId })
    .where('wait_token', '<', waitToken)
    .delete();
}

import { appendAuditEvent } from '../audit/events';
import type { Db } from '../connection';

/**
 * A pause that holds a registration's deliveries: while `paused_until` is ahead nothing is sent. Held deliveries are
 * listed in the breaker resumer's waiters, eligible when the pause ends, so the resumer wakes them (falls first, oldest
 * first, at the breaker's resume rate) whether a member resumes or the pause runs out.
 */

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const REGISTRATIONS = 'webhook_registrations';
// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const WAITERS = 'webhook_breaker_waiters';
// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const DELIVERIES = 'deliveries';

/**
 * Why a registration's deliveries are held when it is not a member's pause: `gone`, the receiver answered 410 Gone
 * (db/endpoints/gone.ts). Such a hold has no end of its own (`paused_until` is NULL): it lasts until a member resumes.
 */
export type PauseReason = 'gone';

/** A registration's pause as the API shows it; `pausedUntil` null and `reason` 'gone' for a hold the receiver's 410 began. */
export interface PauseState {
  registrationId: string;
  pausedAt: Date;
  pausedUntil: Date | null;
  /** Set for a hold the receiver's 410 began; absent for a member's pause. */
  reason?: PauseReason;
}

/** Who started a pause: a member (their token's subject), or a portal link (its id, and the member who made it). */
export interface PausedBy {
  kind: 'member' | 'portal-link';
  subject?: string;
  portalLinkId?: string;
}

/**
 * Whether a registration read at `now` is paused: a pause whose end has passed is over, swept or not; a hold the
 * receiver's 410 began lasts until a resume.
 */
export const isPaused = (
  row: { pausedUntil: Date | null; pauseReason?: PauseReason | null },
  now = Date.now(),
): boolean => row.pauseReason === 'gone' || (row.pausedUntil !== null && row.pausedUntil.getTime() > now);

/** Under way in SQL, as isPaused says it: a hold without an end (the receiver's 410) or a pause whose end is ahead. */
export const PAUSE_ONGOING = `(pause_reason IS NOT NULL OR coalesce(paused_until > now(), false))`;

interface PauseColumns {
  id: string;
  paused_at: Date;
  paused_until: Date | null;
  pause_reason?: PauseReason | null;
}

const toState = (c: PauseColumns): PauseState => ({
  registrationId: c.id,
  pausedAt: c.paused_at,
  pausedUntil: c.paused_until,
  ...(c.pause_reason && { reason: c.pause_reason }),
});

/**
 * Pauses the project's registration for `forMs` at most; a pause under way is left as it is (`started` false).
 * Undefined when the project has no registration.
 */
export async function pauseRegistration(
  db: Db,
  projectId: string,
  forMs: number,
  /** Who starts it: a pause a portal link started ends when the project's links are revoked (endPortalLinkPause). */
  pausedBy: PausedBy | null = null,
): Promise<(PauseState & { started: boolean }) | undefined> {
  const { rows } = await db.raw<{ rows: (PauseColumns & { started: boolean })[] }>(
    `WITH current AS (
       SELECT id, ${PAUSE_ONGOING} AS ongoing FROM ${REGISTRATIONS} WHERE project_id = :projectId FOR UPDATE
     )
     UPDATE ${REGISTRATIONS} r
        SET paused_at = CASE WHEN current.ongoing THEN r.paused_at ELSE now() END,
            paused_until = CASE WHEN current.ongoing THEN r.paused_until
                                ELSE now() + :forMs * interval '1 millisecond' END,
            paused_by = CASE WHEN current.ongoing THEN r.paused_by ELSE CAST(:pausedBy AS jsonb) END,
            updated_at = CASE WHEN current.ongoing THEN r.updated_at ELSE now() END
       FROM current
      WHERE r.id = current.id
     RETURNING r.id, r.paused_at, r.paused_until, r.pause_reason, NOT coalesce(current.ongoing, false) AS started`,
    { projectId, forMs, pausedBy: pausedBy && JSON.stringify(pausedBy) },
  );
  const [row] = rows;
  return row && { ...toState(row), started: row.started };
}

/**
 * Ends the project's pause, if one is under way: its held deliveries become due for the resumer at once, and the
 * delivery log shows them pending again. Returns the pause that ended (undefined: the project has no registration;
 * `ended` undefined: it was not paused) and how many deliveries it held.
 */
export async function resumeRegistration(
  db: Db,
  projectId: string,
): Promise<{ registrationId: string; ended?: PauseState; held: number } | undefined> {
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: (PauseColumns & { ongoing: boolean })[] }>(
      `UPDATE ${REGISTRATIONS} r SET paused_at = NULL, paused_until = NULL, pause_reason = NULL,
              updated_at = CASE WHEN before.paused_at IS NULL THEN r.updated_at ELSE now() END
         FROM ${REGISTRATIONS} before
        WHERE before.id = r.id AND r.project_id = ?
       RETURNING r.id, before.paused_at, before.paused_until, before.pause_reason,
                 (before.pause_reason IS NOT NULL OR coalesce(before.paused_until > now(), false)) AS ongoing`,
      [projectId],
    );
    const [row] = rows;
    if (!row) return undefined;
    if (!row.ongoing) return { registrationId: row.id, held: 0 };
    const held = await releaseHeld(trx, row.id, projectId);
    return { registrationId: row.id, ended: toState(row), held };
  });
}

/**
 * Ends the project's pause if a portal link started it, as a resume does: the project's links were revoked, and a
 * pause must not outlive the link that made it. Undefined when no such pause is under way.
 */
export async function endPortalLinkPause(
  db: Db,
  projectId: string,
): Promise<{ registrationId: string; ended?: PauseState; held: number } | undefined> {
  const paused = await db(REGISTRATIONS)
    .where({ project_id: projectId })
    .where('paused_until', '>', db.fn.now())
    .whereRaw(`paused_by->>'kind' = 'portal-link'`)
    .forUpdate()
    .first<{ id: string } | undefined>('id');
  return paused ? resumeRegistration(db, projectId) : undefined;
}

/** The held deliveries of a registration become due now (the resumer paces them) and pending in the log. */
async function releaseHeld(db: Db, registrationId: string, projectId: string): Promise<number> {
  const held = await db(WAITERS)
    .where({ registration_id: registrationId })
    .where('eligible_at', '>', db.fn.now())
    .update({ eligible_at: db.fn.now() });
  await db(DELIVERIES).where({ project_id: projectId, status: 'held' }).update({ status: 'pending' });
  return held;
}

/**
 * Lists a delivery as held by its registration's pause, under its `waitToken`th wait: eligible when the pause ends, as
 * the registration row says now. The row is read under a share lock, so a resume committing meanwhile is seen (the
 * delivery is due at once) rather than leaving it listed until the old end.
 */
export async function holdDelivery(
  db: Db,
  registrationId: string,
  workflowId: string,
  waitToken: number,
  priority: number,
): Promise<void> {
  await db.raw(
    `WITH registration AS (
       SELECT paused_until, pause_reason FROM ${REGISTRATIONS} WHERE id = :registrationId FOR SHARE
     )
     INSERT INTO ${WAITERS} AS w (registration_id, workflow_id, wait_token, eligible_at, priority)
     SELECT :registrationId, :workflowId, :waitToken,
            -- A hold without an end (the receiver's 410) is due only when a member resumes (releaseHeld).
            CASE WHEN pause_reason IS NOT NULL THEN 'infinity'::timestamptz
                 ELSE GREATEST(now(), coalesce(paused_until, now())) END,
            :priority
       FROM registration
     ON CONFLICT (registration_id, workflow_id) DO UPDATE
        SET wait_token = excluded.wait_token, since = now(), eligible_at = excluded.eligible_at, woken_at = NULL,
            signalled_at = NULL, priority = excluded.priority`,
    { registrationId, workflowId, waitToken, priority },
  );
}

/**
 * Ends the pauses that ran out (their held deliveries are already due: they were listed until the pause's end), each
 * with its `webhook.pause.expire` audit row in the same transaction, and returns them for the operators' log and the
 * project's notice. Every worker may run it: each row is taken once.
 */
export async function endExpiredPauses(db: Db): Promise<(PauseState & { pausedUntil: Date; projectId: string })[]> {
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: (PauseColumns & { project_id: string })[] }>(
      `UPDATE ${REGISTRATIONS} r SET paused_at = NULL, paused_until = NULL, updated_at = now()
         FROM (SELECT id, paused_at, paused_until FROM ${REGISTRATIONS}
                WHERE paused_until IS NOT NULL AND paused_until <= now() FOR UPDATE SKIP LOCKED) before
        WHERE r.id = before.id
       RETURNING r.id, r.project_id, before.paused_at, before.paused_until`,
    );
    const ended = rows.map((row) => ({ ...toState(row), pausedUntil: row.paused_until!, projectId: row.project_id }));
    for (const pause of ended) {
      await releaseHeld(trx, pause.registrationId, pause.projectId);
      await appendAuditEvent(trx, {
        actor: { kind: 'system' },
        action: 'webhook.pause.expire',
        outcome: 'ok',
        projectId: pause.projectId,
        registrationId: pause.registrationId,
        changes: { pausedAt: pause.pausedAt.toISOString(), pausedUntil: pause.pausedUntil.toISOString() },
      });
    }
    return ended;
  });
}

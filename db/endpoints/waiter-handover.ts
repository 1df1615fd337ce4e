import type { Db } from '../connection';

/**
 * The waiters of a deleted registration (deliveries held by its pause, or waiting for its breaker) outlive it, kept by
 * project: the project's next registration takes them over, due at once, so they are woken when it registers (falls
 * first, at the resume rate) and sent to it, not left to their workflow's safety timer (up to the old pause's end).
 * The pause and the breaker are the registration's and end with it: a new registration starts unpaused and closed.
 */

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const WAITERS = 'webhook_breaker_waiters';
// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const UNREGISTERED = 'webhook_unregistered_waiters';
// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const DELIVERIES = 'deliveries';

/**
 * Keeps the waiters of a registration about to be deleted by its project (call it in the deletion's transaction,
 * the registration's row locked); those already signalled are woken and not kept.
 */
export async function setAsideWaiters(db: Db, registrationId: string, projectId: string): Promise<void> {
  await db.raw(
    `INSERT INTO ${UNREGISTERED} (project_id, workflow_id, wait_token, priority, since)
     SELECT :projectId, workflow_id, wait_token, priority, since FROM ${WAITERS}
      WHERE registration_id = :registrationId AND signalled_at IS NULL
     ON CONFLICT (project_id, workflow_id) DO UPDATE
        SET wait_token = excluded.wait_token, priority = excluded.priority, since = excluded.since`,
    { projectId, registrationId },
  );
}

/**
 * The project's new registration takes over the waiters its deleted one left, due now (it is neither paused nor
 * open), and the deliveries held by the old pause show pending again. A delivery that has listed itself under the new
 * registration meanwhile keeps that listing. Returns how many it took over.
 */
export async function adoptWaiters(db: Db, registrationId: string, projectId: string): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `WITH kept AS (DELETE FROM ${UNREGISTERED} WHERE project_id = :projectId RETURNING *)
     INSERT INTO ${WAITERS} (registration_id, workflow_id, wait_token, priority, since, eligible_at)
     SELECT :registrationId, workflow_id, wait_token, priority, since, now() FROM kept
     ON CONFLICT (registration_id, workflow_id) DO NOTHING`,
    { projectId, registrationId },
  );
  await db(DELIVERIES).where({ project_id: projectId, status: 'held' }).update({ status: 'pending' });
  return rowCount;
}

/** A delivery found its project without a registration and ends: no registration is to wake it. */
export async function forgetUnregisteredWaiter(db: Db, projectId: string, workflowId: string): Promise<void> {
  await db(UNREGISTERED).where({ project_id: projectId, workflow_id: workflowId }).delete();
}

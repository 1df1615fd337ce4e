// Purges of whole projects, what each removed, and the deletion of a project's rows. Kept after the project is gone.
import type { PurgeCounts } from '../common/purge';
import type { Db } from './connection';
import { auditEvidence, type AuditActor, type AuditEvidence } from './audit/events';

export type PurgeRecordStatus = 'pending' | 'completed' | 'failed';
export type PurgeRecordStep = 'executions' | 'rows' | 'data-keys' | 'done';

/** One of Temporal's batch deletion jobs of a purge, as last described. */
export interface PurgeBatchJob {
  jobId: string;
  /** 'starting' until Temporal has it; then Temporal's: running, completed, failed. */
  state: 'starting' | 'running' | 'completed' | 'failed';
  total: number;
  deleted: number;
  failed: number;
  /** When the purge first saw it ended (ISO 8601). */
  endedAt?: string;
}

export interface PurgeRow {
  id: string;
  projectId: string;
  status: PurgeRecordStatus;
  step: PurgeRecordStep;
  requestedBy: AuditActor;
  requestedAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  registrationsDeleted: number;
  portalLinksDeleted: number;
  contactsDeleted: number;
  noticesDeleted: number;
  membersDeleted: number;
  deliveryRowsDeleted: number;
  attemptsDeleted: number;
  executionsDeleted: number;
  batchJobs: PurgeBatchJob[];
  dataKeysDestroyed: string[];
  requestAuditId: string | null;
  outcomeAuditId: string | null;
  failure: string | null;
}

interface PurgeColumns {
  id: string;
  project_id: string;
  status: PurgeRecordStatus;
  step: PurgeRecordStep;
  requested_by: AuditActor;
  requested_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  registrations_deleted: number;
  portal_links_deleted: number;
  contacts_deleted: number;
  notices_deleted: number;
  members_deleted: number;
  delivery_rows_deleted: string;
  attempts_deleted: string;
  executions_deleted: string;
  batch_jobs: PurgeBatchJob[];
  data_keys_destroyed: string[];
  request_audit_id: string | null;
  outcome_audit_id: string | null;
  failure: string | null;
}

/** The rows one step deleted, added to the purge's counts in the transaction that deleted them. */
export interface PurgedRows {
  registrations: number;
  portalLinks: number;
  contacts: number;
  notices: number;
  members: number;
  deliveryRows: number;
  attempts: number;
}

const PURGES = 'purges';

const toPurge = (c: PurgeColumns): PurgeRow => ({
  id: c.id,
  projectId: c.project_id,
  status: c.status,
  step: c.step,
  requestedBy: c.requested_by,
  requestedAt: c.requested_at,
  updatedAt: c.updated_at,
  completedAt: c.completed_at,
  registrationsDeleted: c.registrations_deleted,
  portalLinksDeleted: c.portal_links_deleted,
  contactsDeleted: c.contacts_deleted,
  noticesDeleted: c.notices_deleted,
  membersDeleted: c.members_deleted,
  deliveryRowsDeleted: Number(c.delivery_rows_deleted),
  attemptsDeleted: Number(c.attempts_deleted),
  executionsDeleted: Number(c.executions_deleted),
  batchJobs: c.batch_jobs,
  dataKeysDestroyed: c.data_keys_destroyed,
  requestAuditId: c.request_audit_id,
  outcomeAuditId: c.outcome_audit_id,
  failure: c.failure,
});

/** A purge's counts as its record holds them (the API's view, the activities' answers and the audit row alike). */
export const purgeCounts = (row: PurgeRow): PurgeCounts => ({
  executionsDeleted: row.executionsDeleted,
  registrationsDeleted: row.registrationsDeleted,
  portalLinksDeleted: row.portalLinksDeleted,
  contactsDeleted: row.contactsDeleted,
  noticesDeleted: row.noticesDeleted,
  membersDeleted: row.membersDeleted,
  deliveryRowsDeleted: row.deliveryRowsDeleted,
  attemptsDeleted: row.attemptsDeleted,
  dataKeysDestroyed: row.dataKeysDestroyed.length,
});

const inTransaction = <T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> =>
  (db as { isTransaction?: boolean }).isTransaction ? work(db) : db.transaction(work);

/**
 * Records a purge (in the transaction of its audit row): pending, nothing removed yet. Undefined when the project has
 * an unfinished purge already (two requests at once): the caller resumes that one.
 */
export async function insertPurge(
  db: Db,
  purge: { id: string; projectId: string; requestedBy: AuditActor; requestAuditId?: string },
): Promise<PurgeRow | undefined> {
  const { rows } = await db.raw<{ rows: { id: string }[] }>(
    `INSERT INTO ${PURGES} (id, project_id, requested_by, request_audit_id) VALUES (?, ?, ?, ?)
     ON CONFLICT (project_id) WHERE status <> 'completed' DO NOTHING RETURNING id`,
    [purge.id, purge.projectId, JSON.stringify(purge.requestedBy), purge.requestAuditId ?? null],
  );
  return rows.length === 0 ? undefined : findPurge(db, purge.id);
}

export async function findPurge(db: Db, id: string): Promise<PurgeRow | undefined> {
  const columns = await db(PURGES).where({ id }).first<PurgeColumns | undefined>();
  return columns && toPurge(columns);
}

/** The project's purge not yet completed (pending, or failed and waiting to be run again), if any. */
export async function unfinishedPurge(db: Db, projectId: string): Promise<PurgeRow | undefined> {
  const columns = await db(PURGES)
    .where({ project_id: projectId })
    .whereNot({ status: 'completed' })
    .first<PurgeColumns | undefined>();
  return columns && toPurge(columns);
}

/** A failed purge made pending again, to be run again from where it stopped; undefined when it was not failed. */
export async function reopenPurge(db: Db, id: string): Promise<PurgeRow | undefined> {
  const updated = await db(PURGES)
    .where({ id, status: 'failed' })
    .update({ status: 'pending', failure: null, completed_at: null, updated_at: db.fn.now() });
  return updated === 0 ? undefined : findPurge(db, id);
}

/** Moves an unfinished purge to a later step (never back). */
export async function setPurgeStep(db: Db, id: string, step: Exclude<PurgeRecordStep, 'done'>): Promise<void> {
  await db(PURGES)
    .where({ id })
    .whereNot({ status: 'completed' })
    .update({
      step: db.raw(
        `CASE WHEN array_position(ARRAY['executions', 'rows', 'data-keys', 'done'], step) <
                   array_position(ARRAY['executions', 'rows', 'data-keys', 'done'], ?) THEN ? ELSE step END`,
        [step, step],
      ),
      updated_at: db.fn.now(),
    });
}

/** Records one batch job as last seen (added when new; when it ended kept from the first time it was seen ended). */
export async function recordPurgeBatchJob(db: Db, id: string, job: PurgeBatchJob): Promise<PurgeRow> {
  return inTransaction(db, async (trx) => {
    const row = await trx(PURGES).where({ id }).forUpdate().first<PurgeColumns | undefined>();
    if (!row) throw new Error(`purge ${id} is not recorded`);
    const jobs = row.batch_jobs.some((known) => known.jobId === job.jobId)
      ? row.batch_jobs.map((known) =>
          known.jobId === job.jobId ? { ...job, endedAt: known.endedAt ?? job.endedAt } : known,
        )
      : [...row.batch_jobs, job];
    await trx(PURGES)
      .where({ id })
      .update({ batch_jobs: JSON.stringify(jobs), updated_at: trx.fn.now() });
    return (await findPurge(trx, id))!;
  });
}

/**
 * Records executions of the project found listed before a batch job deletes them (each once, however often found),
 * and counts them all as the purge's executions deleted.
 */
export async function recordPurgeExecutions(
  db: Db,
  purgeId: string,
  executions: readonly { workflowId: string; runId: string }[],
): Promise<void> {
  await inTransaction(db, async (trx) => {
    if (executions.length > 0)
      await trx('purge_executions')
        .insert(executions.map((e) => ({ purge_id: purgeId, workflow_id: e.workflowId, run_id: e.runId })))
        .onConflict(['purge_id', 'workflow_id', 'run_id'])
        .ignore();
    await trx(PURGES)
      .where({ id: purgeId })
      .update({
        executions_deleted: trx('purge_executions').where({ purge_id: purgeId }).count('*'),
        updated_at: trx.fn.now(),
      });
  });
}

/** How many rows of the delivery log (and their attempts) one transaction of a purge deletes at most. */
export const PURGE_DELIVERY_BATCH = 5_000;

/**
 * Deletes up to `limit` of the project's delivery log rows and their attempts, and adds them to the purge's counts,
 * in one transaction; returns how many rows it deleted (0: none left).
 */
export async function deleteProjectDeliveryRows(
  db: Db,
  purgeId: string,
  projectId: string,
  limit = PURGE_DELIVERY_BATCH,
): Promise<number> {
  return inTransaction(db, async (trx) => {
    // No foreign key cascades a row's attempts (db/migrations/029): they go in the same statement.
    const { rows } = await trx.raw<{ rows: { deleted: string; attempts: string }[] }>(
      `WITH row AS (
         DELETE FROM deliveries d USING (
           SELECT id, created_at FROM deliveries WHERE project_id = ? ORDER BY id LIMIT ?
         ) batch WHERE d.id = batch.id AND d.created_at = batch.created_at
         RETURNING d.id, d.created_at
       ), attempts AS (
         DELETE FROM delivery_attempts a USING row
          WHERE a.delivery_id = row.id AND a.delivery_created_at = row.created_at RETURNING 1
       )
       SELECT (SELECT count(*) FROM row) AS deleted, (SELECT count(*) FROM attempts) AS attempts`,
      [projectId, limit],
    );
    const deleted = Number(rows[0]!.deleted);
    await addPurged(trx, purgeId, { deliveryRows: deleted, attempts: Number(rows[0]!.attempts) });
    return deleted;
  });
}

/**
 * Deletes the project's own rows, the project's last: its registration (its URL, secrets, custom headers and client
 * certificate; its breaker and waiters cascade), waiters kept for it, send limits, endpoint health, contacts, notices
 * told and queued, portal links, members, and the project itself; adds them to the purge's counts, all in one
 * transaction. Run again, it finds nothing and adds nothing.
 */
export async function deleteProjectRows(db: Db, purgeId: string, projectId: string): Promise<PurgedRows> {
  return inTransaction(db, async (trx) => {
    const byProject = (table: string) => trx(table).where({ project_id: projectId }).delete();
    const registrations = await byProject('webhook_registrations');
    await byProject('webhook_unregistered_waiters');
    await byProject('webhook_send_limits');
    await byProject('endpoint_health');
    const contacts = await byProject('project_notification_contacts');
    const notices = (await byProject('project_notices')) + (await byProject('project_notice_outbox'));
    const portalLinks = await byProject('portal_links');
    const members = await byProject('project_members');
    await trx('projects').where({ id: projectId }).delete();
    const purged = { registrations, portalLinks, contacts, notices, members, deliveryRows: 0, attempts: 0 };
    await addPurged(trx, purgeId, purged);
    return purged;
  });
}

async function addPurged(db: Db, purgeId: string, purged: Partial<PurgedRows>): Promise<void> {
  const add = (column: string, n = 0) => db.raw('?? + ?', [column, n]);
  await db(PURGES)
    .where({ id: purgeId })
    .update({
      registrations_deleted: add('registrations_deleted', purged.registrations),
      portal_links_deleted: add('portal_links_deleted', purged.portalLinks),
      contacts_deleted: add('contacts_deleted', purged.contacts),
      notices_deleted: add('notices_deleted', purged.notices),
      members_deleted: add('members_deleted', purged.members),
      delivery_rows_deleted: add('delivery_rows_deleted', purged.deliveryRows),
      attempts_deleted: add('attempts_deleted', purged.attempts),
      updated_at: db.fn.now(),
    });
}

/** Adds data keys destroyed to the purge's record (each id once). */
export async function recordPurgedDataKeys(db: Db, purgeId: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db(PURGES)
    .where({ id: purgeId })
    .update({
      data_keys_destroyed: db.raw(
        'ARRAY(SELECT DISTINCT k FROM unnest(data_keys_destroyed || ?::text[]) AS k ORDER BY k)',
        [[...ids]],
      ),
      updated_at: db.fn.now(),
    });
}

/**
 * Ends a purge, completed or failed, once: returns the row as ended, or undefined when it had ended already (the
 * caller then writes no second audit row).
 */
export async function closePurge(
  db: Db,
  id: string,
  outcome: { status: 'completed' | 'failed'; failure?: string },
): Promise<PurgeRow | undefined> {
  const updated = await db(PURGES)
    .where({ id, status: 'pending' })
    .update({
      status: outcome.status,
      ...(outcome.status === 'completed' && { step: 'done' }),
      failure: outcome.failure ?? null,
      completed_at: db.fn.now(),
      updated_at: db.fn.now(),
    });
  return updated === 0 ? undefined : findPurge(db, id);
}

/** Names the audit row that recorded how the purge ended (the last one, when it failed and was run again). */
export async function setPurgeOutcomeAudit(db: Db, id: string, auditId: string): Promise<void> {
  await db(PURGES).where({ id }).update({ outcome_audit_id: auditId });
}

/**
 * The audit rows of a purge (every `purge.*` row of its project naming it): id, time, action, outcome and chain hash,
 * in order.
 */
export async function purgeAuditEvents(db: Db, purge: Pick<PurgeRow, 'id' | 'projectId'>): Promise<AuditEvidence[]> {
  return auditEvidence(db, (query) =>
    query
      .where({ project_id: purge.projectId })
      .where('action', 'like', 'purge.%')
      .whereRaw(`changes->>'purgeId' = ?`, [purge.id]),
  );
}

// Erasure requests, what each found, and the person's delivery log rows it removes. The person is their keyed hash only.
import type { Db } from './connection';
import { auditEvidence, type AuditActor, type AuditEvidence } from './audit/events';

export type ErasureRecordStatus = 'pending' | 'waiting-for-open-deliveries' | 'completed' | 'failed';
/** A delivery run an erasure found: still running, deleted from Temporal, or already gone when it looked. */
export type ErasureExecutionState = 'open' | 'deleted' | 'gone';

export interface ErasureRow {
  id: string;
  personHash: string;
  status: ErasureRecordStatus;
  requestedBy: AuditActor;
  requestedAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  /** Delivery runs found (each execution once, however many looks found it). */
  deliveriesFound: number;
  historiesDeleted: number;
  /** Deleted executions Temporal still described at the last look. */
  unconfirmed: number;
  logRowsDeleted: number;
  stillOpen: number;
  requestAuditId: string | null;
  outcomeAuditId: string | null;
  failure: string | null;
}

/** One execution as a look found it. */
export interface FoundExecution {
  workflowId: string;
  /** '' when not known (a log row without its run, whose workflow Temporal no longer knows). */
  runId: string;
  state: ErasureExecutionState;
  /** A deleted run Temporal no longer knows (a gone one always is). */
  confirmed?: boolean;
}

/** A delivery log row of the person: the event's id and the run that last wrote it. */
export interface PersonDeliveryRow {
  id: string;
  workflowId: string;
  runId: string | null;
}

interface ErasureColumns {
  id: string;
  person_hash: string;
  status: ErasureRecordStatus;
  requested_by: AuditActor;
  requested_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  log_rows_deleted: number;
  request_audit_id: string | null;
  outcome_audit_id: string | null;
  failure: string | null;
  deliveries_found: string;
  histories_deleted: string;
  unconfirmed: string;
  still_open: string;
}

const ERASURES = 'erasures';
const EXECUTIONS = 'erasure_executions';

/** The erasure's columns and its counts, from the executions it found. */
const withCounts = (db: Db) =>
  db(`${ERASURES} as e`).select(
    'e.*',
    db.raw(`(SELECT count(*) FROM ${EXECUTIONS} x WHERE x.erasure_id = e.id) AS deliveries_found`),
    db.raw(
      `(SELECT count(*) FROM ${EXECUTIONS} x WHERE x.erasure_id = e.id AND x.state = 'deleted') AS histories_deleted`,
    ),
    db.raw(
      `(SELECT count(*) FROM ${EXECUTIONS} x WHERE x.erasure_id = e.id AND x.state = 'deleted' AND NOT x.confirmed)
         AS unconfirmed`,
    ),
    db.raw(`(SELECT count(*) FROM ${EXECUTIONS} x WHERE x.erasure_id = e.id AND x.state = 'open') AS still_open`),
  );

const toErasure = (c: ErasureColumns): ErasureRow => ({
  id: c.id,
  personHash: c.person_hash,
  status: c.status,
  requestedBy: c.requested_by,
  requestedAt: c.requested_at,
  updatedAt: c.updated_at,
  completedAt: c.completed_at,
  deliveriesFound: Number(c.deliveries_found),
  historiesDeleted: Number(c.histories_deleted),
  unconfirmed: Number(c.unconfirmed),
  logRowsDeleted: c.log_rows_deleted,
  stillOpen: Number(c.still_open),
  requestAuditId: c.request_audit_id,
  outcomeAuditId: c.outcome_audit_id,
  failure: c.failure,
});

/** Records a request (in the transaction of its audit row): pending, nothing found yet. */
export async function insertErasure(
  db: Db,
  erasure: { id: string; personHash: string; requestedBy: AuditActor; requestAuditId?: string },
): Promise<ErasureRow> {
  await db(ERASURES).insert({
    id: erasure.id,
    person_hash: erasure.personHash,
    requested_by: JSON.stringify(erasure.requestedBy),
    request_audit_id: erasure.requestAuditId ?? null,
  });
  return (await findErasure(db, erasure.id))!;
}

export async function findErasure(db: Db, id: string): Promise<ErasureRow | undefined> {
  const columns = (await withCounts(db).where('e.id', id).first()) as ErasureColumns | undefined;
  return columns && toErasure(columns);
}

/** The person's delivery log rows (at most `limit`, by id). */
export async function personDeliveryRows(db: Db, personHash: string, limit = 10_000): Promise<PersonDeliveryRow[]> {
  const rows = await db('deliveries')
    .where({ person_hash: personHash })
    .orderBy('id')
    .limit(limit)
    .select<{ id: string; workflow_id: string; run_id: string | null }[]>('id', 'workflow_id', 'run_id');
  return rows.map((row) => ({ id: row.id, workflowId: row.workflow_id, runId: row.run_id }));
}

/** Deletes these rows of the person's (a row of anyone else is never touched); their attempts go with them. */
export async function deletePersonDeliveryRows(db: Db, personHash: string, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  // No foreign key cascades a row's attempts (db/migrations/029): they go in the same statement.
  const { rows } = await db.raw<{ rows: { deleted: string }[] }>(
    `WITH row AS (
       DELETE FROM deliveries WHERE person_hash = ? AND id = ANY(?) RETURNING id, created_at
     ), attempts AS (
       DELETE FROM delivery_attempts a USING row WHERE a.delivery_id = row.id AND a.delivery_created_at = row.created_at
     )
     SELECT count(*) AS deleted FROM row`,
    [personHash, [...ids]],
  );
  return Number(rows[0]!.deleted);
}

/**
 * What one look found and removed, in one transaction: each execution's state (an open one may since be deleted or
 * gone; a deleted one is confirmed once Temporal no longer knows it), the log rows deleted, and where the erasure
 * stands. A closed erasure is not moved back.
 */
export async function recordErasureLook(
  db: Db,
  erasureId: string,
  found: readonly FoundExecution[],
  logRowsDeleted: number,
): Promise<ErasureRow> {
  const look = async (trx: Db) => {
    for (const execution of found)
      await trx.raw(
        `INSERT INTO ${EXECUTIONS} AS x (erasure_id, workflow_id, run_id, state, confirmed)
         VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (erasure_id, workflow_id, run_id) DO UPDATE
            SET state = CASE WHEN x.state = 'open' THEN excluded.state ELSE x.state END,
                confirmed = x.confirmed OR excluded.confirmed,
                updated_at = now()`,
        [
          erasureId,
          execution.workflowId,
          execution.runId,
          execution.state,
          execution.state === 'gone' || execution.confirmed === true,
        ],
      );
    const open = found.some((execution) => execution.state === 'open');
    await trx(ERASURES)
      .where({ id: erasureId })
      .whereNotIn('status', ['completed', 'failed'])
      .update({
        log_rows_deleted: trx.raw('log_rows_deleted + ?', [logRowsDeleted]),
        status: open ? 'waiting-for-open-deliveries' : 'pending',
        updated_at: trx.fn.now(),
      });
    return (await findErasure(trx, erasureId))!;
  };
  return (db as { isTransaction?: boolean }).isTransaction ? look(db) : db.transaction(look);
}

/** The executions this erasure deleted and has not yet seen gone from Temporal. */
export async function unconfirmedErasureExecutions(db: Db, erasureId: string): Promise<FoundExecution[]> {
  const rows = await db(EXECUTIONS)
    .where({ erasure_id: erasureId, state: 'deleted', confirmed: false })
    .select<{ workflow_id: string; run_id: string }[]>('workflow_id', 'run_id');
  return rows.map((row) => ({ workflowId: row.workflow_id, runId: row.run_id, state: 'deleted' }));
}

/**
 * Ends an erasure, completed or failed, once: returns the row as ended, or undefined when it had ended already (the
 * caller then writes no second audit row).
 */
export async function closeErasure(
  db: Db,
  id: string,
  outcome: { status: 'completed' | 'failed'; failure?: string },
): Promise<ErasureRow | undefined> {
  const updated = await db(ERASURES)
    .where({ id })
    .whereNotIn('status', ['completed', 'failed'])
    .update({
      status: outcome.status,
      failure: outcome.failure ?? null,
      completed_at: db.fn.now(),
      updated_at: db.fn.now(),
    });
  return updated === 0 ? undefined : findErasure(db, id);
}

/** Names the audit row that recorded how the erasure ended. */
export async function setErasureOutcomeAudit(db: Db, id: string, auditId: string): Promise<void> {
  await db(ERASURES).where({ id }).update({ outcome_audit_id: auditId });
}

/** The executions an erasure deleted from Temporal, in the order it found them. */
export async function deletedErasureExecutions(
  db: Db,
  erasureId: string,
): Promise<{ workflowId: string; runId: string; confirmed: boolean }[]> {
  const rows = await db(EXECUTIONS)
    .where({ erasure_id: erasureId, state: 'deleted' })
    .orderBy([{ column: 'found_at' }, { column: 'workflow_id' }, { column: 'run_id' }])
    .select<{ workflow_id: string; run_id: string; confirmed: boolean }[]>('workflow_id', 'run_id', 'confirmed');
  return rows.map((row) => ({ workflowId: row.workflow_id, runId: row.run_id, confirmed: row.confirmed }));
}

/** The audit rows an erasure names (its request's and its outcome's): id, time, action and chain hash. */
export async function erasureAuditEvents(
  db: Db,
  erasure: Pick<ErasureRow, 'requestAuditId' | 'outcomeAuditId'>,
): Promise<AuditEvidence[]> {
  const ids = [erasure.requestAuditId, erasure.outcomeAuditId].filter((id): id is string => id !== null);
  if (ids.length === 0) return [];
  return auditEvidence(db, (query) => query.whereIn('id', ids));
}

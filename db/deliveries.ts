import { createHash } from 'node:crypto';
import type { Db } from './connection';

/**
 * Where a delivery stands: pending until delivered, given up (failed) or not sent at all (skipped); held while its
 * webhook is paused.
 */
export const DELIVERY_STATUSES = ['pending', 'held', 'delivered', 'failed', 'skipped'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One event's delivery as the log keeps it: status, error code and timing only, never the payload. */
export interface DeliveryRow {
  id: string;
  projectId: string;
  type: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  workflowId: string;
  /** The run of workflowId that last wrote the row; null in rows from before runs were kept. */
  runId: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** When its last attempt was logged (written by the attempt's own statement); null before the first. */
  lastAttemptAt: Date | null;
}

export interface DeliveryAttemptRow {
  attempt: number;
  /** Its place in the attempt log (a page's cursor). */
  seq: number;
  at: Date;
  statusCode: number | null;
  errorCode: string | null;
  durationMs: number;
}

export interface EndpointHealthRow {
  projectId: string;
  consecutiveFailures: number;
  failingSince: Date | null;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  lastError: string | null;
  alertedAt: Date | null;
}

interface DeliveryColumns {
  id: string;
  project_id: string;
  type: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  workflow_id: string;
  run_id: string | null;
  person_hash: string | null;
  /** When the row's last attempt was logged (its attempt's `at`, written in the same statement); null before one. */
  last_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

interface HealthColumns {
  project_id: string;
  consecutive_failures: number;
  failing_since: Date | null;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  last_error: string | null;
  alerted_at: Date | null;
}

const DELIVERIES = 'deliveries';
const ATTEMPTS = 'delivery_attempts';
const HEALTH = 'endpoint_health';

/**
 * The row's partition key: the created_at of the delivery already logged under this id (its newest, should there be
 * two), or now for a new one. With it the write is an upsert on the primary key (id, created_at). Two first writes
 * of one id at once: the second fails on its day's partition's unique index on id (23505) and its activity, retried,
 * finds the row. Only two first writes on either side of midnight UTC could both succeed, as two rows of one id on two
 * days; every read pins a row by its created_at, so they never mix.
 */
const CREATED_AT = `coalesce((SELECT created_at FROM ${DELIVERIES} WHERE id = :id ORDER BY created_at DESC LIMIT 1),
                             date_trunc('milliseconds', now()))`;

/**
 * The columns a prepared statement of the log returns, named: one returning `d.*` would fail ("cached plan must not
 * change result type") in every process that prepared it the moment a migration adds a column to the log.
 */
const RETURNED = `d.id, d.project_id, d.type, d.status, d.attempts, d.last_status_code, d.last_error, d.workflow_id,
                  d.run_id, d.person_hash, d.last_attempt_at, d.created_at, d.updated_at`;

/**
 * The delivery path's writes run as named prepared statements: planned once per connection, not at every call. With
 * their row found by id across every day's partition (no partition key to prune on), planning them was most of their
 * cost, growing with the days the log keeps (bench/log-writes.ts: 9 ms of PostgreSQL's CPU per delivery at 39
 * partitions against 2.6 at 9, planned each time). Each name stands for one text only.
 */
const prepared = (name: string) => ({ name: `deliveries_${name}` });

/** Nothing is written under an id another project's delivery holds. */
const OURS = `NOT EXISTS (SELECT 1 FROM ${DELIVERIES} WHERE id = :id AND project_id <> :projectId)`;

const toDelivery = (c: DeliveryColumns): DeliveryRow => ({
  id: c.id,
  projectId: c.project_id,
  type: c.type,
  status: c.status,
  attempts: c.attempts,
  lastStatusCode: c.last_status_code,
  lastError: c.last_error,
  workflowId: c.workflow_id,
  runId: c.run_id ?? null,
  createdAt: c.created_at,
  updatedAt: c.updated_at,
  lastAttemptAt: c.last_attempt_at ?? null,
});

const toHealth = (c: HealthColumns): EndpointHealthRow => ({
  projectId: c.project_id,
  consecutiveFailures: c.consecutive_failures,
  failingSince: c.failing_since,
  lastSuccessAt: c.last_success_at,
  lastFailureAt: c.last_failure_at,
  lastError: c.last_error,
  alertedAt: c.alerted_at,
});

/** Who a delivery is: the event's X-Webhook-Id, its project and type, and the workflow run carrying it now. */
export interface DeliveryKey {
  id: string;
  projectId: string;
  type: string;
  workflowId: string;
  /** The run of workflowId, kept with it: redelivery reads the event from this run's history. */
  runId?: string;
  /**
   * The event's person as the keyed hash of its userUUID (common/crypto/person-hash.ts), for an erasure: written with
   * the row, and kept by every later write that does not carry it (an attempt's).
   */
  personHash?: string;
}

/**
 * Writes the delivery's row in a status (insert, or update of the same project's row). A row of another project
 * with this id is never touched: returns undefined then.
 */
export async function upsertDelivery(
  db: Db,
  key: DeliveryKey,
  status: DeliveryStatus,
  lastError: string | null = null,
): Promise<DeliveryRow | undefined> {
  const { rows } = await db
    .raw<{ rows: DeliveryColumns[] }>(
      `INSERT INTO ${DELIVERIES} AS d (id, project_id, type, status, workflow_id, run_id, person_hash, last_error,
                                     created_at)
     SELECT :id, :projectId, :type, :status, :workflowId, :runId, :personHash, :lastError, ${CREATED_AT}
      WHERE ${OURS}
     ON CONFLICT (id, created_at) DO UPDATE
        SET status = excluded.status, workflow_id = excluded.workflow_id, run_id = excluded.run_id, updated_at = now(),
            person_hash = coalesce(excluded.person_hash, d.person_hash),
            last_error = coalesce(excluded.last_error, d.last_error)
      WHERE d.project_id = excluded.project_id
     RETURNING ${RETURNED}`,
      {
        id: key.id,
        projectId: key.projectId,
        type: key.type,
        status,
        workflowId: key.workflowId,
        runId: key.runId ?? null,
        personHash: key.personHash ?? null,
        lastError,
      },
    )
    .options(prepared('upsert'));
  const [columns] = rows;
  return columns && toDelivery(columns);
}

export interface AttemptRecord {
  runAttempt: number;
  statusCode?: number;
  errorCode?: string;
  durationMs: number;
  /** What went wrong in words (status or error code), absent when delivered. */
  error?: string;
  delivered: boolean;
}

/**
 * Logs one attempt once (a retried report of the same run attempt is ignored) and moves the delivery's counters;
 * a delivered attempt ends the delivery and the endpoint's failure episode (its health). One statement, one round
 * trip: this is on every delivery's path. Returns the delivery row, or undefined when the id is another project's.
 */
export async function recordDeliveryAttempt(
  db: Db,
  key: DeliveryKey,
  attempt: AttemptRecord,
): Promise<DeliveryRow | undefined> {
  // The new row's attempts column carries how many attempts this statement logged (0 or 1) into the update; the
  // attempt carries its delivery's created_at, its partition key.
  const { rows } = await db
    .raw<{ rows: DeliveryColumns[] }>(
      `WITH pinned AS (SELECT ${CREATED_AT} AS created_at),
     attempt AS (
       INSERT INTO ${ATTEMPTS} (delivery_id, delivery_created_at, workflow_id, run_attempt, status_code, error_code,
                                duration_ms)
       SELECT :id, pinned.created_at, :workflowId, CAST(:runAttempt AS integer), CAST(:statusCode AS integer),
              :errorCode, CAST(:durationMs AS integer)
         FROM pinned
        WHERE ${OURS}
       ON CONFLICT (delivery_id, delivery_created_at, workflow_id, run_attempt) DO NOTHING
       RETURNING 1
     )${
       attempt.delivered
         ? `, health AS (
       INSERT INTO ${HEALTH} (project_id, last_success_at) SELECT :projectId, now() WHERE ${OURS}
       ON CONFLICT (project_id) DO UPDATE
          SET consecutive_failures = 0, failing_since = NULL, last_success_at = now(), alerted_at = NULL
     )`
         : ''
     }
     INSERT INTO ${DELIVERIES} AS d (id, project_id, type, status, workflow_id, run_id, attempts, last_status_code,
                                     last_error, person_hash, created_at, last_attempt_at)
     SELECT :id, :projectId, :type, :status, :workflowId, :runId, (SELECT count(*) FROM attempt),
            CAST(:statusCode AS integer), :lastError, :personHash, pinned.created_at,
            CASE WHEN EXISTS (SELECT 1 FROM attempt) THEN now() END
       FROM pinned
     ON CONFLICT (id, created_at) DO UPDATE
        SET status = excluded.status, workflow_id = excluded.workflow_id, run_id = excluded.run_id, updated_at = now(),
            person_hash = coalesce(excluded.person_hash, d.person_hash),
            attempts = d.attempts + excluded.attempts,
            last_status_code = CASE WHEN excluded.attempts > 0 THEN excluded.last_status_code ELSE d.last_status_code END,
            last_error = CASE WHEN excluded.attempts > 0 THEN excluded.last_error ELSE d.last_error END,
            last_attempt_at = coalesce(excluded.last_attempt_at, d.last_attempt_at)
      WHERE d.project_id = excluded.project_id
     RETURNING ${RETURNED}`,
      {
        id: key.id,
        projectId: key.projectId,
        type: key.type,
        workflowId: key.workflowId,
        runId: key.runId ?? null,
        personHash: key.personHash ?? null,
        status: attempt.delivered ? 'delivered' : 'pending',
        runAttempt: attempt.runAttempt,
        statusCode: attempt.statusCode ?? null,
        errorCode: attempt.errorCode ?? null,
        durationMs: attempt.durationMs,
        lastError: attempt.delivered ? null : (attempt.error ?? null),
      },
    )
    .options(prepared(attempt.delivered ? 'attempt_delivered' : 'attempt_failed'));
  const [columns] = rows;
  return columns && toDelivery(columns);
}

/** The delivery gave up: failed, with the last error in words. */
export async function markDeliveryFailed(
  db: Db,
  key: DeliveryKey,
  lastError: string,
): Promise<DeliveryRow | undefined> {
  return db.transaction(async (trx) => {
    // The last attempt's error says more than Temporal's "giving up retrying": it stays when there is one.
    const row = await trx<DeliveryColumns>(DELIVERIES)
      .where({ id: key.id })
      .orderBy('created_at', 'desc')
      .forUpdate()
      .first();
    return upsertDelivery(trx, key, 'failed', row?.attempts ? (row.last_error ?? lastError) : lastError);
  });
}

/**
 * Where a delivery stands in the log's order (newest first): its creation time as PostgreSQL keeps it, to the
 * microsecond (a JS Date holds milliseconds, and rows created in the same millisecond would be lost between pages),
 * and its id.
 */
export interface DeliveryPosition {
  /** UTC, always `YYYY-MM-DDTHH:MM:SS.ffffffZ`. */
  createdAt: string;
  id: string;
}

export interface DeliveryFilter {
  status?: DeliveryStatus;
  type?: string;
  since?: Date;
  until?: Date;
  limit: number;
  /** Resume after this position, newest first. */
  after?: DeliveryPosition;
}

/** A delivery of a listed page, with its position for a cursor. */
export type ListedDelivery = DeliveryRow & { position: DeliveryPosition };

/** A project's deliveries, newest first; one more than `limit` tells the caller another page exists. */
export async function listDeliveries(db: Db, projectId: string, filter: DeliveryFilter): Promise<ListedDelivery[]> {
  const query = db<DeliveryColumns>({ d: DELIVERIES })
    .select(
      db.raw(RETURNED),
      db.raw(`to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_time`),
    )
    .where({ project_id: projectId });
  if (filter.status) void query.where({ status: filter.status });
  if (filter.type) void query.where({ type: filter.type });
  if (filter.since) void query.where('created_at', '>=', filter.since);
  if (filter.until) void query.where('created_at', '<', filter.until);
  if (filter.after)
    void query.whereRaw('(created_at, id) < (CAST(? AS timestamptz), ?)', [filter.after.createdAt, filter.after.id]);
  void query
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(filter.limit + 1);
  // Prepared, one statement per combination of filters (the text names which): a list without a time window prunes no
  // day, and planning it over every partition cost more than reading its page (bench/partitions.ts).
  const shape = createHash('sha256').update(query.toSQL().sql).digest('hex').slice(0, 16);
  const rows = (await query.options(prepared(`list_${shape}`))) as unknown as (DeliveryColumns & {
    position_time: string;
  })[];
  return rows.map((columns) => ({
    ...toDelivery(columns),
    position: { createdAt: columns.position_time, id: columns.id },
  }));
}

/** The project's delivery of this id (its newest, should a reused id have left two on different days). */
export async function findDelivery(db: Db, projectId: string, id: string): Promise<DeliveryRow | undefined> {
  const columns = await db<DeliveryColumns>(DELIVERIES)
    .where({ id, project_id: projectId })
    .orderBy('created_at', 'desc')
    .first();
  return columns && toDelivery(columns);
}

/** Where a page of a delivery's attempts resumes: after the attempt logged as `seq` (its order in the log). */
export interface AttemptsPage {
  limit: number;
  afterSeq?: number;
}

/**
 * Which delivery's attempts: its id and its created_at, the attempts' partition key (an id alone could name two
 * deliveries, days apart, should a workflow id be reused).
 */
export type DeliveryRef = Pick<DeliveryRow, 'id' | 'createdAt'>;

/**
 * A delivery's attempts in order, numbered across its redeliveries: every one, or a page of them (one more than
 * `limit` tells the caller another page exists). A page reads its rows through (delivery_id, delivery_created_at,
 * seq) in the delivery's day's partition, however many attempts came before it.
 */
export async function listDeliveryAttempts(
  db: Db,
  delivery: DeliveryRef,
  page?: AttemptsPage,
): Promise<DeliveryAttemptRow[]> {
  const pin = { delivery_id: delivery.id, delivery_created_at: delivery.createdAt };
  const query = db(ATTEMPTS).where(pin).orderBy('seq');
  if (page?.afterSeq !== undefined) void query.where('seq', '>', page.afterSeq);
  if (page) void query.limit(page.limit + 1);
  // The attempts before the page number it; evaluated once (it does not depend on the row).
  const before =
    page?.afterSeq === undefined
      ? db.raw('0')
      : db.raw(`(SELECT count(*) FROM ${ATTEMPTS} WHERE delivery_id = ? AND delivery_created_at = ? AND seq <= ?)`, [
          delivery.id,
          delivery.createdAt,
          page.afterSeq,
        ]);
  const rows = await query.select<
    {
      seq: string;
      at: Date;
      status_code: number | null;
      error_code: string | null;
      duration_ms: number;
      before: string;
    }[]
  >('seq', 'at', 'status_code', 'error_code', 'duration_ms', db.raw('? AS before', [before]));
  return rows.map((r, i) => ({
    attempt: Number(r.before) + i + 1,
    seq: Number(r.seq),
    at: r.at,
    statusCode: r.status_code,
    errorCode: r.error_code,
    durationMs: r.duration_ms,
  }));
}

/** When the delivery's last attempt was made; null before the first. */
export async function lastAttemptAt(db: Db, delivery: DeliveryRef): Promise<Date | null> {
  const row = await db(ATTEMPTS)
    .where({ delivery_id: delivery.id, delivery_created_at: delivery.createdAt })
    .orderBy('seq', 'desc')
    .first<{ at: Date } | undefined>('at');
  return row?.at ?? null;
}

/**
 * Moves a delivered or failed delivery back to pending for a redelivery, atomically: of two concurrent
 * redeliveries only one wins. Returns the row as it was, or undefined when it is not redeliverable.
 */
export async function claimRedelivery(db: Db, projectId: string, id: string): Promise<DeliveryRow | undefined> {
  // The FROM copy of the row shows it before the update: the caller learns what it was.
  const result = await db.raw<{ rows: DeliveryColumns[] }>(
    `UPDATE ${DELIVERIES} AS d SET status = 'pending', updated_at = now() FROM ${DELIVERIES} AS before
     WHERE before.id = d.id AND before.created_at = d.created_at AND d.id = ? AND d.project_id = ?
       AND d.status IN ('delivered', 'failed')
     RETURNING before.*`,
    [id, projectId],
  );
  const [columns] = result.rows;
  return columns && toDelivery(columns);
}

/** Puts a claimed delivery back as it was when its redelivery could not be started. */
export async function releaseRedelivery(db: Db, row: DeliveryRow): Promise<void> {
  await db(DELIVERIES)
    .where({ id: row.id, created_at: row.createdAt, status: 'pending' })
    .update({ status: row.status });
}

/** The project's failed deliveries created in [since, until), oldest first; not TEST ones (tests are limited). */
export async function failedDeliveries(
  db: Db,
  projectId: string,
  since: Date,
  until: Date | undefined,
  limit: number,
): Promise<DeliveryRow[]> {
  const query = db<DeliveryColumns>(DELIVERIES)
    .where({ project_id: projectId, status: 'failed' })
    .whereNot({ type: 'TEST' })
    .where('created_at', '>=', since);
  if (until) void query.where('created_at', '<', until);
  return (await query.orderBy('created_at').limit(limit)).map(toDelivery);
}

/** What one maintenance of the delivery log's partitions did to one day (UTC). */
export interface DeliveryLogDay {
  /**
   * created: its partitions were made (rows: those moved out of the DEFAULT partitions); dropped: its partitions were
   * dropped past retention, with their rows; kept: past retention, but `deliveries` rows of it are still pending or
   * held; busy: its partitions' locks were not had within 2 s, left for the next maintenance.
   */
  action: 'created' | 'dropped' | 'kept' | 'busy';
  day: string;
  deliveries: number | null;
  attempts: number | null;
}

/**
 * Makes the delivery log's daily partitions through `daysAhead` days from today and drops each day's pair whose day
 * ended more than `retentionDays` ago, unless it still holds a pending or held delivery (db/migrations/029: the
 * owner's function, which the worker role may execute). A delivery is kept at least `retentionDays` after it was
 * created.
 */
export async function maintainDeliveryLog(db: Db, retentionDays: number, daysAhead = 7): Promise<DeliveryLogDay[]> {
  const { rows } = await db.raw<{
    rows: { action: DeliveryLogDay['action']; day: string; deliveries: string | null; attempts: string | null }[];
  }>(`SELECT action, to_char(day, 'YYYY-MM-DD') AS day, deliveries, attempts FROM delivery_log_maintain(?, ?)`, [
    retentionDays,
    daysAhead,
  ]);
  const count = (n: string | null) => (n === null ? null : Number(n));
  return rows.map((r) => ({
    action: r.action,
    day: r.day,
    deliveries: count(r.deliveries),
    attempts: count(r.attempts),
  }));
}

/**
 * A failure extends the endpoint's failure episode (or starts one); a delivered attempt ends it, in
 * recordDeliveryAttempt's statement. Returns the endpoint's health.
 */
export async function recordEndpointFailure(db: Db, projectId: string, error: string): Promise<EndpointHealthRow> {
  const now = db.fn.now();
  const [columns] = await db<HealthColumns>(HEALTH)
    .insert({
      project_id: projectId,
      consecutive_failures: 1,
      failing_since: now,
      last_failure_at: now,
      last_error: error,
    })
    .onConflict('project_id')
    .merge({
      consecutive_failures: db.raw(`${HEALTH}.consecutive_failures + 1`),
      failing_since: db.raw(`coalesce(${HEALTH}.failing_since, now())`),
      last_failure_at: now,
      last_error: error,
    })
    .returning('*');
  return toHealth(columns as HealthColumns);
}

/**
 * Claims the alert of the endpoint's current failure episode: true for exactly one caller per episode. With
 * `failingForMs`, only once the endpoint has failed continuously that long.
 */
export async function claimEpisodeAlert(
  db: Db,
  projectId: string,
  failingForMs?: number,
): Promise<EndpointHealthRow | undefined> {
  const query = db<HealthColumns>(HEALTH)
    .where({ project_id: projectId })
    .whereNull('alerted_at')
    .where('consecutive_failures', '>', 0);
  if (failingForMs !== undefined)
    void query.where('failing_since', '<=', db.raw(`now() - make_interval(secs => ?)`, [failingForMs / 1000]));
  const [columns] = await query.update({ alerted_at: db.fn.now() as unknown as Date }).returning('*');
  return columns && toHealth(columns);
}

export async function findEndpointHealth(db: Db, projectId: string): Promise<EndpointHealthRow | undefined> {
  const columns = await db<HealthColumns>(HEALTH).where({ project_id: projectId }).first();
  return columns && toHealth(columns);
}

/** The project each of these workflows delivered for, as the delivery log holds it (workflows it lacks are left out). */
export async function projectsOfWorkflows(db: Db, workflowIds: string[]): Promise<Map<string, string>> {
  const rows = await db('deliveries')
    .whereIn('workflow_id', workflowIds)
    .distinct<{ project_id: string; workflow_id: string }[]>('project_id', 'workflow_id');
  return new Map(rows.map((row) => [row.workflow_id, row.project_id]));
}

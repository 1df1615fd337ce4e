// `npm run bench:partitions [-- --rows 10000000] [-- --days 40] [-- --retention 30] [-- --projects 1000]`: the delivery
// log partitioned by day (db/migrations/029) filled with `rows` deliveries over `days` days for `projects` projects
// (1 or 2 attempts each), then the retention (delivery_log_maintain, as the worker calls it hourly) while another
// project's member reads its list (listDeliveries, the API's query) in a loop; and, for comparison, the old retention
// (a DELETE of the rows untouched for `retention` days, their attempts cascading) on an unpartitioned copy of the same
// rows, under the same reads. Real PostgreSQL: embedded (its own, in a temporary folder), or DATABASE_URL's server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import {
  appendAuditEvent,
  configureAuditTrail,
  createDb,
  createScratchDatabase,
  listDeliveries,
  maintainDeliveryLog,
  migrateToLatest,
} from '../db';
import { startEmbeddedPostgres, type RunningPostgres } from '../dev/postgres';
import { freePort } from '../dev/ports';
import { positiveIntOption, progressLog } from './script-args';
import { summarize, type LatencySummary } from './stats';

const log = progressLog('bench:partitions');
const option = positiveIntOption;

const ROWS = option('rows', 10_000_000);
const DAYS = option('days', 40);
const RETENTION = option('retention', 30);
const PROJECTS = option('projects', 1_000);
/** How long the neighbour's reads run alone before each retention, for the figures "before". */
const BASELINE_MS = 10_000;
const NEIGHBOUR = 'bench-neighbour';
const NEIGHBOUR_ROWS = 5_000;
const MB = 1024 * 1024;
/** One instant for every statement of the fill: a delivery's attempts compute its created_at the same way. */
const NOW = new Date().toISOString();

/** The parents' indexes and constraints, dropped for the fill and built again after it (a sort beats row inserts). */
async function withoutIndexes(db: Knex, load: () => Promise<void>): Promise<void> {
  const { rows: constraints } = await db.raw<{ rows: { table: string; name: string; def: string }[] }>(
    `SELECT conrelid::regclass::text AS "table", conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid IN ('deliveries'::regclass, 'delivery_attempts'::regclass) AND contype IN ('p', 'u')`,
  );
  const { rows: indexes } = await db.raw<{ rows: { name: string; def: string }[] }>(
    `SELECT indexname AS name, indexdef AS def FROM pg_indexes
      WHERE tablename IN ('deliveries', 'delivery_attempts') AND indexname NOT IN (SELECT conname FROM pg_constraint)`,
  );
  for (const { name } of indexes) await db.raw('DROP INDEX ??', [name]);
  for (const { table, name } of constraints) await db.raw('ALTER TABLE ?? DROP CONSTRAINT ??', [table, name]);
  await load();
  log('building the indexes');
  for (const { table, name, def } of constraints)
    await db.raw(`ALTER TABLE ?? ADD CONSTRAINT ?? ${def}`, [table, name]);
  // pg_indexes shows a partitioned table's index as made ON ONLY the parent (its partitions' indexes attached one by
  // one); made ON the parent, each partition's is built with it.
  for (const { def } of indexes) await db.raw(def.replace(' ON ONLY ', ' ON '));
}

/** The delivery log's rows and attempts over DAYS days up to now, a day per statement (one partition each). */
async function fill(db: Knex): Promise<void> {
  // The past days' partitions, made as the migration makes them (the owner may call the function directly).
  await db.raw(
    `SELECT delivery_log_add_day(d::date)
       FROM generate_series((now() AT TIME ZONE 'UTC')::date - ?::int, (now() AT TIME ZONE 'UTC')::date, interval '1 day') AS d`,
    [DAYS],
  );
  const perDay = Math.ceil(ROWS / DAYS);
  await withoutIndexes(db, () => fillDays(db, perDay));
  // One held delivery past retention: its day is kept until it ends.
  await db.raw(`UPDATE deliveries SET status = 'held' WHERE id = ?`, [`bench-${ROWS - perDay + 1}`]);
  // The neighbour's log: recent, a row a minute.
  await db.raw(
    `INSERT INTO deliveries (id, project_id, type, status, attempts, last_status_code, workflow_id, created_at)
     SELECT 'neighbour-' || i, ?, 'FALL_DETECTION', 'delivered', 1, 200, 'neighbour-' || i,
            date_trunc('milliseconds', now() - i * interval '1 minute')
       FROM generate_series(1, ?) AS i`,
    [NEIGHBOUR, NEIGHBOUR_ROWS],
  );
  await db.raw(
    `INSERT INTO delivery_attempts (delivery_id, delivery_created_at, workflow_id, run_attempt, status_code, duration_ms)
     SELECT id, created_at, id, 1, 200, 12 FROM deliveries WHERE project_id = ?`,
    [NEIGHBOUR],
  );
  // As autovacuum would leave them: statistics and visibility maps, like the unpartitioned copy's.
  await db.raw('VACUUM ANALYZE deliveries');
  await db.raw('VACUUM ANALYZE delivery_attempts');
}

async function fillDays(db: Knex, perDay: number): Promise<void> {
  for (let day = 0; day < DAYS; day += 1) {
    const from = day * perDay + 1;
    const to = Math.min(ROWS, from + perDay - 1);
    // Row i was created (i / ROWS) of DAYS days ago; every 500th row of the newest day is still pending.
    const created = `date_trunc('milliseconds', timestamptz '${NOW}' - (i::float8 / ${ROWS} * ${DAYS}) * interval '1 day')`;
    await db.raw(
      `INSERT INTO deliveries (id, project_id, type, status, attempts, last_status_code, workflow_id, created_at,
                               updated_at)
       SELECT 'bench-' || i, 'bench-p-' || (i % ?), CASE WHEN i % 7 = 0 THEN 'FALL_DETECTION' ELSE 'VITAL_THRESHOLD' END,
              CASE WHEN i < ? AND i % 500 = 0 THEN 'pending' WHEN i % 50 = 0 THEN 'failed' ELSE 'delivered' END,
              1 + i % 2, 200, 'bench-' || i, ${created}, ${created} + interval '1 minute'
         FROM generate_series(?::int, ?::int) AS i`,
      [PROJECTS, perDay, from, to],
    );
    await db.raw(
      `INSERT INTO delivery_attempts (delivery_id, delivery_created_at, workflow_id, run_attempt, at, status_code,
                                      duration_ms)
       SELECT 'bench-' || i, ${created}, 'bench-' || i, n, ${created} + n * interval '1 second',
              CASE WHEN n = 1 + i % 2 THEN 200 ELSE 500 END, 40
         FROM generate_series(?::int, ?::int) AS i, generate_series(1, 2) AS n WHERE n <= 1 + i % 2`,
      [from, to],
    );
    if (day % 5 === 4 || to === ROWS) log(`  ${to.toLocaleString('en')} rows`);
  }
}

/** An unpartitioned copy of the same rows, as migrations 003–028 kept them (the foreign key cascades attempts). */
async function unpartitionedCopy(db: Knex): Promise<void> {
  await db.raw('CREATE TABLE old_deliveries AS SELECT * FROM deliveries');
  await db.raw('CREATE TABLE old_attempts AS SELECT * FROM delivery_attempts');
  for (const statement of [
    'ALTER TABLE old_deliveries ADD PRIMARY KEY (id)',
    'CREATE INDEX ON old_deliveries (project_id, created_at, id)',
    'CREATE INDEX ON old_deliveries (updated_at)',
    'CREATE INDEX ON old_deliveries (project_id, status, created_at, id)',
    'CREATE INDEX ON old_deliveries (project_id, type, created_at, id)',
    'CREATE INDEX ON old_deliveries (project_id, status, type, created_at, id)',
    'CREATE INDEX ON old_deliveries (person_hash) WHERE person_hash IS NOT NULL',
    'ALTER TABLE old_attempts ADD PRIMARY KEY (seq)',
    'ALTER TABLE old_attempts ADD UNIQUE (delivery_id, workflow_id, run_attempt)',
    'CREATE INDEX ON old_attempts (delivery_id, delivery_created_at, seq)',
    'ALTER TABLE old_attempts ADD FOREIGN KEY (delivery_id) REFERENCES old_deliveries (id) ON DELETE CASCADE',
    'VACUUM ANALYZE old_deliveries',
    'VACUUM ANALYZE old_attempts',
  ])
    await db.raw(statement);
}

/** Table and index bytes of the log: each partition's (the parents hold none), or each unpartitioned table's. */
async function logBytes(db: Knex): Promise<number> {
  const { rows } = await db.raw<{ rows: { bytes: string }[] }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes FROM pg_class c
      WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'r'
        AND (c.relname IN ('deliveries', 'delivery_attempts') OR c.oid IN (
             SELECT inhrelid FROM pg_inherits WHERE inhparent IN ('deliveries'::regclass, 'delivery_attempts'::regclass)))`,
  );
  return Number(rows[0]!.bytes);
}

interface Read {
  startedMs: number;
  ms: number;
}

/** The neighbour's member reading the first page of its log, one call after another, until stop(). */
function readLoop(url: string): { reads: Read[]; errors: string[]; stop(): Promise<void> } {
  const db = createDb(url, { max: 1 });
  const reads: Read[] = [];
  const errors: string[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const startedMs = performance.now();
      try {
        await listDeliveries(db, NEIGHBOUR, { limit: 50 });
        reads.push({ startedMs, ms: performance.now() - startedMs });
      } catch (error) {
        errors.push((error as Error).message);
      }
    }
  })();
  return {
    reads,
    errors,
    async stop() {
      running = false;
      await done;
      await db.destroy();
    },
  };
}

/** The longest any backend of this database has waited for a lock so far, sampled every 10 ms until stop(). */
function lockWaits(db: Knex): { stop(): Promise<number> } {
  let longest = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      const { rows } = await db.raw<{ rows: { ms: number | null }[] }>(
        `SELECT extract(epoch FROM max(clock_timestamp() - query_start)) * 1000 AS ms FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      longest = Math.max(longest, Number(rows[0]?.ms ?? 0));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return Math.round(longest * 10) / 10;
    },
  };
}

interface RetentionFigures {
  rows: number;
  attempts: number;
  ms: number;
  lockWaitMs: number;
  before: LatencySummary;
  during: LatencySummary;
  readErrors: number;
  bytesBefore: number;
  bytesAfter: number;
  deadTuples?: number;
  note: string;
}

/** Runs `retention` while the neighbour reads; its reads alone for BASELINE_MS first. */
async function underReads(
  url: string,
  sampler: Knex,
  retention: () => Promise<{ rows: number; attempts: number; note: string }>,
): Promise<Omit<RetentionFigures, 'bytesBefore' | 'bytesAfter'>> {
  const loop = readLoop(url);
  await new Promise((resolve) => setTimeout(resolve, BASELINE_MS));
  const from = performance.now();
  const waits = lockWaits(sampler);
  const done = await retention();
  const to = performance.now();
  const lockWaitMs = await waits.stop();
  // A read still running when the retention ended counts as during it.
  await new Promise((resolve) => setTimeout(resolve, 500));
  await loop.stop();
  const before = loop.reads.filter((read) => read.startedMs < from).map((read) => read.ms);
  const during = loop.reads
    .filter((read) => read.startedMs + read.ms >= from && read.startedMs <= to)
    .map((read) => read.ms);
  return {
    ...done,
    ms: Math.round(to - from),
    lockWaitMs,
    before: summarize(before),
    during: summarize(during),
    readErrors: loop.errors.length,
  };
}

const latency = (s: LatencySummary) => `${s.p50} / ${s.p99} / ${s.max} ms (${s.count.toLocaleString('en')} reads)`;

function report(fillS: number, copyS: number, partitioned: RetentionFigures, old: RetentionFigures): string {
  const row = (name: string, f: RetentionFigures) =>
    [
      `| ${name}`,
      `${f.rows.toLocaleString('en')} + ${f.attempts.toLocaleString('en')}`,
      `${(f.ms / 1000).toFixed(2)} s`,
      `${f.lockWaitMs} ms`,
      latency(f.before),
      latency(f.during),
      `${Math.round(f.bytesBefore / MB).toLocaleString('en')} → ${Math.round(f.bytesAfter / MB).toLocaleString('en')} MB`,
      f.deadTuples === undefined ? '0' : f.deadTuples.toLocaleString('en'),
      `${f.note} |`,
    ].join(' | ');
  return [
    `${ROWS.toLocaleString('en')} deliveries over ${DAYS} days, ${PROJECTS} projects, 1–2 attempts each; retention ${RETENTION} days; fill ${fillS} s, unpartitioned copy ${copyS} s`,
    '',
    '| retention | deliveries + attempts removed | time | longest lock wait | neighbour list p50 / p99 / max, before | … during | log size (tables + indexes) | dead tuples left | note |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    row('partitioned: delivery_log_maintain', partitioned),
    row('unpartitioned: DELETE (old purge)', old),
  ].join('\n');
}

/** How many audit rows the trail's size is measured over. */
const AUDIT_ROWS = 20_000;

/**
 * The audit trail's bytes a row (table, TOAST and indexes) over AUDIT_ROWS rows of the actions members and the system
 * write most: a redelivery, a registration with its changes, a portal link made, a breaker opened.
 */
async function auditBytesPerRow(db: Knex): Promise<{ rows: number; bytes: number; perRow: number }> {
  configureAuditTrail({ hmacKeys: [{ id: 'bench-partitions', key: randomBytes(32) }] });
  const member = { kind: 'member' as const, subject: 'auth0|5f3c9a1b2e4d6f7a8b9c0d1e', requestId: '' };
  for (let i = 0; i < AUDIT_ROWS; i += 1) {
    const projectId = `bench-p-${i % 1000}`;
    const actor = { ...member, requestId: randomUUID() };
    const kind = i % 4;
    await appendAuditEvent(
      db,
      kind === 0
        ? { actor, action: 'delivery.redeliver', outcome: 'ok', projectId, deliveryId: `webhook-event-${randomUUID()}` }
        : kind === 1
          ? {
              actor,
              action: 'webhook.register',
              outcome: 'ok',
              projectId,
              registrationId: randomUUID(),
              changes: {
                url: 'https://receiver.example.org/hooks/falls',
                types: ['FALL_DETECTION', 'VITAL_THRESHOLD'],
              },
            }
          : kind === 2
            ? { actor, action: 'portal.link.create', outcome: 'ok', projectId, changes: { capabilities: ['read'] } }
            : {
                actor: { kind: 'system' },
                action: 'breaker.open',
                outcome: 'ok',
                projectId,
                registrationId: randomUUID(),
              },
    );
  }
  await db.raw('VACUUM ANALYZE audit_events');
  const { rows } = await db.raw<{ rows: { rows: string; bytes: string }[] }>(
    `SELECT count(*) AS rows, pg_total_relation_size('audit_events') AS bytes FROM audit_events`,
  );
  const counted = Number(rows[0]!.rows);
  const bytes = Number(rows[0]!.bytes);
  return { rows: counted, bytes, perRow: Math.round(bytes / counted) };
}

async function main(): Promise<void> {
  let embedded: RunningPostgres | undefined;
  let dataDir: string | undefined;
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-bench-partitions-'));
    log(`starting PostgreSQL in ${dataDir}`);
    embedded = await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
    serverUrl = embedded.url;
  }
  const scratch = await createScratchDatabase(serverUrl, 'webhooks_bench_partitions');
  const admin = createDb(scratch.url, { max: 1, statementTimeoutMs: 3_600_000 });
  const sampler = createDb(scratch.url, { max: 1 });
  try {
    await migrateToLatest(admin);
    log(`filling the partitioned log: ${ROWS.toLocaleString('en')} deliveries over ${DAYS} days`);
    let started = performance.now();
    await fill(admin);
    const fillS = Math.round((performance.now() - started) / 100) / 10;
    log('copying it to unpartitioned tables, as before migration 029');
    started = performance.now();
    await unpartitionedCopy(admin);
    const copyS = Math.round((performance.now() - started) / 100) / 10;

    log(`the partitioned retention (${RETENTION} days) under the neighbour's reads`);
    let bytesBefore = await logBytes(admin);
    const partitionedRun = await underReads(scratch.url, sampler, async () => {
      const days = await maintainDeliveryLog(admin, RETENTION, 7);
      const dropped = days.filter((day) => day.action === 'dropped');
      const kept = days.filter((day) => day.action === 'kept');
      return {
        rows: dropped.reduce((sum, day) => sum + (day.deliveries ?? 0), 0),
        attempts: dropped.reduce((sum, day) => sum + (day.attempts ?? 0), 0),
        note: `${dropped.length} days dropped, ${kept.length} kept (${kept.map((d) => `${d.day}: ${d.deliveries} open`).join(', ')})`,
      };
    });
    const partitioned: RetentionFigures = { ...partitionedRun, bytesBefore, bytesAfter: await logBytes(admin) };

    // The old tables under the names the query functions read, so the neighbour's reads run the same query.
    await admin.raw('ALTER TABLE deliveries RENAME TO partitioned_deliveries');
    await admin.raw('ALTER TABLE delivery_attempts RENAME TO partitioned_attempts');
    await admin.raw('ALTER TABLE old_deliveries RENAME TO deliveries');
    await admin.raw('ALTER TABLE old_attempts RENAME TO delivery_attempts');
    log(`the old retention: DELETE of the rows untouched for ${RETENTION} days, under the neighbour's reads`);
    bytesBefore = await logBytes(admin);
    const oldRun = await underReads(scratch.url, sampler, async () => {
      const { rows } = await admin.raw<{ rows: { attempts: string }[] }>(
        `SELECT count(*) AS attempts FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
          WHERE d.updated_at < now() - make_interval(days => ?)`,
        [RETENTION],
      );
      const deleted = await admin('deliveries')
        .where('updated_at', '<', admin.raw('now() - make_interval(days => ?)', [RETENTION]))
        .delete();
      return { rows: deleted, attempts: Number(rows[0]!.attempts), note: 'one DELETE; autovacuum left to its own' };
    });
    await admin.raw('SELECT pg_stat_force_next_flush()');
    const { rows: dead } = await admin.raw<{ rows: { dead: string }[] }>(
      `SELECT sum(n_dead_tup) AS dead FROM pg_stat_user_tables WHERE relname IN ('deliveries', 'delivery_attempts')`,
    );
    const old: RetentionFigures = {
      ...oldRun,
      bytesBefore,
      bytesAfter: await logBytes(admin),
      deadTuples: Number(dead[0]!.dead),
    };
    process.stdout.write(`${report(fillS, copyS, partitioned, old)}\n`);
    log(`the audit trail: ${AUDIT_ROWS.toLocaleString('en')} rows`);
    const audit = await auditBytesPerRow(admin);
    const sixYears = audit.perRow * 1_000 * 24 * 365 * 6;
    process.stdout.write(
      `\naudit_events: ${audit.rows.toLocaleString('en')} rows, ${Math.round(audit.bytes / 1024).toLocaleString('en')} KiB ` +
        `with indexes, ${audit.perRow} bytes a row; at 1,000 actions an hour for six years ` +
        `(${(1_000 * 24 * 365 * 6).toLocaleString('en')} rows): ${(sixYears / 1024 ** 3).toFixed(1)} GiB\n`,
    );
    if (partitioned.readErrors + old.readErrors > 0)
      process.stdout.write(`read errors: partitioned ${partitioned.readErrors}, old ${old.readErrors}\n`);
  } finally {
    await sampler.destroy();
    await admin.destroy();
    // Dropping a database of some 12 GB outlasts the scratch pool's statement timeout: the embedded server's folder
    // goes whole instead.
    if (embedded) await embedded.stop();
    else await scratch.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

main()
  .catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  })
  // The scratch database's admin connection is left open with its server gone.
  .finally(() => process.exit());

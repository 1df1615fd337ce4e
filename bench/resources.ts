// What each part of the system spent over one stage, for the per-delivery figures docs/capacity.md scales: CPU-seconds
// per process (counted from /proc, so other work on the machine slows a stage but does not inflate them), PostgreSQL's
// CPU split by the database each backend serves, each database's growth and writes, the WAL, block writes, the
// service's delivery-log rows, and (on the cluster) the bytes clients exchanged with the frontends through HAProxy.
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { Knex } from 'knex';
import { createDb } from '../db';
import { cpuSeconds } from './processes';

const run = promisify(execFile);

/** A process measured on its own; `part` groups several (the two history hosts are "temporal history"). */
export interface MeteredProcess {
  part: string;
  pid: number;
  withChildren?: boolean;
}

export interface DatabaseFigures {
  /** pg_database_size after − before. */
  growthBytes: number;
  /** Rows inserted + updated + deleted (pg_stat_database). */
  tuplesWritten: number;
  transactions: number;
  /** CPU-seconds of the backends connected to this database (pg_stat_activity's pid → /proc). */
  backendCpuSeconds: number;
  /** The tables that grew most (each with its indexes and TOAST), bytes: where a delivery's bytes go. */
  largestGrowth?: Record<string, number>;
}

export interface ResourceFigures {
  /** Verified deliveries of the stage: the divisor of every per-delivery figure. */
  deliveries: number;
  seconds: number;
  cpuSeconds: Record<string, number>;
  postgres?: {
    databases: Record<string, DatabaseFigures>;
    /** The instance's CPU not in a backend measured at both ends: WAL writer, checkpointer, autovacuum, new backends. */
    otherCpuSeconds?: number;
    walBytes: number;
    /** pg_stat_io writes + extends (8 KiB blocks) and fsyncs, the whole instance: what the disk must take. */
    blockWrites?: number;
    fsyncs?: number;
    walSyncs?: number;
  };
  /** The delivery log's rows written during the stage, per table, and the tables' growth in bytes. */
  serviceRows?: Record<string, number>;
  serviceTableGrowthBytes?: number;
  /** The dev server's SQLite file and its WAL: their growth. */
  sqliteGrowthBytes?: number;
  /**
   * The bytes between the clients (worker, bench, API) and HAProxy's port, i.e. the frontends: the kernel's count of
   * each established connection (`ss -ti`: bytes_received from the clients, bytes_acked to them). gRPC keeps its
   * connections for the whole run; one that closed during the stage would be missed.
   */
  network?: { toFrontends: number; fromFrontends: number };
}

/** The service database's delivery-log and audit tables, counted per stage. */
const SERVICE_TABLES = ['deliveries', 'delivery_attempts', 'audit_trail', 'audit_events'];

interface Snapshot {
  at: number;
  cpu: Map<string, number>;
  backends: Map<number, { database: string; cpu: number }>;
  postgresCpu?: number;
  databases: Map<string, { size: number; tuples: number; xacts: number; tables?: Map<string, number> }>;
  walLsn?: string;
  io?: { writes: number; fsyncs: number };
  walSyncs?: number;
  rows: Map<string, number>;
  tableBytes?: number;
  sqlite?: number;
  network?: { in: number; out: number };
}

export class ResourceMeter {
  private db: Knex | undefined;
  /** A connection to each other database of the instance, for its tables' sizes. */
  private others = new Map<string, Knex>();
  private before: Snapshot | undefined;

  constructor(
    private readonly options: {
      processes: MeteredProcess[];
      /** A superuser's URL of the service database (pg_stat_activity shows every backend's database). */
      databaseUrl?: string;
      postgresPid?: number;
      sqliteFiles?: string[];
      /** The port every client dials (HAProxy's). */
      balancerPort?: number;
    },
  ) {
    if (options.databaseUrl) this.db = createDb(options.databaseUrl, { max: 1 });
  }

  async start(): Promise<void> {
    this.before = await this.snapshot();
  }

  async stop(deliveries: number): Promise<ResourceFigures> {
    const after = await this.snapshot();
    const before = this.before!;
    const cpu: Record<string, number> = {};
    for (const [part, used] of after.cpu) {
      const was = before.cpu.get(part);
      if (was !== undefined) cpu[part] = round(used - was, 2);
    }
    const figures: ResourceFigures = { deliveries, seconds: round((after.at - before.at) / 1000, 1), cpuSeconds: cpu };
    if (after.walLsn && before.walLsn && this.db) {
      const databases: Record<string, DatabaseFigures> = {};
      for (const [name, now] of after.databases) {
        const was = before.databases.get(name);
        if (!was) continue;
        const tables = [...(now.tables ?? [])]
          .map(([table, bytes]) => [table, bytes - (was.tables?.get(table) ?? 0)] as const)
          .filter(([, grew]) => grew > 0)
          .sort((a, b) => b[1] - a[1])
          .slice(0, 5);
        databases[name] = {
          growthBytes: now.size - was.size,
          tuplesWritten: now.tuples - was.tuples,
          transactions: now.xacts - was.xacts,
          backendCpuSeconds: 0,
          ...(tables.length && { largestGrowth: Object.fromEntries(tables) }),
        };
      }
      let backends = 0;
      for (const [pid, now] of after.backends) {
        // A backend that started during the stage spent all its CPU in it.
        const spent = now.cpu - (before.backends.get(pid)?.cpu ?? 0);
        const entry = databases[now.database];
        if (entry) entry.backendCpuSeconds = round(entry.backendCpuSeconds + spent, 2);
        backends += spent;
      }
      const { rows } = await this.db.raw<{ rows: { bytes: string }[] }>(
        'SELECT pg_wal_lsn_diff(?::pg_lsn, ?::pg_lsn)::bigint AS bytes',
        [after.walLsn, before.walLsn],
      );
      figures.postgres = {
        databases,
        ...(after.postgresCpu !== undefined &&
          before.postgresCpu !== undefined && {
            otherCpuSeconds: round(after.postgresCpu - before.postgresCpu - backends, 2),
          }),
        walBytes: Number(rows[0]!.bytes),
        ...(after.io &&
          before.io && { blockWrites: after.io.writes - before.io.writes, fsyncs: after.io.fsyncs - before.io.fsyncs }),
        ...(after.walSyncs !== undefined &&
          before.walSyncs !== undefined && { walSyncs: after.walSyncs - before.walSyncs }),
      };
    }
    if (after.rows.size)
      figures.serviceRows = Object.fromEntries(
        [...after.rows].map(([table, count]) => [table, count - (before.rows.get(table) ?? 0)]),
      );
    if (after.tableBytes !== undefined && before.tableBytes !== undefined)
      figures.serviceTableGrowthBytes = after.tableBytes - before.tableBytes;
    if (after.sqlite !== undefined && before.sqlite !== undefined)
      figures.sqliteGrowthBytes = after.sqlite - before.sqlite;
    if (after.network && before.network)
      figures.network = {
        toFrontends: after.network.in - before.network.in,
        fromFrontends: after.network.out - before.network.out,
      };
    return figures;
  }

  async close(): Promise<void> {
    await Promise.all([...(this.db ? [this.db] : []), ...this.others.values()].map((db) => db.destroy()));
  }

  private async tableSizes(database: string): Promise<Map<string, number>> {
    let db = this.others.get(database);
    if (!db) {
      const url = new URL(this.options.databaseUrl!);
      url.pathname = `/${database}`;
      db = createDb(url.toString(), { max: 1 });
      this.others.set(database, db);
    }
    const { rows } = await db.raw<{ rows: { name: string; bytes: string }[] }>(
      `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes FROM pg_class c
        WHERE c.relkind IN ('r', 'p')
          AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)`,
    );
    return new Map(rows.map((row) => [row.name, Number(row.bytes)]));
  }

  private async snapshot(): Promise<Snapshot> {
    const snapshot: Snapshot = {
      at: Date.now(),
      cpu: new Map(),
      backends: new Map(),
      databases: new Map(),
      rows: new Map(),
    };
    for (const p of this.options.processes) {
      const used = await cpuSeconds(p.pid, p.withChildren);
      if (used !== undefined) snapshot.cpu.set(p.part, (snapshot.cpu.get(p.part) ?? 0) + used);
    }
    if (this.options.postgresPid) {
      snapshot.postgresCpu = await cpuSeconds(this.options.postgresPid, true);
      if (snapshot.postgresCpu !== undefined) snapshot.cpu.set('postgres', snapshot.postgresCpu);
    }
    if (this.db) await this.databaseSnapshot(this.db, snapshot);
    if (this.options.sqliteFiles) {
      let bytes = 0;
      for (const file of this.options.sqliteFiles) bytes += (await stat(file).catch(() => undefined))?.size ?? 0;
      snapshot.sqlite = bytes;
    }
    // HAProxy's own byte counters move only as a TCP session ends (gRPC's last the whole run), and its /proc io
    // counts no recv() or send(): the kernel's count per connection instead.
    if (this.options.balancerPort)
      snapshot.network = await connectionBytes(this.options.balancerPort).catch(() => undefined);
    return snapshot;
  }

  private async databaseSnapshot(db: Knex, snapshot: Snapshot): Promise<void> {
    // Each query on its own: a server without pg_stat_io (before 16) or a role that cannot see other backends still
    // gives the rest.
    const query = async <T>(sql: string): Promise<T[]> =>
      (await db.raw<{ rows: T[] }>(sql).catch(() => ({ rows: [] as T[] }))).rows;
    const activity = await query<{ pid: number; datname: string }>(
      `SELECT pid, datname FROM pg_stat_activity WHERE datname IS NOT NULL AND backend_type = 'client backend'`,
    );
    for (const backend of activity) {
      const used = await cpuSeconds(backend.pid);
      if (used !== undefined) snapshot.backends.set(backend.pid, { database: backend.datname, cpu: used });
    }
    // The statistics are sent at a transaction's end and flushed at most once a second: ask for the current ones.
    await query('SELECT pg_stat_force_next_flush()');
    for (const row of await query<{ datname: string; size: string; tuples: string; xacts: string }>(
      `SELECT d.datname, pg_database_size(d.datname) AS size,
              s.tup_inserted + s.tup_updated + s.tup_deleted AS tuples, s.xact_commit + s.xact_rollback AS xacts
         FROM pg_database d JOIN pg_stat_database s ON s.datid = d.oid
        WHERE NOT d.datistemplate`,
    ))
      snapshot.databases.set(row.datname, {
        size: Number(row.size),
        tuples: Number(row.tuples),
        xacts: Number(row.xacts),
        tables: await this.tableSizes(row.datname).catch(() => undefined),
      });
    snapshot.walLsn = (await query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn'))[0]?.lsn;
    // PostgreSQL 18 counts the WAL's writes and fsyncs in pg_stat_io too (object 'wal'): the tables' and indexes'
    // blocks apart from the WAL's.
    const io = await query<{ object: string; writes: string | null; fsyncs: string | null }>(
      `SELECT object, sum(coalesce(writes, 0) + coalesce(extends, 0)) AS writes, sum(coalesce(fsyncs, 0)) AS fsyncs
         FROM pg_stat_io GROUP BY object`,
    );
    if (io.length) {
      const relations = io.filter((row) => row.object !== 'wal');
      snapshot.io = {
        writes: relations.reduce((sum, row) => sum + Number(row.writes), 0),
        fsyncs: relations.reduce((sum, row) => sum + Number(row.fsyncs), 0),
      };
      const wal = io.find((row) => row.object === 'wal');
      if (wal) snapshot.walSyncs = Number(wal.fsyncs);
    }
    for (const table of SERVICE_TABLES) {
      const count = (await query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`))[0]?.n;
      if (count !== undefined) snapshot.rows.set(table, Number(count));
    }
    const bytes = (
      await query<{ bytes: string | null }>(
        `SELECT sum(pg_total_relation_size(c.oid)) AS bytes FROM pg_class c
          WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace
            AND (c.relname = ANY('{${SERVICE_TABLES.join(',')}}') OR c.relispartition)`,
      )
    )[0]?.bytes;
    if (bytes != null) snapshot.tableBytes = Number(bytes);
  }
}

/** Bytes received and acknowledged-as-sent over the established TCP connections to a local port (iproute2's ss). */
async function connectionBytes(port: number): Promise<{ in: number; out: number }> {
  const { stdout } = await run('ss', ['-Htin', 'state', 'established', `( sport = :${port} )`]);
  const sum = (name: string) =>
    [...stdout.matchAll(new RegExp(`\\b${name}:(\\d+)`, 'g'))].reduce((total, match) => total + Number(match[1]), 0);
  return { in: sum('bytes_received'), out: sum('bytes_acked') };
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

/** Each part's figures per delivery (CPU-seconds per 1000 deliveries; bytes per delivery), for the table and docs. */
export function perDelivery(figures: ResourceFigures): {
  cpuSecondsPer1000: Record<string, number>;
  bytesPerDelivery: Record<string, number>;
  perDelivery: Record<string, number>;
} {
  const n = Math.max(1, figures.deliveries);
  const cpuSecondsPer1000: Record<string, number> = {};
  const temporalTotal = Object.entries(figures.cpuSeconds)
    .filter(([part]) => part.startsWith('temporal'))
    .reduce((sum, [, used]) => sum + used, 0);
  for (const [part, used] of Object.entries(figures.cpuSeconds)) cpuSecondsPer1000[part] = round((used * 1000) / n, 2);
  if (Object.keys(figures.cpuSeconds).filter((part) => part.startsWith('temporal ')).length > 1)
    cpuSecondsPer1000['temporal (all services)'] = round((temporalTotal * 1000) / n, 2);
  const bytesPerDelivery: Record<string, number> = {};
  const rates: Record<string, number> = {};
  const pg = figures.postgres;
  if (pg) {
    for (const [name, db] of Object.entries(pg.databases)) {
      if (db.tuplesWritten === 0 && db.growthBytes === 0 && db.backendCpuSeconds === 0) continue;
      cpuSecondsPer1000[`postgres backends: ${name}`] = round((db.backendCpuSeconds * 1000) / n, 2);
      bytesPerDelivery[`database growth: ${name}`] = Math.round(db.growthBytes / n);
      for (const [table, grew] of Object.entries(db.largestGrowth ?? {}))
        bytesPerDelivery[`  of which ${table} (${name})`] = Math.round(grew / n);
      rates[`rows written: ${name}`] = round(db.tuplesWritten / n, 1);
      rates[`transactions: ${name}`] = round(db.transactions / n, 1);
    }
    if (pg.otherCpuSeconds !== undefined)
      cpuSecondsPer1000['postgres: other processes'] = round((pg.otherCpuSeconds * 1000) / n, 2);
    bytesPerDelivery['WAL (whole instance)'] = Math.round(pg.walBytes / n);
    if (pg.blockWrites !== undefined) rates['8 KiB block writes (whole instance)'] = round(pg.blockWrites / n, 2);
    if (pg.walSyncs !== undefined) rates['WAL fsyncs (whole instance)'] = round(pg.walSyncs / n, 2);
  }
  if (figures.serviceTableGrowthBytes !== undefined)
    bytesPerDelivery['delivery log and audit tables'] = Math.round(figures.serviceTableGrowthBytes / n);
  for (const [table, rows] of Object.entries(figures.serviceRows ?? {})) rates[`${table} rows`] = round(rows / n, 2);
  if (figures.sqliteGrowthBytes !== undefined)
    bytesPerDelivery['Temporal SQLite file and WAL'] = Math.round(figures.sqliteGrowthBytes / n);
  if (figures.network) {
    bytesPerDelivery['network: clients → frontends (HAProxy)'] = Math.round(figures.network.toFrontends / n);
    bytesPerDelivery['network: frontends → clients (HAProxy)'] = Math.round(figures.network.fromFrontends / n);
  }
  return { cpuSecondsPer1000, bytesPerDelivery, perDelivery: rates };
}

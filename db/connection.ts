import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import { migrationSource } from './migrations';

export type Db = Knex | Knex.Transaction;

/** Pool size and the three waits that keep a silent database from holding a request (or an activity) for long. */
export interface DbPoolOptions {
  min?: number;
  max?: number;
  /** Waiting for a free pooled connection (Knex acquireConnectionTimeout). */
  acquireTimeoutMs?: number;
  /** Opening a new connection (pg connectionTimeoutMillis). */
  connectTimeoutMs?: number;
  /** One statement on the server (PostgreSQL statement_timeout). */
  statementTimeoutMs?: number;
}

/** The defaults of DB_ACQUIRE_TIMEOUT_MS, DB_CONNECT_TIMEOUT_MS and DB_STATEMENT_TIMEOUT_MS. */
export const DB_TIMEOUT_DEFAULTS = { acquireTimeoutMs: 5_000, connectTimeoutMs: 5_000, statementTimeoutMs: 10_000 };

/** The pool options of the validated configuration. */
export const dbPoolOptions = (config: {
  DB_ACQUIRE_TIMEOUT_MS: number;
  DB_CONNECT_TIMEOUT_MS: number;
  DB_STATEMENT_TIMEOUT_MS: number;
}): DbPoolOptions => ({
  acquireTimeoutMs: config.DB_ACQUIRE_TIMEOUT_MS,
  connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS,
  statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
});

export function createDb(connectionString: string, pool: DbPoolOptions = {}): Knex {
  const timeouts = {
    acquireTimeoutMs: pool.acquireTimeoutMs ?? DB_TIMEOUT_DEFAULTS.acquireTimeoutMs,
    connectTimeoutMs: pool.connectTimeoutMs ?? DB_TIMEOUT_DEFAULTS.connectTimeoutMs,
    statementTimeoutMs: pool.statementTimeoutMs ?? DB_TIMEOUT_DEFAULTS.statementTimeoutMs,
  };
  return knex({
    client: 'pg',
    connection: {
      connectionString,
      connectionTimeoutMillis: timeouts.connectTimeoutMs,
      statement_timeout: timeouts.statementTimeoutMs,
    },
    pool: { min: pool.min ?? 0, max: pool.max ?? 10 },
    acquireConnectionTimeout: timeouts.acquireTimeoutMs,
  });
}

/** Applies pending migrations; Knex's migration lock makes concurrent start-ups safe. */
export async function migrateToLatest(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
  return applied;
}

/** Migrations this code has that the database has not applied (all of them on an empty database). */
export async function pendingMigrations(db: Knex): Promise<string[]> {
  const known = await migrationSource.getMigrations([]);
  const { rows } = await db.raw<{ rows: { present: boolean }[] }>(
    `SELECT to_regclass('knex_migrations') IS NOT NULL AS present`,
  );
  if (!rows[0]?.present) return known;
  const applied = new Set((await db('knex_migrations').select<{ name: string }[]>('name')).map((row) => row.name));
  return known.filter((name) => !applied.has(name));
}

/** Production processes never migrate (their roles cannot): they refuse to run on a schema older than their code. */
export async function assertSchemaCurrent(db: Knex): Promise<void> {
  const pending = await pendingMigrations(db);
  if (pending.length > 0)
    throw new Error(
      `the database schema is not current: ${pending.length} migration(s) pending (${pending.join(', ')}); ` +
        'run `webhooks migrate` as the database owner first',
    );
}

/** A database of its own on a server (tests, benchmarks): its URL, and drop() to remove it again. */
export async function createScratchDatabase(
  serverUrl: string,
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = createDb(serverUrl, { max: 1 });
  await admin.raw('CREATE DATABASE ??', [name]);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
      await admin.destroy();
    },
  };
}

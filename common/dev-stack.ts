import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import type { Config } from './config';
import type { Logger } from './logger';
import { loadEmbeddedPostgres, startEmbeddedPostgres, type RunningPostgres } from './embedded-postgres';
import { readOrCreateDevSecret } from './secrets';
import { SEARCH_ATTRIBUTE_KEYS } from '../workflows/search-attributes';
import { temporalCliPath } from './temporal-binaries';

/** The application database the embedded PostgreSQL serves. */
export const DEV_DATABASE_NAME = 'webhooks';
/** Search attributes operators filter deliveries by (set by the workflow, registered on every Temporal we start). */
export const OPERATOR_SEARCH_ATTRIBUTES = SEARCH_ATTRIBUTE_KEYS.map((key) => key.name);

const DEFAULT_POSTGRES_PORT = 5433;
const DEFAULT_TEMPORAL_PORT = 7233;
const JWT_SECRET_FILE = 'jwt-secret';
const READY_TIMEOUT_MS = 60_000;
const TEMPORAL_STOP_GRACE_MS = 15_000;

export interface DevStackOptions {
  config: Config;
  logger: Logger;
  /** Where DEV_POSTGRES_PORT, DEV_TEMPORAL_PORT, DEV_TEMPORAL_UI_PORT and TEMPORAL_CLI_PATH are read; process.env by default. */
  env?: NodeJS.ProcessEnv;
}

/** Settings the stack provides; only those it supplied itself are present, so callers can merge them over the environment. */
export interface DevStackEnv {
  DATABASE_URL?: string;
  TEMPORAL_ADDRESS?: string;
  JWT_SECRET?: string;
}

export interface DevStack {
  env: DevStackEnv;
  /** Web UI of the Temporal dev server this stack started; undefined when TEMPORAL_ADDRESS was configured. */
  uiUrl?: string;
  /** Process ids of what it started (for diagnostics and tests). */
  pids: { postgres?: number; temporal?: number };
  /** Stops everything it started: Temporal (SIGTERM, wait for exit) and PostgreSQL. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * The development JWT secret: JWT_SECRET when set; otherwise, outside production and without JWT_JWKS_URI, the one
 * kept in DATA_DIR (created on first use), so `npm start` and the CLI's `token` command agree.
 */
export function devJwtSecret(
  config: Pick<Config, 'JWT_SECRET' | 'JWT_JWKS_URI' | 'NODE_ENV' | 'DATA_DIR'>,
): string | undefined {
  if (config.JWT_SECRET) return config.JWT_SECRET;
  if (config.JWT_JWKS_URI || config.NODE_ENV === 'production') return undefined;
  return readOrCreateDevSecret(config.DATA_DIR, JWT_SECRET_FILE, () => randomBytes(32).toString('hex')).value;
}

/** The database URL `npm start` serves when DATABASE_URL is unset, so the CLI can reach it from another terminal. */
export function devDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  return `postgres://postgres:postgres@127.0.0.1:${port(env, 'DEV_POSTGRES_PORT', DEFAULT_POSTGRES_PORT)}/${DEV_DATABASE_NAME}`;
}

/**
 * What `npm start` runs before the API and the worker when nothing is configured: an embedded PostgreSQL under
 * DATA_DIR/postgres and a Temporal dev server persisting to DATA_DIR/temporal.db. Whatever is configured is used instead.
 */
export async function startDevStack({ config, logger, env = process.env }: DevStackOptions): Promise<DevStack> {
  const dataDir = resolve(config.DATA_DIR);
  const needsPostgres = !config.DATABASE_URL;
  const needsTemporal = !config.TEMPORAL_ADDRESS;
  if (config.NODE_ENV === 'production' && (needsPostgres || needsTemporal)) {
    throw new Error(
      `NODE_ENV=production: refusing to start an embedded ${needsPostgres ? 'PostgreSQL' : 'Temporal'}; set ${
        needsPostgres ? 'DATABASE_URL' : 'TEMPORAL_ADDRESS'
      } (or use npm run start:api / start:worker)`,
    );
  }
  mkdirSync(dataDir, { recursive: true });
  if (needsPostgres) await releaseSignalsFromEmbeddedPostgres();

  const stack: DevStack = { env: {}, pids: {}, stop: () => Promise.resolve() };
  const [postgres, temporal] = await Promise.allSettled([
    needsPostgres ? startPostgres(dataDir, port(env, 'DEV_POSTGRES_PORT', DEFAULT_POSTGRES_PORT), logger) : undefined,
    needsTemporal ? startTemporal(dataDir, config, env, logger) : undefined,
  ]);
  const running = [postgres, temporal].flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
  const guard = running.length > 0 ? startOrphanGuard(running.flatMap((part) => part.orphanTargets())) : undefined;
  let stopping: Promise<void> | undefined;
  stack.stop = () =>
    (stopping ??= (async () => {
      guard?.dismiss();
      // Temporal first: it keeps nothing in Postgres, but anything still polling it should see it go before the database.
      for (const part of [...running].reverse()) await part.stop();
    })());

  const failure = [postgres, temporal].find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) {
    await stack.stop();
    throw failure.reason;
  }
  if (postgres.status === 'fulfilled' && postgres.value) {
    stack.env.DATABASE_URL = postgres.value.url;
    stack.pids.postgres = postgres.value.pid;
  }
  if (temporal.status === 'fulfilled' && temporal.value) {
    stack.env.TEMPORAL_ADDRESS = temporal.value.address;
    stack.uiUrl = temporal.value.uiUrl;
    stack.pids.temporal = temporal.value.pid;
  }
  const jwtSecret = config.JWT_SECRET ? undefined : devJwtSecret(config);
  if (jwtSecret) {
    stack.env.JWT_SECRET = jwtSecret;
    logger.warn(
      { file: join(dataDir, JWT_SECRET_FILE) },
      'JWT_SECRET is not set: using a development secret from the data folder',
    );
  }
  return stack;
}

/**
 * Importing embedded-postgres installs async-exit-hook handlers that, on SIGINT/SIGTERM/SIGHUP, stop PostgreSQL and
 * call process.exit() at once: that would cut the worker's drain short. The process that runs the stack owns its
 * signals instead (and calls stop()); a hard exit is still covered by the 'exit' handler and the orphan guard.
 * Only the handlers this import adds are removed, so a handler installed by anyone else stays.
 */
async function releaseSignalsFromEmbeddedPostgres(): Promise<void> {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const before = new Map(signals.map((signal) => [signal, new Set(process.listeners(signal))]));
  await loadEmbeddedPostgres();
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
}

interface RunningPart {
  pid: number | undefined;
  /** Processes to signal if this Node process dies without running stop(). */
  orphanTargets(): Array<{ pid: number; signal: NodeJS.Signals }>;
  stop(): Promise<void>;
}

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 65535)
    throw new Error(`${name} must be a TCP port (1-65535), got ${text}`);
  return value;
}

async function startPostgres(dataDir: string, pgPort: number, logger: Logger): Promise<RunningPart & { url: string }> {
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
        `(port taken? set DEV_POSTGRES_PORT, or DATABASE_URL to use your own server)\n${recent.text()}`,
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

async function assertPortFree(portNumber: number, portVariable: string, useOwnVariable: string): Promise<void> {
  const problem = await new Promise<string | undefined>((done) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
    probe.listen(portNumber, '127.0.0.1', () => probe.close(() => done(undefined)));
  });
  if (problem)
    throw new Error(
      `port 127.0.0.1:${portNumber} is not available (${problem}): another instance running? ` +
        `Set ${portVariable} to another port, or ${useOwnVariable} to use a server you run yourself`,
    );
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

/** WAL lets the UI and CLI read while the server writes; synchronous=normal is safe with WAL and much faster. */
export const DEV_SERVER_SQLITE_PRAGMAS = ['journal_mode=wal', 'synchronous=normal'];

/** Flags for persistence and UI, shared by the CLI we spawn and the SDK-downloaded fallback. */
function persistenceFlags(dataDir: string): string[] {
  return [
    '--db-filename',
    join(dataDir, 'temporal.db'),
    ...DEV_SERVER_SQLITE_PRAGMAS.flatMap((pragma) => ['--sqlite-pragma', pragma]),
    '--ui-disable-news-fetch',
  ];
}

function devServerArgs(dataDir: string, config: Config, grpcPort: number, uiPort: number): string[] {
  return [
    'server',
    'start-dev',
    ...persistenceFlags(dataDir),
    '--ip',
    '127.0.0.1',
    '--port',
    String(grpcPort),
    '--ui-port',
    String(uiPort),
    ...OPERATOR_SEARCH_ATTRIBUTES.flatMap((name) => ['--search-attribute', `${name}=Keyword`]),
    ...(config.TEMPORAL_NAMESPACE === 'default' ? [] : ['--namespace', config.TEMPORAL_NAMESPACE]),
    '--log-level',
    'error',
  ];
}

async function startTemporal(
  dataDir: string,
  config: Config,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<RunningPart & { address: string; uiUrl: string }> {
  const grpcPort = port(env, 'DEV_TEMPORAL_PORT', DEFAULT_TEMPORAL_PORT);
  const uiPort = port(env, 'DEV_TEMPORAL_UI_PORT', grpcPort + 1000);
  const address = `127.0.0.1:${grpcPort}`;
  const uiUrl = `http://127.0.0.1:${uiPort}`;
  // Checked first: otherwise a Temporal already listening there could answer the readiness probe for us.
  await assertPortFree(grpcPort, 'DEV_TEMPORAL_PORT', 'TEMPORAL_ADDRESS');
  await assertPortFree(uiPort, 'DEV_TEMPORAL_UI_PORT', 'TEMPORAL_ADDRESS');
  const cli = temporalCliPath(env);
  if (!cli) return startTemporalFromSdkDownload(dataDir, config, grpcPort, uiPort, logger);

  const recent = new RecentLines();
  // Own process group: a terminal's Ctrl-C reaches only Node, which drains the worker before stopping Temporal.
  const child = spawn(cli, devServerArgs(dataDir, config, grpcPort, uiPort), {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => recent.push(chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    recent.push(text);
    logger.debug({ temporal: text.trim() }, 'temporal dev server output');
  });
  const exited = new Promise<string>((done) => {
    child.once('error', (error) =>
      done(`could not run ${cli}: ${error.message} (set TEMPORAL_CLI_PATH to the temporal CLI)`),
    );
    child.once('exit', (code, signal) => done(`exited with ${signal ?? `code ${code}`}`));
  });
  const killOnExit = () => signalProcess(child.pid, 'SIGTERM');
  process.once('exit', killOnExit);
  const part: RunningPart = {
    pid: child.pid,
    orphanTargets: () => (child.pid ? [{ pid: child.pid, signal: 'SIGTERM' }] : []),
    stop: async () => {
      process.removeListener('exit', killOnExit);
      await stopChild(child, exited);
    },
  };

  try {
    await waitForTemporal(address, config.TEMPORAL_NAMESPACE, exited);
  } catch (error) {
    await part.stop();
    throw new Error(
      `Temporal dev server (${cli}) did not become ready on ${address}: ${(error as Error).message} ` +
        `(port taken? set DEV_TEMPORAL_PORT / DEV_TEMPORAL_UI_PORT, or TEMPORAL_ADDRESS to use your own server)\n${recent.text()}`,
      { cause: error },
    );
  }
  logger.info({ address, uiUrl, db: join(dataDir, 'temporal.db'), childPid: child.pid }, 'Temporal dev server started');
  return { ...part, address, uiUrl };
}

/** Without a local temporal CLI: let the SDK download one (needs internet) and run it through its ephemeral server. */
async function startTemporalFromSdkDownload(
  dataDir: string,
  config: Config,
  grpcPort: number,
  uiPort: number,
  logger: Logger,
): Promise<RunningPart & { address: string; uiUrl: string }> {
  let testing: typeof import('@temporalio/testing');
  try {
    testing = await import('@temporalio/testing');
  } catch {
    throw new Error('No temporal CLI found: set TEMPORAL_CLI_PATH to the temporal executable (or put it on PATH)');
  }
  logger.warn('No temporal CLI found (TEMPORAL_CLI_PATH, PATH): downloading it through the Temporal SDK');
  const environment = await testing.TestWorkflowEnvironment.createLocal({
    server: {
      // Cached under DATA_DIR so later starts work offline.
      executable: { type: 'cached-download', downloadDir: join(dataDir, 'bin'), ttl: '365d' },
      ip: '127.0.0.1',
      port: grpcPort,
      ui: true,
      uiPort,
      namespace: config.TEMPORAL_NAMESPACE,
      searchAttributes: SEARCH_ATTRIBUTE_KEYS,
      log: { format: 'pretty', level: 'error' },
      extraArgs: persistenceFlags(dataDir),
    },
  });
  return {
    pid: undefined,
    orphanTargets: () => [],
    stop: () => environment.teardown(),
    address: `127.0.0.1:${grpcPort}`,
    uiUrl: `http://127.0.0.1:${uiPort}`,
  };
}

/** Ready means: it answers gRPC and our search attributes are registered in the namespace. */
async function waitForTemporal(address: string, namespace: string, exited: Promise<string>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let dead: string | undefined;
  void exited.then((reason) => (dead = reason));
  let lastError = 'no answer';
  while (Date.now() < deadline) {
    if (dead) throw new Error(dead);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
        const missing = OPERATOR_SEARCH_ATTRIBUTES.filter((name) => !(name in customAttributes));
        if (missing.length === 0) return;
        lastError = `search attributes not registered yet: ${missing.join(', ')}`;
      } finally {
        await connection.close();
      }
    } catch (error) {
      lastError = (error as Error).message;
    }
    await new Promise((done) => setTimeout(done, 250));
  }
  throw new Error(`timed out after ${READY_TIMEOUT_MS} ms (${lastError})`);
}

async function stopChild(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
  signalProcess(child.pid, 'SIGTERM');
  const timer = setTimeout(() => signalProcess(child.pid, 'SIGKILL'), TEMPORAL_STOP_GRACE_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves when the process is gone (or a zombie), or after timeoutMs. */
async function untilGone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((done) => setTimeout(done, 100));
}

/** True while the process runs; a zombie (exited, not yet reaped) counts as gone. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

function signalProcess(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/**
 * A tiny sidecar that outlives a hard kill of this process (SIGKILL, OOM): when our end of its stdin pipe closes
 * without dismiss(), it signals the children, waits, then SIGKILLs survivors. Its own process group and ignored
 * signals keep a terminal's Ctrl-C from taking it down before it has done its job.
 */
function startOrphanGuard(targets: Array<{ pid: number; signal: NodeJS.Signals }>): { dismiss(): void } {
  const script = `
    const targets = ${JSON.stringify(targets)};
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {});
    const fs = require('node:fs');
    // A zombie (exited, not yet reaped by its new parent) counts as gone.
    const alive = (pid) => {
      try {
        const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
        return stat[stat.lastIndexOf(')') + 2] !== 'Z';
      } catch {
        try { process.kill(pid, 0); return true; } catch { return false; }
      }
    };
    process.stdin.resume();
    process.stdin.on('end', () => {
      for (const t of targets) { try { process.kill(t.pid, t.signal); } catch {} }
      const deadline = Date.now() + ${TEMPORAL_STOP_GRACE_MS};
      setInterval(() => {
        const left = targets.filter((t) => alive(t.pid));
        if (left.length === 0 || Date.now() > deadline) {
          for (const t of left) { try { process.kill(t.pid, 'SIGKILL'); } catch {} }
          process.exit(0);
        }
      }, 200);
    });`;
  const guard = spawn(process.execPath, ['-e', script], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  guard.unref();
  // The pipe must not keep this process alive; it only has to close when this process dies.
  (guard.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return { dismiss: () => signalProcess(guard.pid, 'SIGKILL') };
}

/** The last lines a child printed, for error messages. */
class RecentLines {
  private lines: string[] = [];
  push(text: string): void {
    this.lines.push(...text.split('\n').filter((line) => line.trim() !== ''));
    if (this.lines.length > 30) this.lines.splice(0, this.lines.length - 30);
  }
  text(): string {
    return this.lines.join('\n');
  }
}

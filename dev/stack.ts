// What `npm start` runs when nothing is configured: embedded PostgreSQL, a Temporal dev server, a development
// JWT secret. Development tooling only: production sets DATABASE_URL and TEMPORAL_ADDRESS.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isDevelopment, loadConfig, type Config } from '../common/config';
import type { Logger } from '../common/telemetry/logger';
import { readOrCreateDevSecret } from '../common/crypto/secrets';
import { DEV_DATABASE_NAME, loadEmbeddedPostgres, startDevPostgres } from './postgres';
import { startOrphanGuard, withoutNewSignalHandlers } from './processes';
import { startTemporal } from './temporal-dev-server';
import { recordRunningStack } from './running-stack';

export { DEV_DATABASE_NAME } from './postgres';
export { isAlive } from './processes';
export { readRunningStack } from './running-stack';
export { DEV_SERVER_SQLITE_PRAGMAS, OPERATOR_SEARCH_ATTRIBUTES } from './temporal-dev-server';

const JWT_SECRET_FILE = 'jwt-secret';

export interface DevStackOptions {
  config: Config;
  logger: Logger;
  /** Where DEV_POSTGRES_PORT, DEV_TEMPORAL_PORT, DEV_TEMPORAL_UI_PORT and TEMPORAL_CLI_PATH are read (validated by
   *  loadConfig); process.env by default. */
  env?: NodeJS.ProcessEnv;
  /** The API's codec endpoint the dev server's Web UI decodes payloads through (`npm start` passes its own). */
  uiCodecEndpoint?: string;
}

/** Settings the stack provides; only those it supplied itself are present, so callers can merge them over the environment. */
export interface DevStackEnv {
  DATABASE_URL?: string;
  TEMPORAL_ADDRESS?: string;
  JWT_SECRET?: string;
  /** The configured origins and the embedded Web UI's, which calls the codec endpoint from the browser. */
  CODEC_CORS_ORIGINS?: string;
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
  if (config.JWT_JWKS_URI || !isDevelopment(config)) return undefined;
  return readOrCreateDevSecret(config.DATA_DIR, JWT_SECRET_FILE, () => randomBytes(32).toString('hex')).value;
}

/** The database URL `npm start` serves when DATABASE_URL is unset, so the CLI can reach it from another terminal. */
export function devDatabaseUrl(config: Pick<Config, 'DEV_POSTGRES_PORT'>): string {
  return `postgres://postgres:postgres@127.0.0.1:${config.DEV_POSTGRES_PORT}/${DEV_DATABASE_NAME}`;
}

/**
 * What `npm start` runs before the API and the worker when nothing is configured: an embedded PostgreSQL under
 * DATA_DIR/postgres and a Temporal dev server persisting to DATA_DIR/temporal.db. Whatever is configured is used instead.
 */
export async function startDevStack({
  config,
  logger,
  env = process.env,
  uiCodecEndpoint,
}: DevStackOptions): Promise<DevStack> {
  const dataDir = resolve(config.DATA_DIR);
  const dev = { ...config, ...pickDevSettings(loadConfig(env)) };
  const needsPostgres = !config.DATABASE_URL;
  const needsTemporal = !config.TEMPORAL_ADDRESS;
  if (!isDevelopment(config) && (needsPostgres || needsTemporal)) {
    throw new Error(
      `NODE_ENV=${config.NODE_ENV}: refusing to start an embedded ${needsPostgres ? 'PostgreSQL' : 'Temporal'}; set ${
        needsPostgres ? 'DATABASE_URL' : 'TEMPORAL_ADDRESS'
      } (or use npm run start:api / start:worker)`,
    );
  }
  mkdirSync(dataDir, { recursive: true });
  if (needsPostgres) await withoutNewSignalHandlers(loadEmbeddedPostgres);

  const stack: DevStack = { env: {}, pids: {}, stop: () => Promise.resolve() };
  const [postgres, temporal] = await Promise.allSettled([
    needsPostgres ? startDevPostgres(dataDir, dev.DEV_POSTGRES_PORT, logger) : undefined,
    needsTemporal ? startTemporal(dataDir, dev, logger, uiCodecEndpoint) : undefined,
  ]);
  const running = [postgres, temporal].flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
  const guard = running.length > 0 ? startOrphanGuard(running.flatMap((part) => part.orphanTargets())) : undefined;
  let stopping: Promise<void> | undefined;
  let forgetRecord: (() => void) | undefined;
  stack.stop = () =>
    (stopping ??= (async () => {
      forgetRecord?.();
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
    const ui = new URL(temporal.value.uiUrl);
    stack.env.CODEC_CORS_ORIGINS = [config.CODEC_CORS_ORIGINS, ui.origin, `http://localhost:${ui.port}`]
      .filter(Boolean)
      .join(',');
  }
  // The CLI in another terminal finds these addresses even when DEV_*_PORT moved them.
  if (running.length > 0) {
    try {
      forgetRecord = recordRunningStack(dataDir, {
        DATABASE_URL: stack.env.DATABASE_URL,
        TEMPORAL_ADDRESS: stack.env.TEMPORAL_ADDRESS,
      });
    } catch (error) {
      logger.warn({ err: error }, 'could not record the stack in DATA_DIR: the CLI will not find moved ports');
    }
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

const pickDevSettings = (config: Config) => ({
  DEV_POSTGRES_PORT: config.DEV_POSTGRES_PORT,
  DEV_TEMPORAL_PORT: config.DEV_TEMPORAL_PORT,
  DEV_TEMPORAL_UI_PORT: config.DEV_TEMPORAL_UI_PORT,
  TEMPORAL_CLI_PATH: config.TEMPORAL_CLI_PATH,
});

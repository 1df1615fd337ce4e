import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import { migrationSource } from './migrations';

export type Db = Knex | Knex.Transaction;

export function createDb(connectionString: string, pool: { min?: number; max?: number } = {}): Knex {
  return knex({ client: 'pg', connection: connectionString, pool: { min: pool.min ?? 0, max: pool.max ?? 10 } });
}

/** Applies pending migrations; Knex's migration lock makes concurrent start-ups safe. */
export async function migrateToLatest(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
  return applied;
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

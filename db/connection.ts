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

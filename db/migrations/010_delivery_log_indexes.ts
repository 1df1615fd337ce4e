import type { Knex } from 'knex';

/**
 * Every filter of the delivery log read in the list's order (newest first, then id), so a page reads its rows and no
 * more whatever the project holds: status, type, and both together, each followed by the cursor's columns (the
 * creation-time window and the cursor ride on them; no filter uses the index of migration 003). A delivery's attempts
 * are read in `seq` order, a page at a time, and the list asks each row for its last attempt.
 *
 * Built in the migration's transaction, which blocks writes to the table while it runs (seconds per index at a few
 * million rows). On a larger log an operator may build them first with CREATE INDEX CONCURRENTLY under these names:
 * the migration then finds them and builds nothing.
 */
const INDEXES = [
  ['deliveries_project_status_created_id', 'deliveries (project_id, status, created_at, id)'],
  ['deliveries_project_type_created_id', 'deliveries (project_id, type, created_at, id)'],
  ['deliveries_project_status_type_created_id', 'deliveries (project_id, status, type, created_at, id)'],
  ['delivery_attempts_delivery_seq', 'delivery_attempts (delivery_id, seq)'],
] as const;

export async function up(knex: Knex): Promise<void> {
  for (const [name, on] of INDEXES) await knex.raw(`CREATE INDEX IF NOT EXISTS ${name} ON ${on}`);
}

export async function down(knex: Knex): Promise<void> {
  for (const [name] of INDEXES) await knex.raw(`DROP INDEX IF EXISTS ${name}`);
}

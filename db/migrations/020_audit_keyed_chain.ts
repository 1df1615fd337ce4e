import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * Keyed audit chains, one per project (and one for the delivery path's rows of each project, one for rows of no
 * project), each ordered by a lock on its own head row instead of one lock for every project (see db/audit/events.ts).
 * Rows written before this migration become the chain `legacy`, in id order, still verified as the unkeyed audit-v1
 * chain they are; the keyed chains start here. `audit_trail` holds the id digests and journals name; `audit_digests`
 * the hash of every digest written (the digests themselves live outside the database: AUDIT_DIGEST_DIR).
 * The application role needs, besides SELECT and INSERT on audit_events:
 *   GRANT SELECT, INSERT, UPDATE ON audit_chain_heads TO webhooks_app;
 *   GRANT SELECT ON audit_trail TO webhooks_app;
 *   GRANT SELECT, INSERT ON audit_digests TO webhooks_app;
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_events', (t) => {
    t.text('chain');
    t.bigInteger('seq');
    t.text('key_id');
  });
  await knex.raw(
    `UPDATE audit_events SET chain = 'legacy', seq = numbered.n
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM audit_events) AS numbered
      WHERE numbered.id = audit_events.id`,
  );
  await knex.raw('ALTER TABLE audit_events ALTER COLUMN chain SET NOT NULL, ALTER COLUMN seq SET NOT NULL');
  await knex.raw('CREATE UNIQUE INDEX audit_events_chain_seq ON audit_events (chain, seq)');
  await knex.schema.createTable('audit_chain_heads', (t) => {
    t.text('chain').primary();
    t.bigInteger('seq').notNullable();
    t.text('hash').notNullable();
    t.bigInteger('row_id');
  });
  await knex.schema.createTable('audit_trail', (t) => {
    t.text('id').primary();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex('audit_trail').insert({ id: randomUUID() });
  await knex.schema.createTable('audit_digests', (t) => {
    t.integer('sequence').primary();
    t.text('hash').notNullable();
    t.text('reason').notNullable();
    t.timestamp('written_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('REVOKE UPDATE, DELETE, TRUNCATE ON audit_trail, audit_digests FROM PUBLIC');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_digests');
  await knex.schema.dropTable('audit_trail');
  await knex.schema.dropTable('audit_chain_heads');
  await knex.raw('DROP INDEX audit_events_chain_seq');
  await knex.schema.alterTable('audit_events', (t) => {
    t.dropColumn('chain');
    t.dropColumn('seq');
    t.dropColumn('key_id');
  });
}

import type { Knex } from 'knex';

/**
 * A registration's custom headers (sent on every delivery): their names in the clear, which the API shows, and the
 * name/value pairs sealed like the signing secret (AES-256-GCM, bound to the row), which only the worker opens.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.specificType('custom_header_names', 'text[]').notNullable().defaultTo('{}');
    t.text('custom_headers_sealed');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropColumn('custom_headers_sealed');
    t.dropColumn('custom_header_names');
  });
}

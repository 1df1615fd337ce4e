import type { Knex } from 'knex';

/**
 * The person a delivery was for, as the keyed hash of the event's userUUID (PERSON_HASH_KEY, which the database never
 * holds; never the id itself): an erasure finds one person's deliveries by it. Null in rows from before it, in TEST
 * deliveries (they name no person) and where the worker has no key.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deliveries', (t) => {
    t.text('person_hash');
  });
  await knex.raw(
    'CREATE INDEX IF NOT EXISTS deliveries_person_hash ON deliveries (person_hash) WHERE person_hash IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS deliveries_person_hash');
  await knex.schema.alterTable('deliveries', (t) => t.dropColumn('person_hash'));
}

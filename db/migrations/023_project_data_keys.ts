import type { Knex } from 'knex';

/**
 * Each project's data key: the key its Temporal payloads are sealed under (envelope encryption in the payload codec),
 * kept here only wrapped by the payload key ring (PAYLOAD_ENCRYPTION_KEYS, which the database never holds). A purge
 * destroys it: the wrapped bytes are cleared and the row stays as a tombstone, so the codec can name the destroyed key
 * when a copy of a history sealed under it turns up. One live key per project.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('project_data_keys', (t) => {
    t.text('id').primary();
    t.text('project_id').notNullable();
    // nonce ‖ ciphertext ‖ tag of AES-256-GCM under the ring key `wrapping_key_id`; null once destroyed.
    t.binary('wrapped');
    t.text('wrapping_key_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('destroyed_at', { useTz: true });
  });
  await knex.raw(
    `ALTER TABLE project_data_keys ADD CONSTRAINT project_data_keys_destroyed
       CHECK ((destroyed_at IS NULL) = (wrapped IS NOT NULL AND wrapping_key_id IS NOT NULL))`,
  );
  await knex.raw(
    'CREATE UNIQUE INDEX project_data_keys_live ON project_data_keys (project_id) WHERE destroyed_at IS NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('project_data_keys');
}

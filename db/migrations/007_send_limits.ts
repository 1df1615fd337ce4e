import type { Knex } from 'knex';

/**
 * Per-project send limits, shared by every API process: the sends of the sliding window (`sent_at`, pruned on each
 * admission) and the one in-flight slot (`lease_holder` until `lease_until`; a process that dies holding it lets go
 * when the lease ends). One row per project and kind: `test` (the test endpoint and TEST redeliveries),
 * `redeliver`, `recover`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_send_limits', (t) => {
    t.text('project_id').notNullable().references('projects.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.specificType('sent_at', 'timestamptz[]').notNullable().defaultTo('{}');
    t.uuid('lease_holder');
    t.timestamp('lease_until', { useTz: true });
    t.primary(['project_id', 'kind']);
  });
  await knex.raw(
    `ALTER TABLE webhook_send_limits ADD CONSTRAINT webhook_send_limits_kind CHECK (kind IN ('test', 'redeliver', 'recover'))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_send_limits');
}

import type { Knex } from 'knex';

/**
 * A rate per registration: the most deliveries a second its receiver takes (`rate_limit_per_second`, null: unlimited),
 * and the next free slot of each limited registration (`webhook_rate_limits.next_at`), taken by every worker's attempts
 * with one UPDATE on the database's clock. Deliveries beyond the rate wait as the breaker resumer's waiters.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.integer('rate_limit_per_second');
  });
  await knex.raw(
    `ALTER TABLE webhook_registrations ADD CONSTRAINT webhook_registrations_rate_limit
       CHECK (rate_limit_per_second IS NULL OR rate_limit_per_second BETWEEN 1 AND 1000)`,
  );
  await knex.schema.createTable('webhook_rate_limits', (t) => {
    t.uuid('registration_id').primary().references('webhook_registrations.id').onDelete('CASCADE');
    // When the next delivery may be sent: slots are spaced evenly, so no second holds more than the rate.
    t.timestamp('next_at', { useTz: true }).notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_rate_limits');
  await knex.raw('ALTER TABLE webhook_registrations DROP CONSTRAINT webhook_registrations_rate_limit');
  await knex.schema.alterTable('webhook_registrations', (t) => t.dropColumn('rate_limit_per_second'));
}

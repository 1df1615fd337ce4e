import type { Knex } from 'knex';

/**
 * Deliveries waiting for a registration's open circuit breaker. They wait on a durable timer that is long by design,
 * and the worker's resumer wakes them with a signal: one to probe once the open period is over, all of them (at a
 * bounded rate) once the breaker has closed. A waiting delivery costs the engine nothing while the receiver is down.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_breaker_waiters', (t) => {
    t.uuid('registration_id').notNullable().references('webhook_registrations.id').onDelete('CASCADE');
    t.text('workflow_id').notNullable();
    // The workflow's count of its waits: the signal names it, so a late signal never ends a later wait.
    t.integer('wait_token').notNullable();
    t.timestamp('since', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['registration_id', 'workflow_id']);
    t.index(['registration_id', 'since']);
  });
  await knex.schema.alterTable('webhook_circuit_breakers', (t) => {
    // When the resumer last woke a waiter to probe the half-open breaker: one probe at a time, even before it starts.
    t.timestamp('probe_woken_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_circuit_breakers', (t) => t.dropColumn('probe_woken_at'));
  await knex.schema.dropTable('webhook_breaker_waiters');
}

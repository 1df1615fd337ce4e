import type { Knex } from 'knex';

/**
 * Waiters that wait for an endpoint's attempts in flight, the resumer's hold on the waiters it wakes, and each
 * breaker's latest round of wakes:
 * - `eligible_at`: a delivery refused because the endpoint's attempts in flight make no progress is listed too, to be
 *   woken no sooner than those attempts have ended (by then the breaker has opened if they failed, and it waits on);
 * - `woken_at`: a waiter is deleted only once its signal went through, so one taken by a resumer that dies before
 *   signalling is taken again after a lease, not left to the workflow's long safety timer;
 * - `resumed_at`: one round of wakes per registration per second, whichever worker's resumer takes it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_breaker_waiters', (t) => {
    t.timestamp('eligible_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('woken_at', { useTz: true });
  });
  await knex.schema.alterTable('webhook_circuit_breakers', (t) => {
    t.timestamp('resumed_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_circuit_breakers', (t) => t.dropColumn('resumed_at'));
  await knex.schema.alterTable('webhook_breaker_waiters', (t) => {
    t.dropColumn('woken_at');
    t.dropColumn('eligible_at');
  });
}

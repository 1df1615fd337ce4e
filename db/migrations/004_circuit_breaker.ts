import type { Knex } from 'knex';

/** One circuit breaker per registration: consecutive failures, open until, and the lease of its single probe. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_circuit_breakers', (t) => {
    t.uuid('registration_id').primary().references('webhook_registrations.id').onDelete('CASCADE');
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    // Set while open (future) and half-open (past); null while closed.
    t.timestamp('open_until', { useTz: true });
    // Held by the one probe allowed while half-open; expires so a crashed worker cannot hold it forever.
    t.timestamp('probe_until', { useTz: true });
    // How many times it opened in a row without closing: each reopening doubles the open period, up to a cap.
    t.integer('consecutive_opens').notNullable().defaultTo(0);
    // What the receiver last did wrong (status or error, never a body), for a delivery that gives up while it is open.
    t.text('last_failure');
    t.integer('last_status_code');
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_circuit_breakers');
}

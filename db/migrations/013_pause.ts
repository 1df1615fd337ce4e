import type { Knex } from 'knex';

/**
 * A pause that holds a registration's deliveries: while `paused_until` is ahead, no attempt is made;
 * each delivery is listed as a waiter of the breaker resumer, eligible when the pause ends (`paused_until`, or at once
 * on resume). Waiters carry their event's priority key so the resumer wakes falls before vitals, oldest first.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.timestamp('paused_at', { useTz: true });
    t.timestamp('paused_until', { useTz: true });
  });
  // The worker's sweep of pauses that ended by themselves reads only the paused rows.
  await knex.raw(
    'CREATE INDEX webhook_registrations_paused_until ON webhook_registrations (paused_until) WHERE paused_until IS NOT NULL',
  );
  await knex.schema.alterTable('webhook_breaker_waiters', (t) => {
    // Temporal's priority key of the event (1 fall, 3 vital, 5 test): rows from before sort as vitals.
    t.smallint('priority').notNullable().defaultTo(3);
    t.index(['registration_id', 'priority', 'since']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_breaker_waiters', (t) => {
    t.dropIndex(['registration_id', 'priority', 'since']);
    t.dropColumn('priority');
  });
  await knex.raw('DROP INDEX IF EXISTS webhook_registrations_paused_until');
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropColumn('paused_until');
    t.dropColumn('paused_at');
  });
}

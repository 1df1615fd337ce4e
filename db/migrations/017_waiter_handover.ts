import type { Knex } from 'knex';

/**
 * Waiters that hand over: a woken fall to the less urgent waiters of its registration, and a deleted registration's
 * waiters to the project's next registration.
 * - `signalled_at`: a woken waiter more urgent than others of its registration stays listed, signalled, until its
 *   attempt has ended, so the resumer wakes the less urgent ones only after it (falls reach the receiver first);
 * - `webhook_unregistered_waiters`: the waiters of a registration deleted while they wait (held by its pause, or by its
 *   breaker), kept by project and woken when the project registers again, instead of by their workflow's safety timer.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_breaker_waiters', (t) => {
    t.timestamp('signalled_at', { useTz: true });
  });
  // The resumer's sweep of signalled waiters whose attempt never ended reads only those.
  await knex.raw(
    'CREATE INDEX webhook_breaker_waiters_signalled_at ON webhook_breaker_waiters (signalled_at) WHERE signalled_at IS NOT NULL',
  );
  await knex.schema.createTable('webhook_unregistered_waiters', (t) => {
    t.text('project_id').notNullable().references('projects.id').onDelete('CASCADE');
    t.text('workflow_id').notNullable();
    t.integer('wait_token').notNullable();
    t.smallint('priority').notNullable().defaultTo(3);
    t.timestamp('since', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['project_id', 'workflow_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_unregistered_waiters');
  await knex.raw('DROP INDEX IF EXISTS webhook_breaker_waiters_signalled_at');
  await knex.schema.alterTable('webhook_breaker_waiters', (t) => t.dropColumn('signalled_at'));
}

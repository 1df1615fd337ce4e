import type { Knex } from 'knex';

/** The secret a rotation replaced, sealed like the current one, and when it stops signing deliveries. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.text('previous_secret_sealed');
    t.timestamp('previous_secret_expires_at', { useTz: true });
  });
  await knex.raw(
    'ALTER TABLE webhook_registrations ADD CONSTRAINT previous_secret_with_expiry CHECK ' +
      '((previous_secret_sealed IS NULL) = (previous_secret_expires_at IS NULL))',
  );
  // The sweep that erases expired previous secrets finds them without a full scan.
  await knex.raw(
    'CREATE INDEX webhook_registrations_previous_secret_expiry ON webhook_registrations (previous_secret_expires_at) ' +
      'WHERE previous_secret_expires_at IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropIndex([], 'webhook_registrations_previous_secret_expiry');
    t.dropChecks('previous_secret_with_expiry');
    t.dropColumn('previous_secret_sealed');
    t.dropColumn('previous_secret_expires_at');
  });
}

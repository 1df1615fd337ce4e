import type { Knex } from 'knex';

/**
 * Why a registration's deliveries are held, and how long its receiver asked to be left alone.
 * `pause_reason` 'gone': the receiver answered 410 Gone; the hold has no end of its own (`paused_until` NULL, `paused_at`
 * when the 410 came) and lasts until a member resumes. NULL: a member's (or a manage link's) pause, as before.
 * `slowed_until`: the receiver answered 429, 502, 503 or 504; until then no delivery of the registration is attempted
 * (they wait listed for the breaker resumer), `slowed_status_code` the status that asked for it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.text('pause_reason');
    t.timestamp('slowed_until', { useTz: true });
    t.smallint('slowed_status_code');
  });
  await knex.raw(
    `ALTER TABLE webhook_registrations ADD CONSTRAINT webhook_registrations_pause_reason
       CHECK (pause_reason IS NULL OR (pause_reason = 'gone' AND paused_at IS NOT NULL AND paused_until IS NULL))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE webhook_registrations DROP CONSTRAINT IF EXISTS webhook_registrations_pause_reason');
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropColumn('slowed_status_code');
    t.dropColumn('slowed_until');
    t.dropColumn('pause_reason');
  });
}

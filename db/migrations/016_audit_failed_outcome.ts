import type { Knex } from 'knex';

/**
 * A third outcome in the audit trail: `failed`, an action recorded when it was asked for that then did not happen
 * (a redelivery whose start Temporal refused) or stopped part-way (a recovery, with how many had started).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `ALTER TABLE audit_events
       DROP CONSTRAINT audit_events_outcome,
       ADD CONSTRAINT audit_events_outcome CHECK (outcome IN ('ok', 'refused', 'failed'))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    `ALTER TABLE audit_events
       DROP CONSTRAINT audit_events_outcome,
       ADD CONSTRAINT audit_events_outcome CHECK (outcome IN ('ok', 'refused'))`,
  );
}

import type { Knex } from 'knex';

/**
 * Erasure requests and what each found: the record an operator polls and the certificate of destruction is made of.
 * The person is only their keyed hash (PERSON_HASH_KEY), never the userUUID. Kept after the job's workflow is past
 * Temporal's retention: the evidence that a person's deliveries were erased outlives the histories it erased.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('erasures', (t) => {
    t.text('id').primary();
    t.text('person_hash').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    // Who asked (the audit trail's actor: kind, subject, issuer), as the request's audit row names them.
    t.jsonb('requested_by').notNullable();
    t.timestamp('requested_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('completed_at', { useTz: true });
    t.integer('log_rows_deleted').notNullable().defaultTo(0);
    // The audit rows of the request and of the outcome (audit_events.id), named by the certificate.
    t.text('request_audit_id');
    t.text('outcome_audit_id');
    // Why a failed erasure stopped, in words (never a person's data).
    t.text('failure');
    t.index(['person_hash']);
  });
  await knex.raw(
    `ALTER TABLE erasures ADD CONSTRAINT erasures_status
       CHECK (status IN ('pending', 'waiting-for-open-deliveries', 'completed', 'failed'))`,
  );
  // Each delivery run an erasure found: still open (waited for), deleted from Temporal (confirmed once Temporal no
  // longer describes it), or gone before it looked (past retention).
  await knex.schema.createTable('erasure_executions', (t) => {
    t.text('erasure_id').notNullable().references('erasures.id').onDelete('CASCADE');
    t.text('workflow_id').notNullable();
    // '' when the delivery log named the workflow without its run and Temporal no longer knows it.
    t.text('run_id').notNullable();
    t.text('state').notNullable();
    t.boolean('confirmed').notNullable().defaultTo(false);
    t.timestamp('found_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['erasure_id', 'workflow_id', 'run_id']);
  });
  await knex.raw(
    `ALTER TABLE erasure_executions ADD CONSTRAINT erasure_executions_state CHECK (state IN ('open', 'deleted', 'gone'))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('erasure_executions');
  await knex.schema.dropTable('erasures');
}

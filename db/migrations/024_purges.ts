import type { Knex } from 'knex';

/**
 * Purges of a whole project (a customer whose contract ended): the record an operator polls and the certificate of
 * destruction is made of, with what each step removed so far. Kept after the project and its rows are gone: the
 * evidence that a customer's data was destroyed outlives the data. A purge not completed marks its project as being
 * purged (registrations are refused); at most one such purge per project.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('purges', (t) => {
    t.text('id').primary();
    // No foreign key: the purge deletes the project's row and keeps its own.
    t.text('project_id').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    // The step reached: executions (Temporal), rows (PostgreSQL), data-keys, done.
    t.text('step').notNullable().defaultTo('executions');
    // Who asked (the audit trail's actor: kind, subject, issuer), as the request's audit row names them.
    t.jsonb('requested_by').notNullable();
    t.timestamp('requested_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('completed_at', { useTz: true });
    // What was removed, added to by each step in the transaction that removed it (a step run again adds what is left).
    t.integer('registrations_deleted').notNullable().defaultTo(0);
    t.integer('portal_links_deleted').notNullable().defaultTo(0);
    t.integer('contacts_deleted').notNullable().defaultTo(0);
    t.integer('notices_deleted').notNullable().defaultTo(0);
    t.integer('members_deleted').notNullable().defaultTo(0);
    t.bigInteger('delivery_rows_deleted').notNullable().defaultTo(0);
    t.bigInteger('attempts_deleted').notNullable().defaultTo(0);
    t.bigInteger('executions_deleted').notNullable().defaultTo(0);
    // Temporal's batch deletion jobs: [{ jobId, state, total, deleted, failed, endedAt }], each recorded before it is
    // started. executions_deleted counts the distinct executions found for them (purge_executions).
    t.jsonb('batch_jobs').notNullable().defaultTo('[]');
    // The project's data keys destroyed (their tombstones' ids in project_data_keys).
    t.specificType('data_keys_destroyed', 'text[]').notNullable().defaultTo('{}');
    // The audit rows of the request and of the outcome (audit_events.id), named by the certificate.
    t.text('request_audit_id');
    t.text('outcome_audit_id');
    // Why a failed purge stopped, in words.
    t.text('failure');
    t.index(['project_id']);
  });
  await knex.raw(
    `ALTER TABLE purges ADD CONSTRAINT purges_status CHECK (status IN ('pending', 'completed', 'failed'))`,
  );
  await knex.raw(
    `ALTER TABLE purges ADD CONSTRAINT purges_step CHECK (step IN ('executions', 'rows', 'data-keys', 'done'))`,
  );
  // One unfinished purge per project: two requests at once resume the same one.
  await knex.raw(`CREATE UNIQUE INDEX purges_unfinished ON purges (project_id) WHERE status <> 'completed'`);
  // Each execution of the project a purge found listed before it started a batch job: counted once however many jobs
  // a lagging listing hands it to (a job's own count is of deletions asked, not of executions gone).
  await knex.schema.createTable('purge_executions', (t) => {
    t.text('purge_id').notNullable().references('purges.id').onDelete('CASCADE');
    t.text('workflow_id').notNullable();
    t.text('run_id').notNullable();
    t.timestamp('found_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['purge_id', 'workflow_id', 'run_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('purge_executions');
  await knex.schema.dropTable('purges');
}

import type { Knex } from 'knex';

// The delivery log members read and recover from: status, error codes and timing only, never payloads or bodies.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('deliveries', (t) => {
    // The event's X-Webhook-Id; a redelivery keeps it, so receivers deduplicate.
    t.text('id').primary();
    // No foreign key: an event for an unknown project is logged as skipped.
    t.text('project_id').notNullable();
    t.text('type').notNullable();
    t.text('status').notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('last_status_code');
    t.text('last_error');
    // The latest workflow run of this event: where a redelivery reads the payload back from Temporal.
    t.text('workflow_id').notNullable();
    // Millisecond precision, so the list's cursor (a JavaScript time) compares exactly.
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw("date_trunc('milliseconds', now())"));
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['project_id', 'created_at', 'id']);
    t.index(['updated_at']);
  });
  await knex.schema.createTable('delivery_attempts', (t) => {
    t.bigIncrements('seq');
    t.text('delivery_id').notNullable().references('deliveries.id').onDelete('CASCADE');
    // Temporal's attempt number within one workflow run: a retried activity report is written once.
    t.text('workflow_id').notNullable();
    t.integer('run_attempt').notNullable();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('status_code');
    t.text('error_code');
    t.integer('duration_ms').notNullable();
    t.unique(['delivery_id', 'workflow_id', 'run_attempt']);
  });
  await knex.schema.createTable('endpoint_health', (t) => {
    t.text('project_id').primary();
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    t.timestamp('failing_since', { useTz: true });
    t.timestamp('last_success_at', { useTz: true });
    t.timestamp('last_failure_at', { useTz: true });
    t.text('last_error');
    // Set when the current failure episode has raised its alert; a success clears it.
    t.timestamp('alerted_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('endpoint_health');
  await knex.schema.dropTable('delivery_attempts');
  await knex.schema.dropTable('deliveries');
}

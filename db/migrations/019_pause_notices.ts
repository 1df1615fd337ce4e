import type { Knex } from 'knex';

/**
 * Who started a registration's pause (a member, or a portal link, whose revocation ends it), and the notices the API
 * queues in an action's transaction for the worker to send (the API has no mail server and no egress client).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.jsonb('paused_by');
  });
  await knex.schema.createTable('project_notice_outbox', (t) => {
    t.bigIncrements('id');
    t.text('project_id').notNullable().references('projects.id').onDelete('CASCADE');
    t.text('condition').notNullable();
    t.jsonb('facts').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('project_notice_outbox');
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropColumn('paused_by');
  });
}

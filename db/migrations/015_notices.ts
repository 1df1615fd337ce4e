import type { Knex } from 'knex';

/**
 * A project's own notification contacts: a URL that gets signed notices and/or e-mail addresses,
 * told when the breaker opens, a delivery is given up, a pause ends by itself, the client certificate nears expiry and
 * the endpoint recovers; and when each condition was last told, so a project hears of each at most once an hour.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('project_notification_contacts', (t) => {
    t.text('project_id').primary().references('projects.id').onDelete('CASCADE');
    t.text('url');
    t.specificType('emails', 'text[]').notNullable().defaultTo('{}');
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('project_notices', (t) => {
    t.text('project_id').notNullable().references('projects.id').onDelete('CASCADE');
    t.text('condition').notNullable();
    t.timestamp('sent_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['project_id', 'condition']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('project_notices');
  await knex.schema.dropTable('project_notification_contacts');
}

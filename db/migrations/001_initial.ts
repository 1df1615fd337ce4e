import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('projects', (t) => {
    t.text('id').primary();
    t.text('name');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('project_members', (t) => {
    t.text('project_id').notNullable().references('projects.id').onDelete('CASCADE');
    t.text('user_id').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['project_id', 'user_id']);
  });
  await knex.schema.createTable('webhook_registrations', (t) => {
    t.uuid('id').primary();
    // One webhook per project, enforced here so concurrent registrations cannot both win.
    t.text('project_id').notNullable().unique().references('projects.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.specificType('types', 'text[]').notNullable();
    t.text('secret_sealed').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_registrations');
  await knex.schema.dropTable('project_members');
  await knex.schema.dropTable('projects');
}

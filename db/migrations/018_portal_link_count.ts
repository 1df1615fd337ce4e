import type { Knex } from 'knex';

/**
 * Portal links stay signed tokens; each one made is also listed here (its id, the digest the trail records, never the
 * token), so a project holds at most PORTAL_LINKS_PER_PROJECT live ones: unexpired, of the current generation.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('portal_links', (t) => {
    t.text('id').primary();
    t.text('project_id').notNullable().references('projects.id').onDelete('CASCADE');
    t.integer('generation').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['project_id', 'generation', 'expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('portal_links');
}

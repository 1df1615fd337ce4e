import type { Knex } from 'knex';

/**
 * Portal links are signed tokens, not rows: a project's link generation is the one piece of state they need. A link
 * carries the generation it was made in; revoking a project's links moves the generation on, so every earlier link
 * stops working at once.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('projects', (t) => {
    t.integer('portal_link_generation').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('projects', (t) => t.dropColumn('portal_link_generation'));
}

import type { Knex } from 'knex';

/**
 * The workflow run that last wrote a delivery's row: a redelivery reads the event from that run's history, never
 * from whatever run holds the workflow id now (anyone who can reach Temporal could start a later one). Rows from
 * before it have none; a redelivery of those reads the latest run only if it started before the row's last write.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deliveries', (t) => {
    t.text('run_id');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deliveries', (t) => t.dropColumn('run_id'));
}

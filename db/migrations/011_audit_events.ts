import type { Knex } from 'knex';

/**
 * The audit trail: one append-only row per action, each hashed over its content and the previous row's hash (see
 * db/audit/events.ts). Rows are written by the API's and the workers' roles and never changed: UPDATE, DELETE and TRUNCATE
 * are revoked from PUBLIC here, and `webhooks migrate` grants those roles INSERT and SELECT only (db/roles.ts), leaving
 * UPDATE and DELETE to the owner (the role that runs migrations and the retention prune).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('audit_events', (t) => {
    t.bigIncrements('id').primary();
    t.timestamp('at', { useTz: true }).notNullable();
    t.text('actor_kind').notNullable();
    t.text('actor_subject');
    t.text('actor_issuer');
    t.text('portal_link_id');
    t.specificType('portal_capabilities', 'text[]');
    t.text('request_id');
    t.text('caller_address');
    t.text('action').notNullable();
    t.text('outcome').notNullable();
    t.text('project_id');
    t.text('registration_id');
    t.text('delivery_id');
    t.jsonb('changes');
    t.text('prev_hash').notNullable();
    t.text('hash').notNullable();
  });
  await knex.raw(
    `ALTER TABLE audit_events
       ADD CONSTRAINT audit_events_actor_kind CHECK (actor_kind IN ('member', 'portal-link', 'cli', 'system')),
       ADD CONSTRAINT audit_events_outcome CHECK (outcome IN ('ok', 'refused'))`,
  );
  await knex.raw('CREATE INDEX audit_events_project_id ON audit_events (project_id, id)');
  await knex.raw('CREATE INDEX audit_events_at ON audit_events (at)');
  // PUBLIC holds none of these by default; revoked anyway so a grant to PUBLIC elsewhere does not reach the trail.
  await knex.raw('REVOKE UPDATE, DELETE, TRUNCATE ON audit_events FROM PUBLIC');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_events');
}

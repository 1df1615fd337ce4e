import type { Knex } from 'knex';

/**
 * A registration's client certificate for receivers that require mutual TLS: the PEM certificate in
 * the clear (it is public), its private key sealed like the signing secret (AES-256-GCM, bound to the row and column),
 * and the facts the API shows and the health route warns on: subject, expiry, fingerprint.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.text('client_certificate');
    t.text('client_key_sealed');
    t.text('client_certificate_subject');
    t.timestamp('client_certificate_not_after', { useTz: true });
    t.text('client_certificate_fingerprint');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropColumn('client_certificate_fingerprint');
    t.dropColumn('client_certificate_not_after');
    t.dropColumn('client_certificate_subject');
    t.dropColumn('client_key_sealed');
    t.dropColumn('client_certificate');
  });
}

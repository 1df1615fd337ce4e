import type { Knex } from 'knex';

/**
 * A registration's OAuth 2.0 client (client credentials): the token endpoint, the client id, how it authenticates,
 * the scope and the assertion's key id in the clear (the API shows them), and its credential (the client secret, or
 * the private key that signs its assertions) sealed like the signing secret (AES-256-GCM, bound to the row and column).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.text('oauth_token_url');
    t.text('oauth_client_id');
    t.text('oauth_client_authentication');
    t.text('oauth_scope');
    t.text('oauth_key_id');
    t.text('oauth_credential_sealed');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropColumn('oauth_credential_sealed');
    t.dropColumn('oauth_key_id');
    t.dropColumn('oauth_scope');
    t.dropColumn('oauth_client_authentication');
    t.dropColumn('oauth_client_id');
    t.dropColumn('oauth_token_url');
  });
}

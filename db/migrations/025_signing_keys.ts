import type { Knex } from 'knex';

/**
 * A registration's signature scheme: `v1` (HMAC with the secret, as before) or `v1a` (Ed25519, Standard Webhooks'
 * asymmetric signatures, beside v1). With v1a its key pair: the private key sealed like the secret, the public key in
 * the clear (receivers are given it); and, while a rotation of the pair overlaps, the pair it replaced and when that
 * stops signing.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.text('signature_scheme').notNullable().defaultTo('v1');
    t.text('signing_key_sealed');
    t.text('signing_public_key');
    t.text('previous_signing_key_sealed');
    t.text('previous_signing_public_key');
    t.timestamp('previous_signing_key_expires_at', { useTz: true });
  });
  await knex.raw(
    `ALTER TABLE webhook_registrations ADD CONSTRAINT signature_scheme_known CHECK (signature_scheme IN ('v1', 'v1a'))`,
  );
  // A v1a registration always has its pair, a v1 one never: no key left behind when the scheme goes back to v1.
  await knex.raw(
    'ALTER TABLE webhook_registrations ADD CONSTRAINT signing_key_with_scheme CHECK (' +
      `(signature_scheme = 'v1a') = (signing_key_sealed IS NOT NULL) AND ` +
      '(signing_key_sealed IS NULL) = (signing_public_key IS NULL))',
  );
  await knex.raw(
    'ALTER TABLE webhook_registrations ADD CONSTRAINT previous_signing_key_with_expiry CHECK (' +
      '(previous_signing_key_sealed IS NULL) = (previous_signing_key_expires_at IS NULL) AND ' +
      '(previous_signing_key_sealed IS NULL) = (previous_signing_public_key IS NULL))',
  );
  // The sweep that erases expired previous keys finds them without a full scan.
  await knex.raw(
    'CREATE INDEX webhook_registrations_previous_signing_key_expiry ON webhook_registrations ' +
      '(previous_signing_key_expires_at) WHERE previous_signing_key_expires_at IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_registrations', (t) => {
    t.dropIndex([], 'webhook_registrations_previous_signing_key_expiry');
    t.dropChecks(['signature_scheme_known', 'signing_key_with_scheme', 'previous_signing_key_with_expiry']);
    for (const column of [
      'signature_scheme',
      'signing_key_sealed',
      'signing_public_key',
      'previous_signing_key_sealed',
      'previous_signing_public_key',
      'previous_signing_key_expires_at',
    ])
      t.dropColumn(column);
  });
}

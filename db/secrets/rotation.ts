import {
  generateWebhookSecret,
  registrationSecretAad,
  registrationSigningKeyAad,
  type SecretBox,
} from '../../common/crypto/secrets';
import { generateSigningKeyPair } from '../../common/crypto/signature';
import type { Db } from '../connection';
import { appendAuditEvent } from '../audit/events';
import { findRegistration } from '../registrations';

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const TABLE = 'webhook_registrations';

export interface RotatedSecret {
  /** The new signing secret, in plaintext: shown once. */
  secret: string;
  /** When the replaced secret stops signing deliveries (the rotation's own time when there is no overlap). */
  previousSecretExpiresAt: Date;
  /** The registration whose secret was replaced. */
  registrationId: string;
}

/**
 * Gives the project's registration a new secret; the current one becomes the previous secret for `overlapSeconds`
 * (none when 0). One UPDATE, so a concurrent rotation or delivery sees either the old pair or the new one. A rotation
 * during an overlap ends that overlap: only the secret it replaces stays valid. Undefined when there is no webhook.
 */
export async function rotateRegistrationSecret(
  db: Db,
  secretBox: SecretBox,
  projectId: string,
  overlapSeconds: number,
  secret: string = generateWebhookSecret(),
): Promise<RotatedSecret | undefined> {
  const registration = await findRegistration(db, projectId);
  if (!registration) return undefined;
  const overlap = overlapSeconds > 0;
  // SET expressions read the row as it was, so the previous secret is the current one being replaced.
  const { rows } = await db.raw<{ rows: { expires_at: Date }[] }>(
    `UPDATE ${TABLE} SET
       previous_secret_sealed = CASE WHEN :overlap THEN secret_sealed END,
       previous_secret_expires_at = CASE WHEN :overlap THEN now() + make_interval(secs => :overlapSeconds) END,
       secret_sealed = :sealed,
       updated_at = now()
     WHERE id = :id
     RETURNING coalesce(previous_secret_expires_at, now()) AS expires_at`,
    {
      overlap,
      overlapSeconds,
      sealed: secretBox.seal(secret, registrationSecretAad(registration.id)),
      id: registration.id,
    },
  );
  const [row] = rows;
  // Deleted between the read and the update: as if there had been no webhook.
  return row && { secret, previousSecretExpiresAt: row.expires_at, registrationId: registration.id };
}

export interface RotatedSigningKey {
  /** The new public key (whpk_…); its private key is sealed and never leaves the service. */
  publicKey: string;
  /** The public key replaced, while it keeps signing; null without an overlap. */
  previousPublicKey: string | null;
  /** When the replaced key pair stops signing deliveries (the rotation's own time when there is no overlap). */
  previousPublicKeyExpiresAt: Date;
}

/**
 * Gives a v1a registration a new Ed25519 key pair; the current pair becomes the previous one for `overlapSeconds`
 * (none when 0), as rotateRegistrationSecret does for the secret: one UPDATE, a rotation during an overlap keeps only
 * the pair it replaces. Undefined when the registration is gone or does not sign with v1a.
 */
export async function rotateRegistrationSigningKey(
  db: Db,
  secretBox: SecretBox,
  registrationId: string,
  overlapSeconds: number,
): Promise<RotatedSigningKey | undefined> {
  const pair = generateSigningKeyPair();
  const overlap = overlapSeconds > 0;
  const { rows } = await db.raw<{ rows: { expires_at: Date; previous_public_key: string | null }[] }>(
    `UPDATE ${TABLE} SET
       previous_signing_key_sealed = CASE WHEN :overlap THEN signing_key_sealed END,
       previous_signing_public_key = CASE WHEN :overlap THEN signing_public_key END,
       previous_signing_key_expires_at = CASE WHEN :overlap THEN now() + make_interval(secs => :overlapSeconds) END,
       signing_key_sealed = :sealed,
       signing_public_key = :publicKey,
       updated_at = now()
     WHERE id = :id AND signature_scheme = 'v1a'
     RETURNING coalesce(previous_signing_key_expires_at, now()) AS expires_at,
       previous_signing_public_key AS previous_public_key`,
    {
      overlap,
      overlapSeconds,
      sealed: secretBox.seal(pair.privateKeyPem, registrationSigningKeyAad(registrationId)),
      publicKey: pair.publicKey,
      id: registrationId,
    },
  );
  const [row] = rows;
  return (
    row && {
      publicKey: pair.publicKey,
      previousPublicKey: row.previous_public_key,
      previousPublicKeyExpiresAt: row.expires_at,
    }
  );
}

/**
 * Erases previous secrets and previous signing key pairs whose overlap is over, of one registration or of all; returns
 * how many were erased. Each overlap's end is an automatic action: one `system` audit row per registration and kind,
 * in the erase's transaction.
 */
export async function eraseExpiredPreviousSecrets(db: Db, registrationId?: string): Promise<number> {
  return db.transaction(async (trx) => {
    const expired = (column: string) => {
      const query = trx(TABLE).where(column, '<=', trx.fn.now());
      return registrationId === undefined ? query : query.andWhere({ id: registrationId });
    };
    const secrets = await expired('previous_secret_expires_at')
      .update({ previous_secret_sealed: null, previous_secret_expires_at: null })
      .returning<{ id: string; project_id: string }[]>(['id', 'project_id']);
    const keys = await expired('previous_signing_key_expires_at')
      .update({
        previous_signing_key_sealed: null,
        previous_signing_public_key: null,
        previous_signing_key_expires_at: null,
      })
      .returning<{ id: string; project_id: string }[]>(['id', 'project_id']);
    const ended = [
      ...secrets.map((row) => ({ row, action: 'webhook.secret.overlap-ended' })),
      ...keys.map((row) => ({ row, action: 'webhook.signing-key.overlap-ended' })),
    ];
    for (const { row, action } of ended)
      await appendAuditEvent(trx, {
        actor: { kind: 'system' },
        action,
        outcome: 'ok',
        projectId: row.project_id,
        registrationId: row.id,
      });
    return ended.length;
  });
}

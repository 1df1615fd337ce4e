import { generateWebhookSecret, registrationSecretAad, type SecretBox } from '../../common/crypto/secrets';
import type { Db } from '../connection';
import { appendAuditEvent } from '../audit/events';
import { findRegistration } from '../registrations';

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

/**
 * Erases previous secrets whose overlap is over, of one registration or of all; returns how many were erased. Each
 * overlap's end is an automatic action: one `system` audit row per registration, in the erase's transaction.
 */
export async function eraseExpiredPreviousSecrets(db: Db, registrationId?: string): Promise<number> {
  return db.transaction(async (trx) => {
    const expired = trx(TABLE).where('previous_secret_expires_at', '<=', trx.fn.now());
    const scoped = registrationId === undefined ? expired : expired.andWhere({ id: registrationId });
    const erased = await scoped
      .update({ previous_secret_sealed: null, previous_secret_expires_at: null })
      .returning<{ id: string; project_id: string }[]>(['id', 'project_id']);
    for (const row of erased)
      await appendAuditEvent(trx, {
        actor: { kind: 'system' },
        action: 'webhook.secret.overlap-ended',
        outcome: 'ok',
        projectId: row.project_id,
        registrationId: row.id,
      });
    return erased.length;
  });
}

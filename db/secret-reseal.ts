import {
  registrationClientKeyAad,
  registrationHeadersAad,
  registrationSecretAad,
  type SecretBox,
} from '../common/secrets';
import type { Db } from './connection';
import { eraseExpiredPreviousSecrets } from './secret-rotation';
import { appendAuditEvent, type AuditActor } from './audit';

export interface ResealReport {
  /**
   * Sealed values read: each registration's current secret, its previous one while a rotation's overlap lasts, and its
   * custom headers when it has any.
   */
  total: number;
  /** Secrets sealed again under the newest key. */
  resealed: number;
}

export interface ResealOptions {
  /** Runs once the rows are read and locked, before the first write: tests land a concurrent rotation there. */
  afterRead?: () => Promise<void>;
  /** Who resealed, and under which key id: the reseal's audit row is written in its transaction. */
  audit?: { actor: AuditActor; keyId: string };
}

interface SealedRow {
  id: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  custom_headers_sealed: string | null;
  client_key_sealed: string | null;
}

/**
 * Seals every stored signing secret that is not under the newest key (or still in the v1 format) again under it: the
 * current secret, and the previous one a rotation keeps signing until its overlap ends (left under the old key, it
 * could no longer be opened once that key is dropped, and every delivery would fail). A previous secret whose overlap
 * is over never signs again: it is erased, as the worker's sweep would, not resealed. The custom headers, sealed the
 * same way, are resealed with them.
 *
 * One transaction holding every row's lock from the read to the write: either every secret ends under the newest key
 * or none changes, and a rotation waits for the reseal (instead of being overwritten by the secret it replaced).
 * updated_at is left alone (the registration did not change for its owner).
 */
export function resealRegistrationSecrets(
  db: Db,
  secretBox: SecretBox,
  { afterRead, audit }: ResealOptions = {},
): Promise<ResealReport> {
  return db.transaction(async (trx) => {
    await eraseExpiredPreviousSecrets(trx);
    const rows = await trx<SealedRow>('webhook_registrations')
      .select('id', 'secret_sealed', 'previous_secret_sealed', 'custom_headers_sealed', 'client_key_sealed')
      .forUpdate();
    await afterRead?.();
    let total = 0;
    let resealed = 0;
    for (const row of rows) {
      const reseal = (sealed: string, which: string, aad = registrationSecretAad(row.id)): string => {
        try {
          return secretBox.seal(secretBox.open(sealed, aad), aad);
        } catch (error) {
          throw new Error(`registration ${row.id} (${which}): ${(error as Error).message}; nothing was resealed`);
        }
      };
      const update: Partial<SealedRow> = {};
      total++;
      if (secretBox.isStale(row.secret_sealed)) update.secret_sealed = reseal(row.secret_sealed, 'current secret');
      if (row.previous_secret_sealed !== null) {
        total++;
        if (secretBox.isStale(row.previous_secret_sealed))
          update.previous_secret_sealed = reseal(row.previous_secret_sealed, 'previous secret');
      }
      if (row.custom_headers_sealed !== null) {
        total++;
        if (secretBox.isStale(row.custom_headers_sealed))
          update.custom_headers_sealed = reseal(
            row.custom_headers_sealed,
            'custom headers',
            registrationHeadersAad(row.id),
          );
      }
      if (row.client_key_sealed !== null) {
        total++;
        if (secretBox.isStale(row.client_key_sealed))
          update.client_key_sealed = reseal(
            row.client_key_sealed,
            'client certificate key',
            registrationClientKeyAad(row.id),
          );
      }
      const count = Object.keys(update).length;
      if (count === 0) continue;
      await trx('webhook_registrations').where({ id: row.id }).update(update);
      resealed += count;
    }
    if (audit)
      await appendAuditEvent(trx, {
        actor: audit.actor,
        action: 'secrets.reseal',
        outcome: 'ok',
        changes: { total, resealed, keyId: audit.keyId },
      });
    return { total, resealed };
  });
}

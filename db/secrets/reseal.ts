import {
  registrationClientKeyAad,
  registrationHeadersAad,
  registrationOAuthCredentialAad,
  registrationSecretAad,
  registrationSigningKeyAad,
  type SecretBox,
} from '../../common/crypto/secrets';
import type { Db } from '../connection';
import { eraseExpiredPreviousSecrets } from './rotation';
import { appendAuditEvent, type AuditActor } from '../audit/events';

export interface ResealReport {
  /**
   * Sealed values read: each registration's current secret, its previous one while a rotation's overlap lasts, its
   * custom headers, its client certificate's key, its Ed25519 private keys (current, previous) and its OAuth client secret or key when
   * it has them.
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
  signing_key_sealed: string | null;
  previous_signing_key_sealed: string | null;
  oauth_credential_sealed: string | null;
}

/** Every sealed column of a registration: what it holds (named when it cannot be opened) and the AAD it is bound to. */
const SEALED_COLUMNS = [
  ['secret_sealed', 'current secret', registrationSecretAad],
  ['previous_secret_sealed', 'previous secret', registrationSecretAad],
  ['custom_headers_sealed', 'custom headers', registrationHeadersAad],
  ['client_key_sealed', 'client certificate key', registrationClientKeyAad],
  ['signing_key_sealed', 'signing key', registrationSigningKeyAad],
  ['previous_signing_key_sealed', 'previous signing key', registrationSigningKeyAad],
  ['oauth_credential_sealed', 'OAuth client credential', registrationOAuthCredentialAad],
] as const;

/**
 * Seals every stored signing secret that is not under the newest key (or still in the v1 format) again under it: the
 * current secret, and the previous one a rotation keeps signing until its overlap ends (left under the old key, it
 * could no longer be opened once that key is dropped, and every delivery would fail). A previous secret whose overlap
 * is over never signs again: it is erased, as the worker's sweep would, not resealed. The custom headers and a client
 * certificate's key, the Ed25519 private keys (a previous one erased once its overlap is over, like a previous
 * secret) and an OAuth client's secret or key, sealed the same way, are resealed with them.
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
      .select('id', ...SEALED_COLUMNS.map(([column]) => column))
      .forUpdate();
    await afterRead?.();
    let total = 0;
    let resealed = 0;
    for (const row of rows) {
      const update: Partial<SealedRow> = {};
      for (const [column, which, aadOf] of SEALED_COLUMNS) {
        const sealed = row[column];
        if (sealed === null) continue;
        total++;
        if (!secretBox.isStale(sealed)) continue;
        const aad = aadOf(row.id);
        try {
          update[column] = secretBox.seal(secretBox.open(sealed, aad), aad);
        } catch (error) {
          throw new Error(`registration ${row.id} (${which}): ${(error as Error).message}; nothing was resealed`);
        }
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

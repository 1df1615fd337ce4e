import { registrationSecretAad, type SecretBox } from '../common/secrets';
import type { Db } from './connection';

export interface ResealReport {
  /** Registrations read. */
  total: number;
  /** Registrations whose secret was sealed again under the newest key. */
  resealed: number;
}

/**
 * Seals every stored signing secret that is not under the newest key (or still in the v1 format) again under it, in
 * one transaction: either every row ends under the newest key or none changes. updated_at is left alone (the
 * registration did not change for its owner).
 */
export function resealRegistrationSecrets(db: Db, secretBox: SecretBox): Promise<ResealReport> {
  return db.transaction(async (trx) => {
    const rows = await trx<{ id: string; secret_sealed: string }>('webhook_registrations')
      .select('id', 'secret_sealed')
      .forUpdate();
    let resealed = 0;
    for (const row of rows) {
      if (!secretBox.isStale(row.secret_sealed)) continue;
      const aad = registrationSecretAad(row.id);
      let secret: string;
      try {
        secret = secretBox.open(row.secret_sealed, aad);
      } catch (error) {
        throw new Error(`registration ${row.id}: ${(error as Error).message}; nothing was resealed`);
      }
      await trx('webhook_registrations')
        .where({ id: row.id })
        .update({ secret_sealed: secretBox.seal(secret, aad) });
      resealed++;
    }
    return { total: rows.length, resealed };
  });
}

import { randomUUID } from 'node:crypto';
import type { SubscribableType } from '../common/contract';
import { generateWebhookSecret, registrationSecretAad, type SecretBox } from '../common/secrets';
import type { Db } from './connection';

/** A stored webhook registration; the signing secret stays sealed (AES-256-GCM) at this layer. */
export interface RegistrationRow {
  id: string;
  projectId: string;
  url: string;
  types: SubscribableType[];
  secretSealed: string;
  /** The secret a rotation replaced, sealed with the same AAD; null once its overlap is over and it is erased. */
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

interface Columns {
  id: string;
  project_id: string;
  url: string;
  types: SubscribableType[];
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const TABLE = 'webhook_registrations';

const toRow = (c: Columns): RegistrationRow => ({
  id: c.id,
  projectId: c.project_id,
  url: c.url,
  types: c.types,
  secretSealed: c.secret_sealed,
  previousSecretSealed: c.previous_secret_sealed,
  previousSecretExpiresAt: c.previous_secret_expires_at,
  createdAt: c.created_at,
  updatedAt: c.updated_at,
});

/** The project's registration; `forUpdate` locks its row to the end of the caller's transaction. */
export async function findRegistration(
  db: Db,
  projectId: string,
  options: { forUpdate?: boolean } = {},
): Promise<RegistrationRow | undefined> {
  const query = db<Columns>(TABLE).where({ project_id: projectId }).first();
  const columns = await (options.forUpdate ? query.forUpdate() : query);
  return columns && toRow(columns);
}

/** Inserts a registration; returns undefined when the project already has one (the unique constraint decides). */
export async function insertRegistration(
  db: Db,
  registration: Pick<RegistrationRow, 'id' | 'projectId' | 'url' | 'types' | 'secretSealed'>,
): Promise<RegistrationRow | undefined> {
  const [columns] = await db<Columns>(TABLE)
    .insert({
      id: registration.id,
      project_id: registration.projectId,
      url: registration.url,
      types: registration.types,
      secret_sealed: registration.secretSealed,
    })
    .onConflict('project_id')
    .ignore()
    .returning('*');
  return columns && toRow(columns);
}

/**
 * Registers a webhook: a new id and signing secret (or the one given), the secret sealed to its row. Returns the
 * row and the plaintext secret (shown once), or undefined when the project already has a registration.
 */
export async function createRegistration(
  db: Db,
  secretBox: SecretBox,
  fields: Pick<RegistrationRow, 'projectId' | 'url' | 'types'>,
  secret: string = generateWebhookSecret(),
): Promise<{ row: RegistrationRow; secret: string } | undefined> {
  const id = randomUUID();
  const row = await insertRegistration(db, {
    ...fields,
    id,
    secretSealed: secretBox.seal(secret, registrationSecretAad(id)),
  });
  return row && { row, secret };
}

/** Updates url and/or types; returns undefined when the project has no registration. */
export async function updateRegistration(
  db: Db,
  projectId: string,
  changes: { url?: string; types?: SubscribableType[] },
): Promise<RegistrationRow | undefined> {
  const [columns] = await db<Columns>(TABLE)
    .where({ project_id: projectId })
    .update({ ...changes, updated_at: db.fn.now() })
    .returning('*');
  return columns && toRow(columns);
}

/** Deletes the project's registration; returns false when there was none. */
export async function deleteRegistration(db: Db, projectId: string): Promise<boolean> {
  return (await removeRegistration(db, projectId)) !== undefined;
}

/** Deletes the project's registration and returns the row deleted; undefined when there was none. */
export async function removeRegistration(db: Db, projectId: string): Promise<RegistrationRow | undefined> {
  const [columns] = await db<Columns>(TABLE).where({ project_id: projectId }).delete().returning('*');
  return columns && toRow(columns);
}

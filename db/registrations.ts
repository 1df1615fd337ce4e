import { randomUUID } from 'node:crypto';
import type { SubscribableType } from '../common/contract';
import type { ClientCertificateInfo, ClientCertificateUpload } from '../common/registration/client-certificate';
import type { CustomHeaders } from '../common/registration/custom-headers';
import {
  generateWebhookSecret,
  registrationClientKeyAad,
  registrationHeadersAad,
  registrationSecretAad,
  type SecretBox,
} from '../common/crypto/secrets';
import type { Db } from './connection';
import { adoptWaiters, setAsideWaiters } from './endpoints/waiter-handover';

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
  /** The custom headers' names, as set; the API shows these and never the values. */
  customHeaderNames: string[];
  /** The custom headers' [name, value] pairs as JSON, sealed with registrationHeadersAad; null when there are none. */
  customHeadersSealed: string | null;
  /** When the current pause began and when it ends by itself; both null when not paused (db/endpoints/pause.ts). */
  pausedAt: Date | null;
  pausedUntil: Date | null;
  /** The client certificate presented to the receiver (mutual TLS), its key sealed; null when there is none. */
  clientCertificate: StoredClientCertificate | null;
  /** The most deliveries a second the receiver takes, across all workers; null: unlimited (db/endpoints/rate-limits.ts). */
  rateLimitPerSecond: number | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A registration's client certificate as stored: the PEM in the clear, the key sealed with registrationClientKeyAad. */
export interface StoredClientCertificate extends ClientCertificateInfo {
  pem: string;
  keySealed: string;
}

/** A checked upload (common/registration/client-certificate.ts), to store; null removes the registration's certificate. */
export interface ClientCertificateChange {
  upload: ClientCertificateUpload;
  info: ClientCertificateInfo;
}

interface Columns {
  id: string;
  project_id: string;
  url: string;
  types: SubscribableType[];
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
  custom_header_names: string[];
  custom_headers_sealed: string | null;
  paused_at: Date | null;
  paused_until: Date | null;
  client_certificate: string | null;
  client_key_sealed: string | null;
  client_certificate_subject: string | null;
  client_certificate_not_after: Date | null;
  client_certificate_fingerprint: string | null;
  rate_limit_per_second: number | null;
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
  customHeaderNames: c.custom_header_names,
  customHeadersSealed: c.custom_headers_sealed,
  pausedAt: c.paused_at ?? null,
  pausedUntil: c.paused_until ?? null,
  clientCertificate:
    c.client_certificate && c.client_key_sealed
      ? {
          pem: c.client_certificate,
          keySealed: c.client_key_sealed,
          subject: c.client_certificate_subject ?? '',
          notAfter: c.client_certificate_not_after ?? new Date(0),
          fingerprint: c.client_certificate_fingerprint ?? '',
        }
      : null,
  rateLimitPerSecond: c.rate_limit_per_second ?? null,
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
  registration: Pick<RegistrationRow, 'id' | 'projectId' | 'url' | 'types' | 'secretSealed'> &
    Partial<Pick<RegistrationRow, 'customHeaderNames' | 'customHeadersSealed' | 'rateLimitPerSecond'>> &
    Partial<ClientCertificateColumns>,
): Promise<RegistrationRow | undefined> {
  const [columns] = await db<Columns>(TABLE)
    .insert({
      id: registration.id,
      project_id: registration.projectId,
      url: registration.url,
      types: registration.types,
      secret_sealed: registration.secretSealed,
      custom_header_names: registration.customHeaderNames ?? [],
      custom_headers_sealed: registration.customHeadersSealed ?? null,
      rate_limit_per_second: registration.rateLimitPerSecond ?? null,
      ...clientCertificateColumns(registration),
    })
    .onConflict('project_id')
    .ignore()
    .returning('*');
  return columns && toRow(columns);
}

/**
 * Registers a webhook: a new id and signing secret (or the one given), the secret sealed to its row. Returns the
 * row and the plaintext secret (shown once), or undefined when the project already has a registration. It takes over
 * the deliveries a deleted registration of the project left waiting (db/endpoints/waiter-handover.ts): woken now, sent to it.
 */
export async function createRegistration(
  db: Db,
  secretBox: SecretBox,
  fields: Pick<RegistrationRow, 'projectId' | 'url' | 'types'> & {
    rateLimitPerSecond?: number | null;
    headers?: CustomHeaders;
    clientCertificate?: ClientCertificateChange;
  },
  secret: string = generateWebhookSecret(),
): Promise<{ row: RegistrationRow; secret: string } | undefined> {
  const id = randomUUID();
  const { headers, clientCertificate, ...registration } = fields;
  const row = await db.transaction(async (trx) => {
    const inserted = await insertRegistration(trx, {
      ...registration,
      id,
      secretSealed: secretBox.seal(secret, registrationSecretAad(id)),
      ...sealCustomHeaders(secretBox, id, headers ?? {}),
      ...(clientCertificate && { clientCertificate: sealClientCertificate(secretBox, id, clientCertificate) }),
    });
    if (inserted) await adoptWaiters(trx, inserted.id, inserted.projectId);
    return inserted;
  });
  return row && { row, secret };
}

/**
 * Updates url, types and/or the rate limit (null: unlimited), replaces the custom headers when `headers` is given (`{}` removes them all) and the client
 * certificate when `clientCertificate` is (null removes it); returns undefined when the project has no registration.
 */
export async function updateRegistration(
  db: Db,
  projectId: string,
  changes: { url?: string; types?: SubscribableType[]; rateLimitPerSecond?: number | null },
  headers?: { secretBox: SecretBox; values: CustomHeaders },
  clientCertificate?: { secretBox: SecretBox; value: ClientCertificateChange | null },
): Promise<RegistrationRow | undefined> {
  const { rateLimitPerSecond, ...fields } = changes;
  const rate = rateLimitPerSecond !== undefined && { rate_limit_per_second: rateLimitPerSecond };
  if (!headers && !clientCertificate) {
    const [columns] = await db<Columns>(TABLE)
      .where({ project_id: projectId })
      .update({ ...fields, ...rate, updated_at: db.fn.now() })
      .returning('*');
    return columns && toRow(columns);
  }
  // The sealed headers are bound to the row's id: read it under a lock, so a re-registration cannot slip in between.
  return db.transaction(async (trx) => {
    const current = await trx<Columns>(TABLE).where({ project_id: projectId }).forUpdate().first('id');
    if (!current) return undefined;
    const sealed = headers && sealCustomHeaders(headers.secretBox, current.id, headers.values);
    const certificate =
      clientCertificate?.value &&
      sealClientCertificate(clientCertificate.secretBox, current.id, clientCertificate.value);
    const [columns] = await trx<Columns>(TABLE)
      .where({ id: current.id })
      .update({
        ...fields,
        ...rate,
        ...(sealed && {
          custom_header_names: sealed.customHeaderNames,
          custom_headers_sealed: sealed.customHeadersSealed,
        }),
        ...(clientCertificate && clientCertificateColumns({ clientCertificate: certificate ?? null })),
        updated_at: trx.fn.now(),
      })
      .returning('*');
    return columns && toRow(columns);
  });
}

/** The columns of a registration's custom headers: the names in the clear, the pairs sealed to the row. */
function sealCustomHeaders(
  secretBox: SecretBox,
  registrationId: string,
  headers: CustomHeaders,
): Pick<RegistrationRow, 'customHeaderNames' | 'customHeadersSealed'> {
  const pairs = Object.entries(headers);
  if (pairs.length === 0) return { customHeaderNames: [], customHeadersSealed: null };
  return {
    customHeaderNames: pairs.map(([name]) => name),
    customHeadersSealed: secretBox.seal(JSON.stringify(pairs), registrationHeadersAad(registrationId)),
  };
}

/** A registration's custom headers, opened: [name, value] pairs in the order they were set. Throws when they cannot be. */
export function openCustomHeaders(secretBox: SecretBox, row: RegistrationRow): [name: string, value: string][] {
  if (row.customHeadersSealed === null) return [];
  return JSON.parse(secretBox.open(row.customHeadersSealed, registrationHeadersAad(row.id))) as [string, string][];
}

interface ClientCertificateColumns {
  clientCertificate: StoredClientCertificate | null;
}

/** The columns of a client certificate, or of none. */
function clientCertificateColumns({ clientCertificate: c }: Partial<ClientCertificateColumns>) {
  return {
    client_certificate: c?.pem ?? null,
    client_key_sealed: c?.keySealed ?? null,
    client_certificate_subject: c?.subject ?? null,
    client_certificate_not_after: c?.notAfter ?? null,
    client_certificate_fingerprint: c?.fingerprint ?? null,
  };
}

/** A checked upload as stored: the key sealed to the registration's row. */
function sealClientCertificate(
  secretBox: SecretBox,
  registrationId: string,
  { upload, info }: ClientCertificateChange,
): StoredClientCertificate {
  return {
    ...info,
    pem: upload.certificate,
    keySealed: secretBox.seal(upload.privateKey, registrationClientKeyAad(registrationId)),
  };
}

/** A registration's client-certificate key, opened. Throws when it cannot be. */
export function openClientKey(
  secretBox: SecretBox,
  row: RegistrationRow & { clientCertificate: StoredClientCertificate },
): string {
  return secretBox.open(row.clientCertificate.keySealed, registrationClientKeyAad(row.id));
}

/** Deletes the project's registration; returns false when there was none. */
export async function deleteRegistration(db: Db, projectId: string): Promise<boolean> {
  return (await removeRegistration(db, projectId)) !== undefined;
}

/**
 * Deletes the project's registration and returns the row deleted; undefined when there was none. The deliveries
 * waiting for it are kept for the project's next registration (db/endpoints/waiter-handover.ts).
 */
export async function removeRegistration(db: Db, projectId: string): Promise<RegistrationRow | undefined> {
  return db.transaction(async (trx) => {
    // Locked: no delivery lists itself under the registration between its waiters set aside and its deletion.
    const current = await trx<Columns>(TABLE).where({ project_id: projectId }).forUpdate().first('id');
    if (!current) return undefined;
    await setAsideWaiters(trx, current.id, projectId);
    const [columns] = await trx<Columns>(TABLE).where({ id: current.id }).delete().returning('*');
    return columns && toRow(columns);
  });
}

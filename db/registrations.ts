import { randomUUID } from 'node:crypto';
import type { SubscribableType } from '../common/contract';
import type { ClientCertificateInfo, ClientCertificateUpload } from '../common/registration/client-certificate';
import type { CustomHeaders } from '../common/registration/custom-headers';
import type { OAuthClientAuthentication, OAuthClientInfo } from '../common/registration/oauth-client';
import {
  generateWebhookSecret,
  registrationClientKeyAad,
  registrationHeadersAad,
  registrationOAuthCredentialAad,
  registrationSecretAad,
  registrationSigningKeyAad,
  type SecretBox,
} from '../common/crypto/secrets';
import { generateSigningKeyPair, type SignatureScheme } from '../common/crypto/signature';
import type { Db } from './connection';
import type { PauseReason } from './endpoints/pause';
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
  /** Why the deliveries are held: null for a member's pause, 'gone' when the receiver answered 410 (no end of its own). */
  pauseReason: PauseReason | null;
  /** Until when the receiver asked to be left alone (429, 502, 503, 504), and with which status; null when it did not. */
  slowedUntil: Date | null;
  slowedStatusCode: number | null;
  /** The client certificate presented to the receiver (mutual TLS), its key sealed; null when there is none. */
  clientCertificate: StoredClientCertificate | null;
  /** `v1` (HMAC only) or `v1a` (Ed25519 too); with v1a the key pair below, else both null. */
  signatureScheme: SignatureScheme;
  /** The Ed25519 private key (PKCS #8 PEM), sealed with registrationSigningKeyAad; null under v1. */
  signingKeySealed: string | null;
  /** Its public key as receivers are given it (`whpk_…`); null under v1. */
  signingPublicKey: string | null;
  /** The key pair a rotation replaced, sealed like the current one, while its overlap lasts; null once it is erased. */
  previousSigningKeySealed: string | null;
  previousSigningPublicKey: string | null;
  previousSigningKeyExpiresAt: Date | null;
  /** The OAuth client whose bearer token every delivery carries, its secret or key sealed; null when there is none. */
  oauth: StoredOAuthClient | null;
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

/** A registration's OAuth client as stored: its facts in the clear, its secret or key sealed with registrationOAuthCredentialAad. */
export interface StoredOAuthClient extends OAuthClientInfo {
  credentialSealed: string;
}

/** A checked OAuth client (common/registration/oauth-client.ts) and its secret or key, to store. */
export interface OAuthClientChange {
  info: OAuthClientInfo;
  credential: string;
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
  pause_reason: PauseReason | null;
  slowed_until: Date | null;
  slowed_status_code: number | null;
  client_certificate: string | null;
  client_key_sealed: string | null;
  client_certificate_subject: string | null;
  client_certificate_not_after: Date | null;
  client_certificate_fingerprint: string | null;
  signature_scheme: SignatureScheme;
  signing_key_sealed: string | null;
  signing_public_key: string | null;
  previous_signing_key_sealed: string | null;
  previous_signing_public_key: string | null;
  previous_signing_key_expires_at: Date | null;
  oauth_token_url: string | null;
  oauth_client_id: string | null;
  oauth_client_authentication: OAuthClientAuthentication | null;
  oauth_scope: string | null;
  oauth_key_id: string | null;
  oauth_credential_sealed: string | null;
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
  pauseReason: c.pause_reason ?? null,
  slowedUntil: c.slowed_until ?? null,
  slowedStatusCode: c.slowed_status_code ?? null,
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
  signatureScheme: c.signature_scheme ?? 'v1',
  signingKeySealed: c.signing_key_sealed ?? null,
  signingPublicKey: c.signing_public_key ?? null,
  previousSigningKeySealed: c.previous_signing_key_sealed ?? null,
  previousSigningPublicKey: c.previous_signing_public_key ?? null,
  previousSigningKeyExpiresAt: c.previous_signing_key_expires_at ?? null,
  oauth:
    c.oauth_token_url && c.oauth_client_id && c.oauth_client_authentication && c.oauth_credential_sealed
      ? {
          tokenUrl: c.oauth_token_url,
          clientId: c.oauth_client_id,
          clientAuthentication: c.oauth_client_authentication,
          scope: c.oauth_scope ?? null,
          keyId: c.oauth_key_id ?? null,
          credentialSealed: c.oauth_credential_sealed,
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
    Partial<ClientCertificateColumns> &
    Partial<SigningKeyColumns> &
    Partial<Pick<RegistrationRow, 'oauth'>>,
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
      ...(registration.signatureScheme && signingKeyColumns(registration as SigningKeyColumns)),
      ...oauthColumns(registration.oauth ?? null),
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
    signatureScheme?: SignatureScheme;
    oauth?: OAuthClientChange;
  },
  secret: string = generateWebhookSecret(),
): Promise<{ row: RegistrationRow; secret: string } | undefined> {
  const id = randomUUID();
  const { headers, clientCertificate, signatureScheme, oauth, ...registration } = fields;
  const row = await db.transaction(async (trx) => {
    const inserted = await insertRegistration(trx, {
      ...registration,
      id,
      secretSealed: secretBox.seal(secret, registrationSecretAad(id)),
      ...sealCustomHeaders(secretBox, id, headers ?? {}),
      ...(clientCertificate && { clientCertificate: sealClientCertificate(secretBox, id, clientCertificate) }),
      ...(signatureScheme && newSigningKeys(secretBox, id, signatureScheme)),
      ...(oauth && { oauth: sealOAuthClient(secretBox, id, oauth) }),
    });
    if (inserted) await adoptWaiters(trx, inserted.id, inserted.projectId);
    return inserted;
  });
  return row && { row, secret };
}

/** The sealed parts a PATCH replaces, each only when given. */
export interface SealedChanges {
  /** Replaces the whole set of custom headers (`{}` removes them all). */
  headers?: { secretBox: SecretBox; values: CustomHeaders };
  /** Replaces the client certificate (null removes it). */
  clientCertificate?: { secretBox: SecretBox; value: ClientCertificateChange | null };
  /** A scheme chosen: v1a a new key pair, v1 the pairs erased. */
  signing?: { secretBox: SecretBox; scheme: SignatureScheme };
  /** Replaces the OAuth client, its secret or key included (null removes it). */
  oauth?: { secretBox: SecretBox; value: OAuthClientChange | null };
}

/**
 * Updates url, types and/or the rate limit (null: unlimited), and replaces each sealed part given in `sealed`; returns
 * undefined when the project has no registration.
 */
export async function updateRegistration(
  db: Db,
  projectId: string,
  changes: { url?: string; types?: SubscribableType[]; rateLimitPerSecond?: number | null },
  { headers, clientCertificate, signing, oauth }: SealedChanges = {},
): Promise<RegistrationRow | undefined> {
  const { rateLimitPerSecond, ...fields } = changes;
  const rate = rateLimitPerSecond !== undefined && { rate_limit_per_second: rateLimitPerSecond };
  if (!headers && !clientCertificate && !signing && !oauth) {
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
        ...(signing && signingKeyColumns(newSigningKeys(signing.secretBox, current.id, signing.scheme))),
        ...(oauth && oauthColumns(oauth.value && sealOAuthClient(oauth.secretBox, current.id, oauth.value))),
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

type SigningKeyColumns = Pick<
  RegistrationRow,
  | 'signatureScheme'
  | 'signingKeySealed'
  | 'signingPublicKey'
  | 'previousSigningKeySealed'
  | 'previousSigningPublicKey'
  | 'previousSigningKeyExpiresAt'
>;

/** The signing columns of a scheme just chosen: v1a a new key pair sealed to the row, v1 none; no previous pair. */
function newSigningKeys(secretBox: SecretBox, registrationId: string, scheme: SignatureScheme): SigningKeyColumns {
  const pair = scheme === 'v1a' ? generateSigningKeyPair() : undefined;
  return {
    signatureScheme: scheme,
    signingKeySealed: pair ? secretBox.seal(pair.privateKeyPem, registrationSigningKeyAad(registrationId)) : null,
    signingPublicKey: pair?.publicKey ?? null,
    previousSigningKeySealed: null,
    previousSigningPublicKey: null,
    previousSigningKeyExpiresAt: null,
  };
}

function signingKeyColumns(k: SigningKeyColumns) {
  return {
    signature_scheme: k.signatureScheme,
    signing_key_sealed: k.signingKeySealed,
    signing_public_key: k.signingPublicKey,
    previous_signing_key_sealed: k.previousSigningKeySealed,
    previous_signing_public_key: k.previousSigningPublicKey,
    previous_signing_key_expires_at: k.previousSigningKeyExpiresAt,
  };
}

/** The columns of an OAuth client, or of none. */
function oauthColumns(oauth: StoredOAuthClient | null) {
  return {
    oauth_token_url: oauth?.tokenUrl ?? null,
    oauth_client_id: oauth?.clientId ?? null,
    oauth_client_authentication: oauth?.clientAuthentication ?? null,
    oauth_scope: oauth?.scope ?? null,
    oauth_key_id: oauth?.keyId ?? null,
    oauth_credential_sealed: oauth?.credentialSealed ?? null,
  };
}

/** A checked OAuth client as stored: its secret or key sealed to the registration's row. */
function sealOAuthClient(secretBox: SecretBox, registrationId: string, { info, credential }: OAuthClientChange) {
  return { ...info, credentialSealed: secretBox.seal(credential, registrationOAuthCredentialAad(registrationId)) };
}

/** A registration's OAuth client secret or private key (PEM), opened. Throws when it cannot be. */
export function openOAuthCredential(
  secretBox: SecretBox,
  row: Pick<RegistrationRow, 'id'> & { oauth: StoredOAuthClient },
): string {
  return secretBox.open(row.oauth.credentialSealed, registrationOAuthCredentialAad(row.id));
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

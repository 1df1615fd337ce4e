import type { Knex } from 'knex';
import * as store from '../../db';
import type { SecretBox } from '../../common/crypto/secrets';
import type { SendTestEvent } from './test-event';
import { recheckPortalLink } from '../auth/authenticate';
import { auditedUrl, recordAudit, withAuditBeforeEffect } from '../http/audited-actions';
import {
  InvalidRequestError,
  NotMemberError,
  ProjectNotFoundError,
  ProjectPurgingError,
  RegistrationExistsError,
  SignatureSchemeConflictError,
  RegistrationNotFoundError,
  TestDeliveryFailedError,
  WebhookPausedError,
  type FieldError,
} from '../http/errors';
import { certificateInfo, oauthClient } from '../http/validation';
import {
  DEFAULT_OVERLAP_SECONDS,
  type RateLimit,
  type RegisterWebhookBody,
  type RotateSecretBody,
  type UpdateWebhookBody,
} from './schemas';
import type { ClientCertificateInfo, ClientCertificateUpload } from '../../common/registration/client-certificate';
import type { SubscribableType } from '../../common/contract';
import type { CustomHeaders } from '../../common/registration/custom-headers';
import type { OAuthClientInfo } from '../../common/registration/oauth-client';
import { sameOrigin } from '../../common/registration/webhook-url';
import type { SignatureScheme } from '../../common/crypto/signature';

export interface RegistrationDeps {
  db: Knex;
  secretBox: SecretBox;
  sendTestEvent: SendTestEvent;
}

/** A registration as the API shows it; the signing secret only appears in the register response. */
export interface RegistrationView {
  _id: string;
  projectId: string;
  url: string;
  types: string[];
  /** The names of the custom headers sent with every delivery; their values are never shown. */
  headerNames: string[];
  /**
   * While a pause holds the deliveries: when it began and when it ends by itself; null otherwise. A hold the receiver's
   * 410 began has `pausedAt` (when the 410 came) and no end (`pausedUntil` null): it lasts until a member resumes.
   */
  pausedAt: string | null;
  pausedUntil: string | null;
  /** Why the deliveries are held: `member` (a member's or a manage link's pause), `gone` (the receiver answered 410). */
  pauseReason: 'member' | 'gone' | null;
  /** Until when the receiver asked to be left alone (429, 502, 503, 504): no delivery is attempted before; null. */
  slowedUntil: string | null;
  /** The client certificate presented to the receiver (mutual TLS): subject, expiry, fingerprint; never the key. */
  clientCertificate: ClientCertificateView | null;
  /** `v1` (HMAC) or `v1a` (Ed25519 beside HMAC). */
  signatureScheme: SignatureScheme;
  /** Under v1a, the Ed25519 public key receivers verify with (whpk_…); null under v1. Its private key is never shown. */
  publicKey: string | null;
  /** The public key a rotation replaced, while it still signs, and when it stops; both null otherwise. */
  previousPublicKey: string | null;
  previousPublicKeyExpiresAt: string | null;
  /** The OAuth client whose bearer token every delivery carries: token URL, client id, method, scope; never the secret. */
  oauth: OAuthClientInfo | null;
  /** The most deliveries a second the receiver is sent; null: unlimited. */
  rateLimit: RateLimit | null;
  createdAt: string;
  updatedAt: string;
}

export interface ClientCertificateView {
  subject: string;
  notAfter: string;
  fingerprint: string;
}

/** What the API and the audit trail show of a stored certificate: never its key. */
const certificateView = (c: ClientCertificateInfo | null): ClientCertificateView | null =>
  c && { subject: c.subject, notAfter: c.notAfter.toISOString(), fingerprint: c.fingerprint };

/** What the API and the audit trail show of a stored OAuth client: never its secret or key. */
const oauthView = (o: OAuthClientInfo | null): OAuthClientInfo | null =>
  o && {
    tokenUrl: o.tokenUrl,
    clientId: o.clientId,
    clientAuthentication: o.clientAuthentication,
    scope: o.scope,
    keyId: o.keyId,
  };
const rateLimitView = (perSecond: number | null): RateLimit | null => (perSecond === null ? null : { perSecond });

/** A rotation's answer: the new secret (shown once) and when the replaced one stops signing deliveries. */
export interface RotatedSecretView {
  secret: string;
  previousSecretExpiresAt: string;
}

/** A key pair's rotation: the new public key, and the replaced one while it keeps signing. */
export interface RotatedSigningKeyView {
  publicKey: string;
  previousPublicKey: string | null;
  previousPublicKeyExpiresAt: string;
}

export interface TestDeliveryView {
  delivered: true;
  statusCode: number;
  durationMs: number;
  workflowId: string;
}

export const view = (row: store.RegistrationRow): RegistrationView => ({
  _id: row.id,
  projectId: row.projectId,
  url: row.url,
  types: row.types,
  headerNames: row.customHeaderNames,
  // A pause past its end is over, whether or not the worker's sweep has cleared it yet.
  pausedAt: store.isPaused(row) ? row.pausedAt!.toISOString() : null,
  pausedUntil: store.isPaused(row) ? (row.pausedUntil?.toISOString() ?? null) : null,
  pauseReason: store.isPaused(row) ? (row.pauseReason ?? 'member') : null,
  slowedUntil: row.slowedUntil && row.slowedUntil.getTime() > Date.now() ? row.slowedUntil.toISOString() : null,
  clientCertificate: certificateView(row.clientCertificate),
  signatureScheme: row.signatureScheme,
  publicKey: row.signingPublicKey,
  ...previousPublicKeyView(row),
  oauth: oauthView(row.oauth),
  rateLimit: rateLimitView(row.rateLimitPerSecond),
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});

/** A replaced public key while its overlap lasts; one past its end no longer signs, erased or not yet. */
function previousPublicKeyView(row: store.RegistrationRow) {
  const expiresAt = row.previousSigningKeyExpiresAt;
  const live = row.previousSigningPublicKey !== null && expiresAt !== null && expiresAt.getTime() > Date.now();
  return {
    previousPublicKey: live ? row.previousSigningPublicKey : null,
    previousPublicKeyExpiresAt: live ? expiresAt.toISOString() : null,
  };
}

export const noWebhook = (projectId: string) =>
  new RegistrationNotFoundError(`No webhook is registered for project ${projectId}`);

/** A project being purged takes no new or changed registration (409 naming the purge). */
async function refuseWhilePurging(db: Knex, projectId: string): Promise<void> {
  const purge = await store.unfinishedPurge(db, projectId);
  if (purge) throw new ProjectPurgingError(projectId, purge.id);
}

/** The project exists (else 404) and the user is one of its members (else 403), in that order. */
export async function assertMember(db: Knex, projectId: string, userId: string): Promise<void> {
  const access = await store.projectAccess(db, projectId, userId);
  if (!access.projectExists) throw new ProjectNotFoundError(projectId);
  if (!access.isMember) throw new NotMemberError();
}

export async function registerWebhook(
  deps: RegistrationDeps,
  userId: string,
  body: RegisterWebhookBody,
  actor: store.AuditActor,
): Promise<RegistrationView & { secret: string }> {
  await assertMember(deps.db, body.projectId, userId);
  await refuseWhilePurging(deps.db, body.projectId);
  const created = await deps.db.transaction(async (trx) => {
    const made = await store.createRegistration(trx, deps.secretBox, {
      projectId: body.projectId,
      url: body.url,
      types: body.types,
      rateLimitPerSecond: body.rateLimit?.perSecond ?? null,
      ...(body.headers && { headers: body.headers }),
      ...(body.clientCertificate && {
        clientCertificate: { upload: body.clientCertificate, info: certificateInfo(body.clientCertificate) },
      }),
      ...(body.signatureScheme && { signatureScheme: body.signatureScheme }),
      ...(body.oauth && { oauth: oauthClient(body.oauth) }),
    });
    // The unique constraint decides between concurrent registrations.
    if (!made) throw new RegistrationExistsError();
    await recordAudit(trx, actor, {
      action: 'webhook.register',
      projectId: body.projectId,
      registrationId: made.row.id,
      // The secret is revealed once, in this response: recorded as revealed, never its value. Headers by name only.
      changes: {
        url: { after: auditedUrl(made.row.url) },
        types: { after: made.row.types },
        ...(made.row.customHeaderNames.length > 0 && { headers: { after: made.row.customHeaderNames } }),
        ...(made.row.clientCertificate && {
          clientCertificate: { after: certificateView(made.row.clientCertificate) },
        }),
        // The scheme always; the public key is no secret: the trail shows which one receivers were given.
        signatureScheme: { after: made.row.signatureScheme },
        ...(made.row.signingPublicKey && { publicKey: { after: made.row.signingPublicKey } }),
        ...(made.row.oauth && { oauth: { after: oauthView(made.row.oauth) } }),
        ...(made.row.rateLimitPerSecond !== null && {
          rateLimit: { after: rateLimitView(made.row.rateLimitPerSecond) },
        }),
        secretRevealed: true,
      },
    });
    return made;
  });
  return { ...view(created.row), secret: created.secret };
}

export async function updateWebhook(
  deps: RegistrationDeps,
  userId: string,
  body: UpdateWebhookBody,
  actor: store.AuditActor,
): Promise<RegistrationView> {
  await assertMember(deps.db, body.projectId, userId);
  await refuseWhilePurging(deps.db, body.projectId);
  await recheckPortalLink();
  return deps.db.transaction(async (trx) => {
    // Locked: the URL and types before are the ones this update replaces, whatever runs beside it.
    const before = await store.findRegistration(trx, body.projectId, { forUpdate: true });
    if (!before) throw new RegistrationNotFoundError('Must register webhook before updating it');
    refuseCredentialsLeavingOrigin(before, body);
    const asked = changesAsked(before, body);
    // Nothing differs from what is stored: nothing is written, not even updated_at or a row of the trail.
    if (Object.keys(asked).length === 0) return view(before);
    const changes = {
      ...(asked.url !== undefined && { url: asked.url }),
      ...(asked.types && { types: asked.types }),
      ...(asked.rateLimitPerSecond !== undefined && { rateLimitPerSecond: asked.rateLimitPerSecond }),
    };
    const headers = asked.headers && { secretBox: deps.secretBox, values: asked.headers };
    const upload = asked.clientCertificate;
    const clientCertificate = upload !== undefined && {
      secretBox: deps.secretBox,
      value: upload && { upload, info: certificateInfo(upload) },
    };
    const signing = asked.signatureScheme && { secretBox: deps.secretBox, scheme: asked.signatureScheme };
    const oauth = asked.oauth !== undefined && {
      secretBox: deps.secretBox,
      value: asked.oauth && oauthClient(asked.oauth),
    };
    const row = await store.updateRegistration(trx, body.projectId, changes, {
      headers,
      clientCertificate: clientCertificate || undefined,
      signing: signing || undefined,
      oauth: oauth || undefined,
    });
    if (!row) throw new RegistrationNotFoundError('Must register webhook before updating it');
    await recordAudit(trx, actor, {
      action: 'webhook.update',
      projectId: body.projectId,
      registrationId: row.id,
      changes: {
        // The origin and a digest: a path or query often carries a capability, and the trail keeps rows for years.
        ...(changes.url !== undefined && { url: { before: auditedUrl(before.url), after: auditedUrl(row.url) } }),
        ...(changes.types !== undefined && { types: { before: before.types, after: row.types } }),
        ...(changes.rateLimitPerSecond !== undefined && {
          rateLimit: { before: rateLimitView(before.rateLimitPerSecond), after: rateLimitView(row.rateLimitPerSecond) },
        }),
        // Values are sealed and never recorded: the names before and after say what was set, replaced or removed.
        ...(headers && { headers: { before: before.customHeaderNames, after: row.customHeaderNames } }),
        // The certificate by subject, expiry and fingerprint; its key never.
        ...(clientCertificate && {
          clientCertificate: {
            before: certificateView(before.clientCertificate),
            after: certificateView(row.clientCertificate),
          },
        }),
        // The scheme and the public key receivers verify with (a new pair for v1a, none for v1); a private key never.
        ...(signing && {
          signatureScheme: { before: before.signatureScheme, after: row.signatureScheme },
          publicKey: { before: before.signingPublicKey, after: row.signingPublicKey },
        }),
        // The client by token URL, id, method and scope; its secret or key never (replaced: the same facts may show).
        ...(oauth && { oauth: { before: oauthView(before.oauth), after: oauthView(row.oauth) } }),
      },
    });
    return view(row);
  });
}

/**
 * Custom headers, a client certificate and an OAuth client's bearer token are credentials of the receiver's origin: a
 * URL moved to another origin (scheme, host, port) must restate or remove them, or the gateway's key would go to
 * whoever holds the new origin.
 */
function refuseCredentialsLeavingOrigin(before: store.RegistrationRow, body: UpdateWebhookBody): void {
  if (body.url === undefined || sameOrigin(before.url, body.url)) return;
  const errors: FieldError[] = [];
  if (before.customHeaderNames.length > 0 && body.headers === undefined)
    errors.push({
      pointer: '/headers',
      detail:
        'must be given again (or {} to remove them) when the url moves to another origin: the custom headers ' +
        `(${before.customHeaderNames.join(', ')}) were set for ${new URL(before.url).origin} only`,
    });
  if (before.clientCertificate && body.clientCertificate === undefined)
    errors.push({
      pointer: '/clientCertificate',
      detail:
        'must be given again (or null to remove it) when the url moves to another origin: the client certificate ' +
        `was set for ${new URL(before.url).origin} only`,
    });
  if (before.oauth && body.oauth === undefined)
    errors.push({
      pointer: '/oauth',
      detail:
        'must be given again (or null to remove it) when the url moves to another origin: the OAuth client’s tokens ' +
        `were sent to ${new URL(before.url).origin} only`,
    });
  if (errors.length > 0) throw new InvalidRequestError(errors);
}

/**
 * The fields of an update that differ from the stored registration; the others would change nothing. Sealed values are
 * never compared (whether a write happened would tell a caller that guessed them): headers given are written anew,
 * unless none is given for none stored; a certificate is the same when its PEM is (its key was checked to be its own);
 * an OAuth client given is written anew (its secret is sealed), unless null for none stored.
 */
function changesAsked(before: store.RegistrationRow, body: UpdateWebhookBody) {
  const sameTypes = (types: string[]) =>
    types.length === before.types.length && types.every((type) => before.types.includes(type as SubscribableType));
  const sameHeaders = (headers: CustomHeaders) =>
    Object.keys(headers).length === 0 && before.customHeaderNames.length === 0;
  const sameCertificate = (upload: ClientCertificateUpload | null) =>
    upload === null || before.clientCertificate === null
      ? upload === before.clientCertificate
      : upload.certificate === before.clientCertificate.pem;
  const rateLimitPerSecond = body.rateLimit === undefined ? undefined : (body.rateLimit?.perSecond ?? null);
  return {
    ...(body.url !== undefined && body.url !== before.url && { url: body.url }),
    ...(rateLimitPerSecond !== undefined && rateLimitPerSecond !== before.rateLimitPerSecond && { rateLimitPerSecond }),
    ...(body.types && !sameTypes(body.types) && { types: body.types }),
    ...(body.headers && !sameHeaders(body.headers) && { headers: body.headers }),
    ...(body.clientCertificate !== undefined &&
      !sameCertificate(body.clientCertificate) && { clientCertificate: body.clientCertificate }),
    ...(body.signatureScheme !== undefined &&
      body.signatureScheme !== before.signatureScheme && { signatureScheme: body.signatureScheme }),
    ...(body.oauth !== undefined && !(body.oauth === null && before.oauth === null) && { oauth: body.oauth }),
  };
}

export async function getWebhook(deps: RegistrationDeps, userId: string, projectId: string): Promise<RegistrationView> {
  await assertMember(deps.db, projectId, userId);
  const row = await store.findRegistration(deps.db, projectId);
  if (!row) throw noWebhook(projectId);
  return view(row);
}

export async function deleteWebhook(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
  actor: store.AuditActor,
): Promise<void> {
  await assertMember(deps.db, projectId, userId);
  await deps.db.transaction(async (trx) => {
    const deleted = await store.removeRegistration(trx, projectId);
    if (!deleted) throw noWebhook(projectId);
    await recordAudit(trx, actor, {
      action: 'webhook.delete',
      projectId,
      registrationId: deleted.id,
      changes: { url: { before: auditedUrl(deleted.url) }, types: { before: deleted.types } },
    });
  });
}

/** Replaces the project's signing secret; the replaced one keeps signing beside it for the overlap. */
export async function rotateWebhookSecret(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
  body: RotateSecretBody,
  actor: store.AuditActor,
): Promise<RotatedSecretView> {
  await assertMember(deps.db, projectId, userId);
  const overlapSeconds = body.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS;
  await recheckPortalLink();
  const rotated = await deps.db.transaction(async (trx) => {
    const done = await store.rotateRegistrationSecret(trx, deps.secretBox, projectId, overlapSeconds);
    if (!done) throw noWebhook(projectId);
    await recordAudit(trx, actor, {
      action: 'webhook.secret.rotate',
      projectId,
      registrationId: done.registrationId,
      changes: {
        overlapSeconds,
        previousSecretExpiresAt: done.previousSecretExpiresAt.toISOString(),
        secretRevealed: true,
      },
    });
    return done;
  });
  return { secret: rotated.secret, previousSecretExpiresAt: rotated.previousSecretExpiresAt.toISOString() };
}

/**
 * Replaces the Ed25519 key pair of a v1a webhook; the replaced pair keeps signing beside it for the overlap, and its
 * public key is shown until then. A v1 webhook has no pair to rotate (409).
 */
export async function rotateWebhookSigningKey(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
  body: RotateSecretBody,
  actor: store.AuditActor,
): Promise<RotatedSigningKeyView> {
  await assertMember(deps.db, projectId, userId);
  const overlapSeconds = body.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS;
  await recheckPortalLink();
  const rotated = await deps.db.transaction(async (trx) => {
    // Locked: the scheme read is the one the rotation applies to, and the public key before is the one replaced.
    const before = await store.findRegistration(trx, projectId, { forUpdate: true });
    if (!before) throw noWebhook(projectId);
    const done =
      before.signatureScheme === 'v1a'
        ? await store.rotateRegistrationSigningKey(trx, deps.secretBox, before.id, overlapSeconds)
        : undefined;
    if (!done) throw new SignatureSchemeConflictError();
    await recordAudit(trx, actor, {
      action: 'webhook.signing-key.rotate',
      projectId,
      registrationId: before.id,
      changes: {
        overlapSeconds,
        publicKey: { before: before.signingPublicKey, after: done.publicKey },
        previousPublicKeyExpiresAt: done.previousPublicKeyExpiresAt.toISOString(),
      },
    });
    return done;
  });
  return {
    publicKey: rotated.publicKey,
    previousPublicKey: rotated.previousPublicKey,
    previousPublicKeyExpiresAt: rotated.previousPublicKeyExpiresAt.toISOString(),
  };
}

/** Sends one TEST event through the delivery pipeline; a receiver that does not acknowledge it is a 502. */
export async function testWebhook(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
  actor: store.AuditActor,
): Promise<TestDeliveryView> {
  await assertMember(deps.db, projectId, userId);
  const registration = await store.findRegistration(deps.db, projectId);
  if (!registration) throw noWebhook(projectId);
  if (store.isPaused(registration)) throw new WebhookPausedError();
  // The attempt itself is in Temporal (and the delivery log): the trail records the request once the test limits
  // have admitted it, right before it is sent (afterAuditRecord in the app).
  const outcome = await withAuditBeforeEffect(
    () => recordAudit(deps.db, actor, { action: 'webhook.test', projectId, registrationId: registration.id }),
    () => deps.sendTestEvent(projectId),
  );
  if (!outcome.delivered) {
    throw new TestDeliveryFailedError(`The receiver did not acknowledge the TEST event: ${outcome.reason}`, {
      workflowId: outcome.workflowId,
      ...(outcome.category !== undefined && { category: outcome.category }),
      ...(outcome.statusCode !== undefined && { statusCode: outcome.statusCode }),
    });
  }
  const { delivered, statusCode, durationMs, workflowId } = outcome;
  return { delivered, statusCode, durationMs, workflowId };
}

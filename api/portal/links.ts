import type { Knex } from 'knex';
import * as store from '../../db';
import { assertMember } from '../webhooks/registrations';
import { portalLinkId, recordAudit } from '../http/audited-actions';
import { compileBody } from '../http/validation';
import { ApiError } from '../http/errors';
import { queuePauseEnded, whoActed } from '../webhooks/pause';
import { PORTAL_CAPABILITIES, type PortalCapability, type PortalTokens } from '../auth/portal-tokens';

/** What the portal-session routes need: the database, the link signer, and the base of the links' URL. */
export interface PortalDeps {
  db: Knex;
  portalTokens: PortalTokens;
  /** PUBLIC_BASE_URL: where customers reach this API (required in production); unset, this server on loopback. */
  publicBaseUrl?: string;
  /** PORTAL_LINKS_PER_PROJECT: live links a project may hold (default 50). */
  linksPerProject?: number;
}

export const DEFAULT_PORTAL_LINKS_PER_PROJECT = 50;

/** The project holds as many live links as it may: one more is refused until some expire or all are revoked. */
export class PortalLinkLimitError extends ApiError {
  constructor(limit: number) {
    super(
      409,
      `This project already has ${limit} live portal links, the most PORTAL_LINKS_PER_PROJECT allows: wait for ` +
        'some to expire, or revoke them all (DELETE …/portal-sessions), before making another',
    );
  }
}

export const MIN_PORTAL_LINK_SECONDS = 60;
export const MAX_PORTAL_LINK_SECONDS = 604_800;
/** A manage link can rotate and receive the signing secret: it lives a day at most (a read link a week). */
export const MAX_MANAGE_LINK_SECONDS = 86_400;
export const DEFAULT_PORTAL_LINK_SECONDS = 3_600;

export const portalSessionBodySchema = {
  type: 'object',
  properties: {
    expiresInSeconds: {
      type: 'integer',
      minimum: MIN_PORTAL_LINK_SECONDS,
      maximum: MAX_PORTAL_LINK_SECONDS,
      default: DEFAULT_PORTAL_LINK_SECONDS,
      description:
        'How long the link works, in seconds: a minute to a day for a link that may manage (the default ' +
        'capabilities), to a week for a read-only link.',
    },
    capabilities: {
      description:
        '`read` shows the endpoint and the delivery log; `manage` also lets the holder act on them, and needs `read`. ' +
        'In either order; each at most once.',
      enum: [['read'], ['read', 'manage'], ['manage', 'read']],
      default: ['read', 'manage'],
    },
  },
  additionalProperties: false,
  // Unless the link is read-only (capabilities given, without manage), it lives a day at most.
  if: {
    required: ['capabilities'],
    properties: { capabilities: { type: 'array', not: { contains: { const: 'manage' } } } },
  },
  else: { properties: { expiresInSeconds: { type: 'integer', maximum: MAX_MANAGE_LINK_SECONDS } } },
} as const;

export interface PortalSessionBody {
  expiresInSeconds?: number;
  capabilities?: PortalCapability[];
}

export interface PortalSessionView {
  url: string;
  token: string;
  expiresAt: string;
}

const validatePortalSessionBody = compileBody<PortalSessionBody>(portalSessionBodySchema);

/** A member makes a link to the project's portal; the token travels in the URL's fragment, never to a server. */
export async function createPortalSession(
  deps: PortalDeps,
  userId: string,
  projectId: string,
  body: unknown,
  /** Where the link points without PUBLIC_BASE_URL: this server on loopback, never the request's Host header. */
  fallbackOrigin: string,
  actor: store.AuditActor,
): Promise<PortalSessionView> {
  await assertMember(deps.db, projectId, userId);
  // After membership: a non-member learns nothing from the validation either.
  const { expiresInSeconds = DEFAULT_PORTAL_LINK_SECONDS, capabilities: asked = [...PORTAL_CAPABILITIES] } =
    validatePortalSessionBody(body ?? {});
  // One order in every token, whichever the member wrote.
  const capabilities = PORTAL_CAPABILITIES.filter((capability) => asked.includes(capability));
  const { token, expiresAt } = await deps.db.transaction(async (trx) => {
    const state = await store.portalLinkState(trx, projectId, userId);
    // The link is bound to this membership: a removal in between makes a link that never works.
    const membership = state?.memberSince ?? '';
    const generation = state?.generation ?? 0;
    const signed = deps.portalTokens.sign(
      { projectId, capabilities, createdBy: userId, membership, generation },
      expiresInSeconds,
    );
    // The link's id is a digest of its token, the id its requests are recorded under; the token is never written.
    const id = portalLinkId(signed.token);
    const limit = deps.linksPerProject ?? DEFAULT_PORTAL_LINKS_PER_PROJECT;
    if (!(await store.addPortalLink(trx, { id, projectId, generation, expiresAt: signed.expiresAt }, limit)))
      throw new PortalLinkLimitError(limit);
    await recordAudit(trx, actor, {
      action: 'portal-link.create',
      projectId,
      changes: {
        portalLinkId: id,
        capabilities,
        generation,
        expiresAt: signed.expiresAt.toISOString(),
      },
    });
    return signed;
  });
  const base = (deps.publicBaseUrl ?? fallbackOrigin).replace(/\/+$/, '');
  return { url: `${base}/portal#token=${token}`, token, expiresAt: expiresAt.toISOString() };
}

/** Revokes every link of the project made so far, whoever made it. */
export async function revokePortalSessions(
  deps: PortalDeps,
  userId: string,
  projectId: string,
  actor: store.AuditActor,
): Promise<void> {
  await assertMember(deps.db, projectId, userId);
  await deps.db.transaction(async (trx) => {
    await store.revokePortalLinks(trx, projectId);
    const generation = await store.portalLinkGeneration(trx, projectId);
    // A pause a link started ends with the links: it must not go on holding falls for a holder who is shut out.
    const resumed = await store.endPortalLinkPause(trx, projectId);
    const ended = resumed?.ended;
    await recordAudit(trx, actor, {
      action: 'portal-link.revoke',
      projectId,
      changes: {
        generation,
        ...(ended && {
          endedPause: {
            pausedAt: ended.pausedAt.toISOString(),
            pausedUntil: ended.pausedUntil?.toISOString() ?? null,
            heldDeliveries: resumed.held,
          },
        }),
      },
    });
    if (ended)
      await queuePauseEnded(
        trx,
        projectId,
        ended,
        resumed.held,
        `the revocation of the portal links by ${whoActed(actor)}`,
      );
  });
}

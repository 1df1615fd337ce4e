import { hkdfSync, randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { SecretKey } from '../../common/crypto/secrets';
import { UnauthorizedError } from '../http/errors';

/** What a portal link lets its holder do: `read` the endpoint and the delivery log, `manage` act on them too. */
export type PortalCapability = 'read' | 'manage';
export const PORTAL_CAPABILITIES: readonly PortalCapability[] = ['read', 'manage'];

/** A verified portal link: one project, its capabilities, the member who made it, and its link generation. */
export interface PortalGrant {
  projectId: string;
  capabilities: PortalCapability[];
  /** The member who made the link: the link acts for them, so it stops working when they leave the project. */
  createdBy: string;
  /** When the creator became a member (their membership's created_at): removed and added again, the link stays dead. */
  membership: string;
  generation: number;
  iat: number;
  exp: number;
}

/** Signs and verifies portal links' tokens with a key ring: the first key signs, every key verifies (by `kid`). */
export interface PortalTokens {
  sign(grant: Omit<PortalGrant, 'iat' | 'exp'>, expiresInSeconds: number): { token: string; expiresAt: Date };
  /** The grant of a valid token; an UnauthorizedError for a forged, expired or malformed one. */
  verify(token: string): PortalGrant;
}

/** The JWT `typ` of a portal token: how the API tells it from a member's token before verifying either. */
export const PORTAL_TOKEN_TYPE = 'webhook-portal+jwt';
const AUDIENCE = 'webhook-portal';
/** HKDF's info: the portal's keys are derived for this purpose alone and sign nothing else. */
const HKDF_INFO = 'webhook-service portal link signing v1';

/**
 * The portal's signing keys, derived by HKDF-SHA256 from the at-rest key ring (WEBHOOK_SECRET_KEYS): no new secret to
 * configure, and the API holds a key of its own even when it verifies members with an identity provider's JWKS.
 * Each derived key keeps its ring id, so a link signed before the ring rotated verifies while that key stays listed.
 */
export function portalSigningKeys(ring: SecretKey[]): SecretKey[] {
  return ring.map(({ id, key }) => ({ id, key: Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), HKDF_INFO, 32)) }));
}

/** Whether a bearer token claims to be a portal token (its signature is checked by verify). */
export function isPortalToken(token: string): boolean {
  const header = jwt.decode(token, { complete: true })?.header as { typ?: unknown } | undefined;
  return header?.typ === PORTAL_TOKEN_TYPE;
}

const INVALID = 'This portal link has expired or is not valid; ask for a new one';

export function createPortalTokens(keys: SecretKey[]): PortalTokens {
  if (keys.length === 0) throw new Error('the portal signing key ring is empty');
  const signing = keys[0]!;
  const byId = new Map(keys.map(({ id, key }) => [id, key]));
  return {
    sign(grant, expiresInSeconds) {
      const claims = { prj: grant.projectId, cap: grant.capabilities, gen: grant.generation, mbr: grant.membership };
      const token = jwt.sign(claims, signing.key, {
        algorithm: 'HS256',
        keyid: signing.id,
        header: { alg: 'HS256', typ: PORTAL_TOKEN_TYPE },
        audience: AUDIENCE,
        subject: grant.createdBy,
        expiresIn: expiresInSeconds,
        // Its own id, so two links made alike in the same second are two tokens, with two ids in the audit trail.
        jwtid: randomUUID(),
      });
      const { exp } = jwt.decode(token) as { exp: number };
      return { token, expiresAt: new Date(exp * 1000) };
    },
    verify(token) {
      const kid = jwt.decode(token, { complete: true })?.header.kid;
      const key = kid === undefined ? undefined : byId.get(kid);
      if (!key) throw new UnauthorizedError(INVALID);
      let claims: jwt.JwtPayload;
      try {
        claims = jwt.verify(token, key, { algorithms: ['HS256'], audience: AUDIENCE }) as jwt.JwtPayload;
      } catch {
        throw new UnauthorizedError(INVALID);
      }
      const { prj, cap, gen, mbr, sub, iat, exp } = claims as Record<string, unknown>;
      const capabilities = Array.isArray(cap) ? cap : [];
      if (
        typeof prj !== 'string' ||
        typeof sub !== 'string' ||
        typeof mbr !== 'string' ||
        !Number.isSafeInteger(gen) ||
        typeof iat !== 'number' ||
        typeof exp !== 'number' ||
        capabilities.length === 0 ||
        !capabilities.every((c) => (PORTAL_CAPABILITIES as unknown[]).includes(c))
      )
        throw new UnauthorizedError(INVALID);
      return {
        projectId: prj,
        capabilities: capabilities as PortalCapability[],
        createdBy: sub,
        membership: mbr,
        generation: gen as number,
        iat,
        exp,
      };
    },
  };
}

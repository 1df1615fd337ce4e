import { AsyncLocalStorage } from 'node:async_hooks';
import { createSecretKey } from 'node:crypto';
import type { Middleware, Next, ParameterizedContext } from 'koa';
import type { Knex } from 'knex';
import koaJwt from 'koa-jwt';
import { koaJwtSecret } from 'jwks-rsa';
import type { Config } from '../../common/config';
import { isSafeId, SAFE_ID_RULE } from '../../common/contract/ids';
import { ApiError, InvalidParameterError, InvalidRequestError, UnauthorizedError } from '../http/errors';
import { portalLinkState } from '../../db/portal-sessions';
import { isPortalToken, type PortalCapability, type PortalGrant, type PortalTokens } from './portal-tokens';

interface Claims {
  /** Checked when set. */
  issuer?: string;
  /** Any one of them (JWT_AUDIENCE lists them comma-separated). */
  audience?: string | string[];
}

/** How callers' bearer tokens are verified: a shared HS256 secret, or an identity provider's JWKS. */
export type AuthOptions =
  | ({ mode: 'secret'; secret: string } & Claims)
  | ({
      mode: 'jwks';
      jwksUri: string;
      /** Oldest accepted token by iat, seconds (default 1 h). */ maxAgeSeconds?: number;
    } & Claims);

/** JWT_MAX_AGE's default: an identity provider's token older than an hour is refused whatever its exp. */
export const DEFAULT_JWT_MAX_AGE_S = 3_600;

/** Algorithms are pinned per mode so a token cannot pick its own (no `none`, no HS/RS confusion). */
export const HS_ALGORITHMS = ['HS256'];
export const JWKS_ALGORITHMS = ['RS256', 'ES256'];

export function authOptionsFromConfig(
  config: Pick<Config, 'JWT_SECRET' | 'JWT_JWKS_URI' | 'JWT_ISSUER' | 'JWT_AUDIENCE'> &
    Partial<Pick<Config, 'JWT_MAX_AGE'>>,
): AuthOptions {
  // Several audiences: the API's own, and Temporal's, whose token the Temporal UI passes to the codec endpoint.
  const audiences = config.JWT_AUDIENCE?.split(',').map((audience) => audience.trim());
  const claims: Claims = {
    issuer: config.JWT_ISSUER,
    audience: audiences && audiences.length > 1 ? audiences : config.JWT_AUDIENCE,
  };
  if (config.JWT_SECRET) return { mode: 'secret', secret: config.JWT_SECRET, ...claims };
  if (config.JWT_JWKS_URI)
    return {
      mode: 'jwks',
      jwksUri: config.JWT_JWKS_URI,
      ...(config.JWT_MAX_AGE !== undefined && { maxAgeSeconds: config.JWT_MAX_AGE }),
      ...claims,
    };
  throw new Error('JWT_SECRET or JWT_JWKS_URI is required to authenticate API callers');
}

/** The verified token of the caller, as koa-jwt leaves it in ctx.state.user. */
export interface Caller {
  sub: string;
  exp: number;
  iat?: number;
}

/**
 * Verifies `Authorization: Bearer <JWT>`, requires `sub` and `exp`, and leaves the claims in ctx.state.user. A portal
 * link's token (given `portal`) is verified with the portal's keys and left in ctx.state.portal instead: it names no
 * user until a route's guard (portalGuard) has checked the route takes it.
 */
export function authenticate(options: AuthOptions, portal?: PortalTokens): Middleware {
  const verify = koaJwt({
    secret:
      options.mode === 'secret'
        ? // A KeyObject made once: given a string, jsonwebtoken rebuilds the key (and first tries it as a PEM) per request.
          (createSecretKey(Buffer.from(options.secret, 'utf8')) as unknown as Buffer)
        : koaJwtSecret({ jwksUri: options.jwksUri, cache: true, rateLimit: true, jwksRequestsPerMinute: 10 }),
    algorithms: options.mode === 'secret' ? HS_ALGORITHMS : JWKS_ALGORITHMS,
    issuer: options.issuer,
    audience: options.audience,
    key: 'user',
  });
  // Identity-provider tokens may live long; an hour-old one is refused whatever its exp (a leaked token dies sooner).
  const maxAgeSeconds = options.mode === 'jwks' ? (options.maxAgeSeconds ?? DEFAULT_JWT_MAX_AGE_S) : undefined;
  const requireClaims = async (state: { user?: unknown }, next: Next): Promise<void> => {
    const user = state.user as Partial<Caller> | undefined;
    if (typeof user?.exp !== 'number') throw new UnauthorizedError('The bearer token must carry an exp claim');
    if (typeof user.sub !== 'string' || user.sub === '')
      throw new UnauthorizedError('The bearer token must carry a sub claim');
    if (maxAgeSeconds !== undefined) {
      if (typeof user.iat !== 'number') throw new UnauthorizedError('The bearer token must carry an iat claim');
      if (Date.now() / 1000 - user.iat > maxAgeSeconds)
        throw new UnauthorizedError(`The bearer token is older than the ${maxAgeSeconds} s the API accepts`);
    }
    await next();
  };
  return async (ctx, next) => {
    const bearer = /^Bearer (\S+)$/i.exec(ctx.get('Authorization'))?.[1];
    if (portal && bearer !== undefined && isPortalToken(bearer)) {
      ctx.state.portal = portal.verify(bearer);
      await next();
      return;
    }
    await verify(ctx, () => requireClaims(ctx.state, next));
  };
}

class PortalForbiddenError extends ApiError {
  constructor(detail: string) {
    super(403, detail);
  }
}

type GuardContext = ParameterizedContext<{ user?: unknown; portal?: PortalGrant }, { params?: Record<string, string> }>;

const INVALID_LINK = 'This portal link has expired or is not valid; ask for a new one';

/** A link stands while its generation is the project's and its creator is still the member who made it. */
async function assertLinkStands(db: Knex, grant: PortalGrant): Promise<void> {
  const state = await portalLinkState(db, grant.projectId, grant.createdBy);
  if (state?.generation !== grant.generation || state.memberSince !== grant.membership)
    throw new UnauthorizedError(INVALID_LINK);
}

/** The current request's portal link check, for side effects that come after the guard (recheckPortalLink). */
const portalLinkCheck = new AsyncLocalStorage<() => Promise<void>>();

/**
 * Checks the current request's portal link again, right before a side effect (a send, a start, a write): a link
 * revoked, or whose creator left, while the request ran stops here with 401. A member's request passes.
 */
export async function recheckPortalLink(): Promise<void> {
  await portalLinkCheck.getStore()?.();
}

/** `effect`, run only once the current request's portal link has been checked again (recheckPortalLink). */
export function afterPortalRecheck<A extends unknown[], R>(effect: (...args: A) => Promise<R>) {
  return async (...args: A): Promise<R> => {
    await recheckPortalLink();
    return effect(...args);
  };
}

/**
 * The route guard that lets a portal link's token through: on its own project only, for a route its capabilities
 * allow, while its link generation is the project's and its creator the member who made it (removed and added again
 * is another membership). The request then acts as that member; recheckPortalLink repeats the check before each side
 * effect. A route without the guard refuses portal tokens (callerId).
 */
export function portalGuard(db: Knex) {
  return (
      capability: PortalCapability,
      /** Where the route names its project: the path's `:projectId` or the JSON body's `projectId`. */
      projectIn: 'path' | 'body' = 'path',
    ): Middleware<{ user?: unknown; portal?: PortalGrant }> =>
    async (ctx, next) => {
      const grant = ctx.state.portal;
      if (grant) {
        // Checked before the route's own validation: a malformed id is named as the route would name it.
        const requested =
          projectIn === 'path'
            ? (ctx as GuardContext).params?.projectId
            : (ctx.request as { body?: { projectId?: unknown } }).body?.projectId;
        if (!isSafeId(requested)) throw malformedProject(projectIn, requested);
        if (requested !== grant.projectId) throw new PortalForbiddenError('This portal link is for another project');
        if (!grant.capabilities.includes(capability))
          throw new PortalForbiddenError(`This portal link does not allow ${capability}: it is read-only`);
        await assertLinkStands(db, grant);
        ctx.state.user = { sub: grant.createdBy, exp: grant.exp, iat: grant.iat } satisfies Caller;
        await portalLinkCheck.run(() => assertLinkStands(db, grant), next);
        return;
      }
      await next();
    };
}

const malformedProject = (projectIn: 'path' | 'body', requested: unknown) =>
  projectIn === 'path'
    ? new InvalidParameterError('projectId', SAFE_ID_RULE)
    : new InvalidRequestError([
        {
          pointer: '/projectId',
          detail: requested === undefined ? "must have required property 'projectId'" : `must be ${SAFE_ID_RULE}`,
        },
      ]);

/** The user id of the authenticated caller; a portal token on a route whose guard does not take it is refused. */
export function callerId(state: { user?: unknown; portal?: unknown }): string {
  if (state.user === undefined && state.portal !== undefined)
    throw new PortalForbiddenError('A portal link does not give access to this route');
  return (state.user as Caller).sub;
}

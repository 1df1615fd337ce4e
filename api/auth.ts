import { createSecretKey } from 'node:crypto';
import type { Middleware, Next } from 'koa';
import koaJwt from 'koa-jwt';
import { koaJwtSecret } from 'jwks-rsa';
import type { Config } from '../common/config';
import { UnauthorizedError } from './errors';

interface Claims {
  /** Checked when set. */
  issuer?: string;
  audience?: string;
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
  const claims: Claims = { issuer: config.JWT_ISSUER, audience: config.JWT_AUDIENCE };
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

/** Verifies `Authorization: Bearer <JWT>`, requires `sub` and `exp`, and leaves the claims in ctx.state.user. */
export function authenticate(options: AuthOptions): Middleware {
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
    await verify(ctx, () => requireClaims(ctx.state, next));
  };
}

/** The user id of the authenticated caller. */
export const callerId = (state: { user?: unknown }): string => (state.user as Caller).sub;

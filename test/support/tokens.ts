// Bearer tokens for tests: valid, forged, expired and unsigned ones.
import { createHmac } from 'node:crypto';
import jwt from 'jsonwebtoken';

export const TEST_JWT_SECRET = 'test-jwt-secret-0123456789abcdef-0123456789';

export interface TokenOptions {
  secret?: string;
  expiresIn?: number;
  issuer?: string;
  audience?: string;
  /** Extra or overriding claims. */
  claims?: Record<string, unknown>;
}

/** An HS256 token for `sub`, valid for an hour unless told otherwise. */
export function hsToken(sub: string, options: TokenOptions = {}): string {
  return jwt.sign({ sub, ...options.claims }, options.secret ?? TEST_JWT_SECRET, {
    algorithm: 'HS256',
    expiresIn: options.expiresIn ?? 3600,
    ...(options.issuer && { issuer: options.issuer }),
    ...(options.audience && { audience: options.audience }),
  });
}

/** A token whose exp passed `secondsAgo` seconds ago, correctly signed. */
export function expiredHsToken(sub: string, secondsAgo = 60, secret = TEST_JWT_SECRET): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign({ sub, iat: now - 3600, exp: now - secondsAgo }, secret, { algorithm: 'HS256' });
}

/** A correctly signed HS256 token without an exp claim. */
export function hsTokenWithoutExp(sub: string, secret = TEST_JWT_SECRET): string {
  return jwt.sign({ sub }, secret, { algorithm: 'HS256' });
}

const b64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** An `alg: none` token: header and claims, empty signature. */
export function unsignedToken(sub: string): string {
  const now = Math.floor(Date.now() / 1000);
  return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ sub, iat: now, exp: now + 3600 })}.`;
}

/** A token signed with HMAC-SHA256 keyed by arbitrary bytes (e.g. a public key PEM: the HS/RS confusion). */
export function hsTokenWithKey(sub: string, key: string | Buffer, header: Record<string, unknown> = {}): string {
  const now = Math.floor(Date.now() / 1000);
  const unsigned = `${b64url({ alg: 'HS256', typ: 'JWT', ...header })}.${b64url({ sub, iat: now, exp: now + 3600 })}`;
  // jsonwebtoken refuses to HMAC with a PEM key, so sign by hand as an attacker would.
  return `${unsigned}.${createHmac('sha256', key).update(unsigned).digest('base64url')}`;
}

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

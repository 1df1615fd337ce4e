// A registration's OAuth 2.0 client (RFC 6749 section 4.4, client credentials): the rules the API checks on upload
// and the client assertion the worker signs for private_key_jwt (RFC 7523, as SMART Backend Services use it). The
// client secret or private key is sealed at rest like the signing secret and never shown again.
import { createPrivateKey, randomUUID, sign, type KeyObject } from 'node:crypto';
import { HTTPS_REQUIRED, parseWebhookUrl, refusedScheme, type WebhookUrlPolicy } from './webhook-url';

/** How the client proves itself to the token endpoint (OAuth's token_endpoint_auth_method names). */
export const OAUTH_CLIENT_AUTHENTICATIONS = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const;
export type OAuthClientAuthentication = (typeof OAUTH_CLIENT_AUTHENTICATIONS)[number];

export const MAX_OAUTH_CLIENT_ID_LENGTH = 256;
export const MAX_OAUTH_CLIENT_SECRET_LENGTH = 1024;
export const MAX_OAUTH_SCOPE_LENGTH = 1024;
export const MAX_OAUTH_KEY_ID_LENGTH = 256;
/** A 4096-bit RSA key in PEM fits with room. */
export const MAX_OAUTH_PRIVATE_KEY_LENGTH = 16_384;
/** Visible ASCII (client ids, secrets, key ids): nothing a form or a header would have to escape beyond that. */
export const OAUTH_VISIBLE_ASCII_PATTERN = '^[\\x21-\\x7E]+$';
/** RFC 6749 section 3.3: scope tokens separated by single spaces. */
export const OAUTH_SCOPE_PATTERN = '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+( [\\x21\\x23-\\x5B\\x5D-\\x7E]+)*$';

/** What a member sends: the token endpoint, the client and its credential (a secret, or a private key). */
export interface OAuthClientUpload {
  tokenUrl: string;
  clientId: string;
  /** client_secret_basic with a clientSecret, private_key_jwt with a privateKey, unless given. */
  clientAuthentication?: OAuthClientAuthentication;
  clientSecret?: string;
  /** PEM, unencrypted: RSA (RS384), or EC P-384 (ES384) or P-256 (ES256). */
  privateKey?: string;
  /** The `kid` of the client assertion's header: the key's id in the JWKS the token endpoint holds for the client. */
  keyId?: string;
  /** Space-separated scopes asked for with every token. */
  scope?: string;
}

/** What is stored in the clear, shown by the API and the audit trail: never the secret or the key. */
export interface OAuthClientInfo {
  tokenUrl: string;
  clientId: string;
  clientAuthentication: OAuthClientAuthentication;
  scope: string | null;
  keyId: string | null;
}

export interface OAuthClientProblem {
  pointer: `/oauth/${string}`;
  detail: string;
}

/**
 * The client's facts and its credential (the secret or the key's PEM), or every problem: a token URL that is not an
 * absolute http(s) URL without credentials or fragment (https only where the policy says so), a credential missing
 * for its method or given beside the other, a private key that is not an unencrypted PEM key of a signing type.
 */
export function inspectOAuthClient(
  upload: OAuthClientUpload,
  policy: WebhookUrlPolicy,
): { info: OAuthClientInfo; credential: string } | { problems: OAuthClientProblem[] } {
  const problems: OAuthClientProblem[] = [];
  const tokenUrl = parseWebhookUrl(upload.tokenUrl);
  if (!tokenUrl || tokenUrl.hash !== '')
    problems.push({
      pointer: '/oauth/tokenUrl',
      detail: 'must be an absolute http or https URL without credentials or fragment',
    });
  else if (refusedScheme(tokenUrl, policy)) problems.push({ pointer: '/oauth/tokenUrl', detail: HTTPS_REQUIRED });
  const method =
    upload.clientAuthentication ?? (upload.privateKey !== undefined ? 'private_key_jwt' : 'client_secret_basic');
  if (method === 'private_key_jwt') {
    if (upload.clientSecret !== undefined)
      problems.push({ pointer: '/oauth/clientSecret', detail: 'must not be given with private_key_jwt' });
    if (upload.privateKey === undefined)
      problems.push({ pointer: '/oauth/privateKey', detail: 'is required with private_key_jwt' });
    else {
      const key = assertionKey(upload.privateKey);
      if (typeof key === 'string') problems.push({ pointer: '/oauth/privateKey', detail: key });
    }
  } else {
    if (upload.privateKey !== undefined)
      problems.push({ pointer: '/oauth/privateKey', detail: `must not be given with ${method}` });
    if (upload.keyId !== undefined)
      problems.push({ pointer: '/oauth/keyId', detail: `must not be given with ${method}` });
    if (upload.clientSecret === undefined)
      problems.push({ pointer: '/oauth/clientSecret', detail: `is required with ${method}` });
  }
  if (problems.length > 0) return { problems };
  return {
    info: {
      tokenUrl: upload.tokenUrl,
      clientId: upload.clientId,
      clientAuthentication: method,
      scope: upload.scope ?? null,
      keyId: upload.keyId ?? null,
    },
    credential: (method === 'private_key_jwt' ? upload.privateKey : upload.clientSecret) ?? '',
  };
}

/** The JWS algorithms of a client assertion, by key: what SMART Backend Services require (RS384, ES384), and ES256. */
export type AssertionAlgorithm = 'RS384' | 'ES384' | 'ES256';

/** The key and the algorithm it signs client assertions with, or why it cannot. */
export function assertionKey(pem: string): { key: KeyObject; alg: AssertionAlgorithm } | string {
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(pem))
    return 'must not be encrypted: upload the key without a passphrase';
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    return 'must be a PEM private key (-----BEGIN PRIVATE KEY-----)';
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'rsa')
    return (details.modulusLength ?? 0) >= 2048 ? { key, alg: 'RS384' } : 'must be an RSA key of at least 2048 bits';
  if (key.asymmetricKeyType === 'ec' && details.namedCurve === 'secp384r1') return { key, alg: 'ES384' };
  if (key.asymmetricKeyType === 'ec' && details.namedCurve === 'prime256v1') return { key, alg: 'ES256' };
  return 'must be an RSA key (RS384) or an EC key on P-384 (ES384) or P-256 (ES256)';
}

/** How long a client assertion is valid: SMART Backend Services allow at most five minutes. */
export const CLIENT_ASSERTION_LIFETIME_SECONDS = 300;

/** The claims of a client assertion (RFC 7523 section 3): the client about itself, for this token endpoint, once. */
export interface ClientAssertionClaims {
  iss: string;
  sub: string;
  aud: string;
  jti: string;
  iat: number;
  exp: number;
}

export const clientAssertionClaims = (
  clientId: string,
  tokenUrl: string,
  nowMs: number,
  jti: string = randomUUID(),
): ClientAssertionClaims => {
  const iat = Math.floor(nowMs / 1000);
  return { iss: clientId, sub: clientId, aud: tokenUrl, jti, iat, exp: iat + CLIENT_ASSERTION_LIFETIME_SECONDS };
};

const base64url = (data: string | Buffer) => Buffer.from(data).toString('base64url');

/** A signed client assertion (compact JWS) for private_key_jwt. Throws when the key cannot sign. */
export function signClientAssertion(
  client: { clientId: string; tokenUrl: string; privateKey: string; keyId: string | null },
  nowMs = Date.now(),
): string {
  const signer = assertionKey(client.privateKey);
  if (typeof signer === 'string') throw new Error(`The OAuth private key ${signer}`);
  const header = { alg: signer.alg, typ: 'JWT', ...(client.keyId !== null && { kid: client.keyId }) };
  const claims = clientAssertionClaims(client.clientId, client.tokenUrl, nowMs);
  const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  const hash = signer.alg === 'ES256' ? 'sha256' : 'sha384';
  // JWS wants ECDSA signatures as r || s, not DER.
  const signature = sign(hash, Buffer.from(signingInput), { key: signer.key, dsaEncoding: 'ieee-p1363' });
  return `${signingInput}.${base64url(signature)}`;
}

/** The most a token request may take; less when the attempt's own deadline is nearer. */
export const OAUTH_TOKEN_TIMEOUT_MS = 10_000;

/**
 * A token request's timeout: OAUTH_TOKEN_TIMEOUT_MS, or what is left until the attempt's deadline (`deadlineMs`, on
 * the clock of `nowMs`) when that is less; at least 1 ms. Without a deadline, OAUTH_TOKEN_TIMEOUT_MS.
 */
export function tokenRequestTimeoutMs(nowMs: number, deadlineMs?: number): number {
  if (deadlineMs === undefined) return OAUTH_TOKEN_TIMEOUT_MS;
  return Math.max(1, Math.min(OAUTH_TOKEN_TIMEOUT_MS, Math.floor(deadlineMs - nowMs)));
}

/** The failure of a token request not answered within `timeoutMs`, in seconds as members read them. */
export const tokenTimeoutMessage = (timeoutMs: number): string =>
  `OAuth token endpoint did not answer within ${timeoutMs / 1000} s (TIMEOUT)`;

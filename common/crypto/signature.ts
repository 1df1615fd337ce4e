import {
  createHmac,
  createPublicKey,
  generateKeyPairSync,
  sign,
  timingSafeEqual,
  verify,
  type KeyObject,
} from 'node:crypto';

/** Spec section 5: the tolerance between the sender's and the receiver's clocks. */
export const DEFAULT_SIGNATURE_TOLERANCE_MS = 300_000;

/** The secrets a receiver accepts: one, or several while a rotation overlaps (the old and the new). */
export type WebhookSecrets = string | readonly string[];

const secretList = (secrets: WebhookSecrets): readonly string[] => (typeof secrets === 'string' ? [secrets] : secrets);

/** X-Signature: lowercase hex HMAC-SHA256 keyed with the webhook secret over `{timestamp}.{body}`. */
export function signPayload(secret: string, timestamp: string | number, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

export interface VerifyWebhookSignatureInput {
  /** The webhook's signing secret (whsec_…), or every secret accepted while a rotation overlaps. */
  secret: WebhookSecrets;
  /** The X-Timestamp header as received. */
  timestamp: string | string[] | undefined | null;
  /** The X-Signature header as received. */
  signature: string | string[] | undefined | null;
  /** The request body exactly as received: never a re-serialised parsed object. */
  rawBody: string | Buffer;
  /** The receiver's clock in Unix ms (defaults to Date.now()). */
  now?: number;
  toleranceMs?: number;
}

export type SignatureCheck =
  | { valid: true }
  | { valid: false; reason: 'missing-headers' | 'malformed-timestamp' | 'stale-timestamp' | 'bad-signature' };

/** Like verifyWebhookSignature, with the reason a delivery was refused (for the receiver's own logs). */
export function checkWebhookSignature(input: VerifyWebhookSignatureInput): SignatureCheck {
  const { secret, timestamp, signature, rawBody } = input;
  if (typeof timestamp !== 'string' || typeof signature !== 'string')
    return { valid: false, reason: 'missing-headers' };
  if (!/^\d{1,16}$/.test(timestamp)) return { valid: false, reason: 'malformed-timestamp' };
  const now = input.now ?? Date.now();
  if (Math.abs(now - Number(timestamp)) > (input.toleranceMs ?? DEFAULT_SIGNATURE_TOLERANCE_MS))
    return { valid: false, reason: 'stale-timestamp' };
  const received = Buffer.from(signature, 'utf8');
  const matches = secretList(secret).some((candidate) =>
    sameBytes(received, Buffer.from(signPayload(candidate, timestamp, rawBody), 'utf8')),
  );
  return matches ? { valid: true } : { valid: false, reason: 'bad-signature' };
}

/** Constant-time comparison; timingSafeEqual throws on a length mismatch, and the length of a MAC is not a secret. */
function sameBytes(received: Buffer, expected: Buffer): boolean {
  return received.length === expected.length && timingSafeEqual(received, expected);
}

/**
 * Spec section 5 for receivers: true only when the timestamp is digits within the tolerance of `now` and
 * X-Signature matches the HMAC of `{timestamp}.{rawBody}` with one of the secrets (constant-time comparison).
 */
export function verifyWebhookSignature(input: VerifyWebhookSignatureInput): boolean {
  return checkWebhookSignature(input).valid;
}

// Standard Webhooks (standardwebhooks.com): webhook-id, webhook-timestamp (Unix seconds) and webhook-signature,
// `v1,<base64 HMAC-SHA256>` over `{webhook-id}.{webhook-timestamp}.{body}`, one per active secret, space-separated.

const SECRET_PREFIX = 'whsec_';

/**
 * The Standard Webhooks HMAC key: the base64-decoded part after `whsec_`. Node's decoder also takes the url-safe
 * alphabet, so secrets issued before standard base64 (base64url) sign and verify here too.
 */
export function standardWebhookKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** One `v1,<base64>` signature of a Standard Webhooks message. */
export function signStandardWebhook(
  secret: string,
  webhookId: string,
  timestampSeconds: string | number,
  body: string | Buffer,
): string {
  const mac = createHmac('sha256', standardWebhookKey(secret)).update(`${webhookId}.${timestampSeconds}.`).update(body);
  return `v1,${mac.digest('base64')}`;
}

/** The webhook-signature header: one signature per active secret, newest first, space-separated. */
export function standardWebhookSignatureHeader(
  secrets: readonly string[],
  webhookId: string,
  timestampSeconds: string | number,
  body: string | Buffer,
): string {
  return secrets.map((secret) => signStandardWebhook(secret, webhookId, timestampSeconds, body)).join(' ');
}

type HeaderValue = string | string[] | undefined | null;

export interface VerifyStandardWebhookInput {
  /** The webhook's signing secret (whsec_…), or every secret accepted while a rotation overlaps. */
  secret: WebhookSecrets;
  /** The request's headers (lower-case names, as Node gives them): webhook-id, webhook-timestamp, webhook-signature. */
  headers: Record<string, HeaderValue>;
  /** The request body exactly as received: never a re-serialised parsed object. */
  rawBody: string | Buffer;
  /** The receiver's clock in Unix ms (defaults to Date.now()). */
  now?: number;
  toleranceMs?: number;
}

/** The three Standard Webhooks headers, checked for presence and timestamp; the reason when they do not pass. */
type StandardHeaders =
  | { valid: true; webhookId: string; timestamp: string; signatures: string[] }
  | Extract<SignatureCheck, { valid: false }>;

function standardHeaders(input: Omit<VerifyStandardWebhookInput, 'secret'>): StandardHeaders {
  const { headers } = input;
  const webhookId = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof webhookId !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string' || !webhookId)
    return { valid: false, reason: 'missing-headers' };
  if (!/^\d{1,13}$/.test(timestamp)) return { valid: false, reason: 'malformed-timestamp' };
  const now = input.now ?? Date.now();
  if (Math.abs(now - Number(timestamp) * 1000) > (input.toleranceMs ?? DEFAULT_SIGNATURE_TOLERANCE_MS))
    return { valid: false, reason: 'stale-timestamp' };
  return { valid: true, webhookId, timestamp, signatures: signatures.split(' ') };
}

/** The signatures of one version (`v1`, `v1a`) in webhook-signature, without their prefix; others are ignored. */
const entriesOf = (signatures: readonly string[], version: string): string[] =>
  signatures
    .filter((versioned) => versioned.startsWith(`${version},`))
    .map((versioned) => versioned.slice(version.length + 1));

/** The Standard Webhooks check, with the reason a delivery was refused; any `v1` signature may match any secret. */
export function checkStandardWebhook(input: VerifyStandardWebhookInput): SignatureCheck {
  const checked = standardHeaders(input);
  if (!checked.valid) return checked;
  const { webhookId, timestamp } = checked;
  const received = entriesOf(checked.signatures, 'v1').map((signature) => Buffer.from(signature, 'utf8'));
  const matches = secretList(input.secret).some((secret) => {
    const expected = Buffer.from(signStandardWebhook(secret, webhookId, timestamp, input.rawBody).slice(3), 'utf8');
    return received.some((signature) => sameBytes(signature, expected));
  });
  return matches ? { valid: true } : { valid: false, reason: 'bad-signature' };
}

/** Standard Webhooks for receivers: true only when webhook-timestamp is within the tolerance and a signature matches. */
export function verifyStandardWebhook(input: VerifyStandardWebhookInput): boolean {
  return checkStandardWebhook(input).valid;
}

// Standard Webhooks' asymmetric signatures: `v1a,<base64 Ed25519 signature>` over the same message, the public key
// given to receivers as `whpk_` + base64 of its raw 32 bytes. A receiver holding only that key verifies; no secret.

/** A registration's scheme of webhook-signature: `v1` HMAC with the secret, or `v1a` Ed25519 (with v1 beside it). */
export const SIGNATURE_SCHEMES = ['v1', 'v1a'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

const PUBLIC_KEY_PREFIX = 'whpk_';
const ED25519_PUBLIC_KEY_BYTES = 32;
const ED25519_SIGNATURE_BYTES = 64;

/** The public key as Standard Webhooks gives it to receivers: `whpk_` and standard base64 of its raw 32 bytes. */
export function standardWebhookPublicKey(publicKey: KeyObject): string {
  const { x } = publicKey.export({ format: 'jwk' });
  if (publicKey.asymmetricKeyType !== 'ed25519' || typeof x !== 'string') throw new Error('not an Ed25519 public key');
  return PUBLIC_KEY_PREFIX + Buffer.from(x, 'base64url').toString('base64');
}

/** The Ed25519 key of a `whpk_…` string (the prefix may be left out); throws unless it is 32 bytes of base64. */
export function parseStandardWebhookPublicKey(text: string): KeyObject {
  const encoded = text.startsWith(PUBLIC_KEY_PREFIX) ? text.slice(PUBLIC_KEY_PREFIX.length) : text;
  const raw = Buffer.from(encoded, 'base64');
  if (raw.length !== ED25519_PUBLIC_KEY_BYTES || raw.toString('base64') !== encoded)
    throw new Error(`an Ed25519 public key is ${PUBLIC_KEY_PREFIX} and base64 of ${ED25519_PUBLIC_KEY_BYTES} bytes`);
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** A new Ed25519 key pair: the private key as PKCS #8 PEM (to seal), the public key as receivers are given it. */
export function generateSigningKeyPair(): { privateKeyPem: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKey: standardWebhookPublicKey(publicKey),
  };
}

/** The message both versions sign: `{webhook-id}.{webhook-timestamp}.{body}`. */
const standardMessage = (webhookId: string, timestampSeconds: string | number, body: string | Buffer): Buffer =>
  Buffer.concat([Buffer.from(`${webhookId}.${timestampSeconds}.`, 'utf8'), Buffer.from(body)]);

/** One `v1a,<base64>` Ed25519 signature of a Standard Webhooks message. */
export function signStandardWebhookV1a(
  privateKey: KeyObject | string,
  webhookId: string,
  timestampSeconds: string | number,
  body: string | Buffer,
): string {
  return `v1a,${sign(null, standardMessage(webhookId, timestampSeconds, body), privateKey).toString('base64')}`;
}

/**
 * webhook-signature for a registration signing with Ed25519: one `v1a` signature per active key pair, newest first,
 * then one `v1` per active secret (a receiver verifying either version finds its own; none needs the other's key).
 */
export function asymmetricSignatureHeader(
  privateKeys: readonly (KeyObject | string)[],
  secrets: readonly string[],
  webhookId: string,
  timestampSeconds: string | number,
  body: string | Buffer,
): string {
  return [
    ...privateKeys.map((key) => signStandardWebhookV1a(key, webhookId, timestampSeconds, body)),
    standardWebhookSignatureHeader(secrets, webhookId, timestampSeconds, body),
  ]
    .filter((entry) => entry !== '')
    .join(' ');
}

export interface VerifyStandardWebhookV1aInput extends Omit<VerifyStandardWebhookInput, 'secret'> {
  /** The webhook's public key (whpk_…), or both while a rotation of the key pair overlaps. */
  publicKey: string | readonly string[];
}

/** The v1a check for receivers, with the reason a delivery was refused; `v1` entries are ignored, never needed. */
export function checkStandardWebhookV1a(input: VerifyStandardWebhookV1aInput): SignatureCheck {
  const keys = (typeof input.publicKey === 'string' ? [input.publicKey] : input.publicKey).map(
    parseStandardWebhookPublicKey,
  );
  const checked = standardHeaders(input);
  if (!checked.valid) return checked;
  const message = standardMessage(checked.webhookId, checked.timestamp, input.rawBody);
  // Canonical base64 of 64 bytes only: Node's decoder would skip junk after the padding.
  const received = entriesOf(checked.signatures, 'v1a')
    .map((encoded) => ({ encoded, signature: Buffer.from(encoded, 'base64') }))
    .filter(
      ({ encoded, signature }) =>
        signature.length === ED25519_SIGNATURE_BYTES && signature.toString('base64') === encoded,
    )
    .map(({ signature }) => signature);
  const matches = keys.some((key) => received.some((signature) => verify(null, message, key, signature)));
  return matches ? { valid: true } : { valid: false, reason: 'bad-signature' };
}

/** Standard Webhooks v1a for receivers: true only when the timestamp is within the tolerance and a v1a entry verifies. */
export function verifyStandardWebhookV1a(input: VerifyStandardWebhookV1aInput): boolean {
  return checkStandardWebhookV1a(input).valid;
}

import { createHmac, timingSafeEqual } from 'node:crypto';

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

/** The Standard Webhooks check, with the reason a delivery was refused; any `v1` signature may match any secret. */
export function checkStandardWebhook(input: VerifyStandardWebhookInput): SignatureCheck {
  const { headers, rawBody } = input;
  const webhookId = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof webhookId !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string' || !webhookId)
    return { valid: false, reason: 'missing-headers' };
  if (!/^\d{1,13}$/.test(timestamp)) return { valid: false, reason: 'malformed-timestamp' };
  const now = input.now ?? Date.now();
  if (Math.abs(now - Number(timestamp) * 1000) > (input.toleranceMs ?? DEFAULT_SIGNATURE_TOLERANCE_MS))
    return { valid: false, reason: 'stale-timestamp' };
  const received = signatures
    .split(' ')
    .filter((versioned) => versioned.startsWith('v1,'))
    .map((versioned) => Buffer.from(versioned.slice(3), 'utf8'));
  const matches = secretList(input.secret).some((secret) => {
    const expected = Buffer.from(signStandardWebhook(secret, webhookId, timestamp, rawBody).slice(3), 'utf8');
    return received.some((signature) => sameBytes(signature, expected));
  });
  return matches ? { valid: true } : { valid: false, reason: 'bad-signature' };
}

/** Standard Webhooks for receivers: true only when webhook-timestamp is within the tolerance and a signature matches. */
export function verifyStandardWebhook(input: VerifyStandardWebhookInput): boolean {
  return checkStandardWebhook(input).valid;
}

import { createHmac, timingSafeEqual } from 'node:crypto';

/** Spec section 5: the tolerance between the sender's and the receiver's clocks. */
export const DEFAULT_SIGNATURE_TOLERANCE_MS = 300_000;

/** X-Signature: lowercase hex HMAC-SHA256 keyed with the webhook secret over `{timestamp}.{body}`. */
export function signPayload(secret: string, timestamp: string | number, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

export interface VerifyWebhookSignatureInput {
  /** The webhook's signing secret (whsec_…). */
  secret: string;
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
  const expected = Buffer.from(signPayload(secret, timestamp, rawBody), 'utf8');
  const received = Buffer.from(signature, 'utf8');
  // timingSafeEqual throws on a length mismatch; the length of a hex digest is not a secret.
  if (received.length !== expected.length || !timingSafeEqual(received, expected))
    return { valid: false, reason: 'bad-signature' };
  return { valid: true };
}

/**
 * Spec section 5 for receivers: true only when the timestamp is digits within the tolerance of `now` and
 * X-Signature matches the HMAC of `{timestamp}.{rawBody}` (constant-time comparison).
 */
export function verifyWebhookSignature(input: VerifyWebhookSignatureInput): boolean {
  return checkWebhookSignature(input).valid;
}

// A person as the service may keep them: an HMAC-SHA256 of their userUUID under PERSON_HASH_KEY, a key the database
// never holds. Deliveries are found by it for an erasure; the userUUID itself is never stored. Pure: no I/O.
import { createHmac } from 'node:crypto';

/** A person hash: 64 lower-case hex digits. */
export const PERSON_HASH_PATTERN = /^[0-9a-f]{64}$/;

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/]{43}=$/;
const UUID = /^(?:urn:uuid:)?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

/** PERSON_HASH_KEY's 32 bytes, from 64 hex digits or base64; throws naming the variable, never the key. */
export function parsePersonHashKey(text: string): Buffer {
  const value = text.trim();
  if (HEX_KEY.test(value)) return Buffer.from(value, 'hex');
  if (BASE64_KEY.test(value)) return Buffer.from(value, 'base64');
  throw new Error('PERSON_HASH_KEY must be 32 bytes as 64 hex digits or base64');
}

/**
 * The one spelling of a userUUID that is hashed: lower case, without a `urn:uuid:` prefix (the event schema accepts
 * both cases and the prefix, so one person's events hash alike however the monitoring system wrote the id).
 * Undefined when it is not a UUID.
 */
export function canonicalUserUUID(userUUID: string): string | undefined {
  return UUID.exec(userUUID)?.[1]?.toLowerCase();
}

/** Whether this userUUID names a person: a UUID, and not the nil UUID the TEST events carry. */
export function namesPerson(userUUID: string): boolean {
  const canonical = canonicalUserUUID(userUUID);
  return canonical !== undefined && canonical !== '00000000-0000-0000-0000-000000000000';
}

/** The person hash of a userUUID: hex HMAC-SHA256 of its canonical spelling. Throws when it is not a UUID. */
export function personHash(key: Buffer, userUUID: string): string {
  if (key.length !== 32) throw new Error('the person hash key must be 32 bytes');
  const canonical = canonicalUserUUID(userUUID);
  if (canonical === undefined) throw new Error('a person hash is made of a userUUID, and this is not a UUID');
  return createHmac('sha256', key).update(canonical, 'utf8').digest('hex');
}

/** The person hash of an event's userUUID, or undefined when it names no person (a TEST event, an invalid id). */
export function eventPersonHash(key: Buffer, userUUID: unknown): string | undefined {
  return typeof userUUID === 'string' && namesPerson(userUUID) ? personHash(key, userUUID) : undefined;
}

// Key rings from the environment, `id:key[,id:key…]`: the first key seals, every key opens. Their patterns for the
// configuration schema and their parser. Imports nothing of ours, so config.ts can use it.

/** One key of a ring. */
export interface RingKey {
  id: string;
  key: Buffer;
}

// Stryker disable StringLiteral: module constants, read once when the module loads, which a mutant switched on later
// cannot change (static mutants); test/common/key-ring.test.ts checks what each pattern accepts and refuses.
const KEY_ID = '[A-Za-z0-9._-]{1,64}';
const BASE64_32 = '[A-Za-z0-9+/]{43}=';
const HEX_OR_BASE64_32 = `(?:[0-9a-fA-F]{64}|${BASE64_32})`;

/** A key id: 1 to 64 of A-Z a-z 0-9 . _ - */
export const KEY_ID_PATTERN = `^${KEY_ID}$`;
/** One key of 32 bytes as 64 hex digits or base64 (WEBHOOK_SECRET_KEY). */
export const HEX_OR_BASE64_KEY_PATTERN = `^${HEX_OR_BASE64_32}$`;
/** A ring of keys of 32 bytes as 64 hex digits or base64 (WEBHOOK_SECRET_KEYS, AUDIT_HMAC_KEYS). */
export const HEX_OR_BASE64_KEY_RING_PATTERN = `^${KEY_ID}:${HEX_OR_BASE64_32}(?:,${KEY_ID}:${HEX_OR_BASE64_32})*$`;
/** One `id:base64` of 32 bytes (AUDIT_SIGNING_KEY). */
export const BASE64_KEY_ENTRY_PATTERN = `^${KEY_ID}:${BASE64_32}$`;
/** A ring of `id:base64` of 32 bytes (PAYLOAD_ENCRYPTION_KEYS, AUDIT_SIGNING_PUBLIC_KEYS). */
export const BASE64_KEY_RING_PATTERN = `^${KEY_ID}:${BASE64_32}(,${KEY_ID}:${BASE64_32})*$`;
// Stryker restore StringLiteral

/** How a ring writes its keys. */
export interface KeyForm {
  /** An entry's shape, in the message about a malformed entry. */
  entry: string;
  /** The key's 32 bytes; throws otherwise, naming at most the id, never the key. */
  decode(text: string, variable: string, id: string): Buffer;
}

/** 32 bytes from 64 hex digits or base64 (WEBHOOK_SECRET_KEY). */
export function parseHexOrBase64Key(text: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('WEBHOOK_SECRET_KEY must decode to 32 bytes');
  return key;
}

/** Keys as 64 hex digits or base64 (WEBHOOK_SECRET_KEYS, AUDIT_HMAC_KEYS). */
// Stryker disable next-line StringLiteral: a module constant, as above
export const HEX_OR_BASE64_KEYS: KeyForm = { entry: 'id:key', decode: parseHexOrBase64Key };

/** Keys as base64 (PAYLOAD_ENCRYPTION_KEYS). */
export const BASE64_KEYS: KeyForm = {
  // Stryker disable next-line StringLiteral: a module constant, as above
  entry: 'id:base64key (id of letters, digits, . _ -)',
  decode(text, variable, id) {
    const key = Buffer.from(text, 'base64');
    if (key.length !== 32) throw new Error(`${variable} key ${id} must decode to 32 bytes`);
    return key;
  },
};

/**
 * The ring `id:key[,id:key…]` of `variable`, in order; blanks and empty entries are skipped. Throws naming the variable
 * and the entry's position or id, never a key.
 */
export function parseKeyRing(text: string, variable: string, form: KeyForm): RingKey[] {
  const keyId = new RegExp(KEY_ID_PATTERN);
  const ring = text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry, i) => {
      const separator = entry.indexOf(':');
      const id = entry.slice(0, separator);
      if (separator < 1 || !keyId.test(id)) throw new Error(`${variable} entry ${i + 1} must be ${form.entry}`);
      return { id, key: form.decode(entry.slice(separator + 1), variable, id) };
    });
  if (ring.length === 0) throw new Error(`${variable} has no key`);
  if (new Set(ring.map((k) => k.id)).size !== ring.length) throw new Error(`${variable} has a key id twice`);
  return ring;
}

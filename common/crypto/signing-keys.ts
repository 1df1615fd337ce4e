// A registration's Ed25519 private keys (signature scheme v1a), opened and parsed once per worker rather than on every
// attempt: opening the sealed PEM and parsing it into a KeyObject costs more than the signature itself.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { registrationSigningKeyAad, type SecretBox } from './secrets';

/** The columns of a registration that hold its key pairs' private keys, sealed to its row; null where none. */
export interface SealedSigningKeys {
  id: string;
  signingKeySealed: string | null;
  previousSigningKeySealed: string | null;
}

/** Registration keys kept parsed (current and previous count apart); beyond this, the least recently used goes. */
export const MAX_KEPT_SIGNING_KEYS = 10_000;

interface KeptKey {
  /** The sealed PEM it was opened from: a rotation or a reseal writes another, and the key is opened again. */
  sealed: string;
  key: KeyObject;
}

/**
 * The worker's parsed signing keys, one per registration and key version (current, previous), each kept while the
 * sealed value it came from is the row's: a rotation (a new pair, the old one moved to previous), a scheme change or a
 * reseal under a new WEBHOOK_SECRET_KEY changes it, and the key is opened and parsed afresh. The AAD binds a sealed
 * value to its row, and the cache is keyed by the row's id: a value copied to another row is opened, and refused.
 */
export function createSigningKeyCache(secretBox: SecretBox, max: number = MAX_KEPT_SIGNING_KEYS) {
  const kept = new Map<string, KeptKey>();

  function parsed(registrationId: string, version: 'current' | 'previous', sealed: string): KeyObject {
    const slot = `${version}:${registrationId}`;
    const entry = kept.get(slot);
    // Used again: moved to the end, the most recently used.
    const used = entry?.sealed === sealed ? entry : undefined;
    const key = used?.key ?? createPrivateKey(secretBox.open(sealed, registrationSigningKeyAad(registrationId)));
    kept.delete(slot);
    kept.set(slot, used ?? { sealed, key });
    if (used) return key;
    const [oldest] = kept.keys();
    if (kept.size > max && oldest !== undefined) kept.delete(oldest);
    return key;
  }

  return {
    /** The registration's private keys, newest first; the previous one only `withPrevious`. Throws when one cannot open. */
    open(row: SealedSigningKeys, withPrevious: boolean): KeyObject[] {
      const keys: KeyObject[] = [];
      if (row.signingKeySealed !== null) keys.push(parsed(row.id, 'current', row.signingKeySealed));
      if (withPrevious && row.previousSigningKeySealed !== null)
        keys.push(parsed(row.id, 'previous', row.previousSigningKeySealed));
      return keys;
    },
    /** How many keys are kept (for tests). */
    get size(): number {
      return kept.size;
    },
  };
}

export type SigningKeyCache = ReturnType<typeof createSigningKeyCache>;

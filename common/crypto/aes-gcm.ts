// AES-256-GCM as the secret box and the payload codec use it: a random 12-byte nonce per seal, a 16-byte tag, and
// additional authenticated data binding the ciphertext to where it belongs.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export const GCM_NONCE_BYTES = 12;
/** Only full tags open: a shorter one would let a forger try 2^32 guesses instead of 2^128. */
export const GCM_TAG_BYTES = 16;

export interface GcmSealed {
  nonce: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

/** Encrypts `plaintext` under `key` (32 bytes) with a fresh nonce, authenticating `aad` too. */
export function gcmSeal(key: Buffer, plaintext: Uint8Array, aad: Uint8Array): GcmSealed {
  const nonce = randomBytes(GCM_NONCE_BYTES);
  // Stryker disable next-line ObjectLiteral: equivalent, a GCM cipher's tag is 16 bytes by default (gcmOpen enforces it)
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: GCM_TAG_BYTES });
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { nonce, ciphertext, tag: cipher.getAuthTag() };
}

/** The plaintext; throws on a wrong key, nonce or AAD, altered ciphertext, or a tag that is not 16 bytes. */
export function gcmOpen(key: Buffer, { nonce, ciphertext, tag }: GcmSealed, aad: Uint8Array): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: GCM_TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
}

import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GCM_TAG_BYTES, gcmOpen, gcmSeal } from './aes-gcm';
import type { Config } from '../config';
import { HEX_OR_BASE64_KEYS, parseHexOrBase64Key, parseKeyRing, type RingKey } from './key-ring';
import type { Logger } from '../telemetry/logger';

const SECRET_PREFIX = 'whsec_';
/** Today's sealed format `v2:keyId:iv:tag:ciphertext`; `v1:iv:tag:ciphertext` (no key id) is still read. */
const SEALED_VERSION = 'v2';
const LEGACY_VERSION = 'v1';
/** The key id WEBHOOK_SECRET_KEY (a single key) gets in a ring. */
export const SINGLE_KEY_ID = 'k0';

/**
 * A new signing secret: `whsec_` and 32 CSPRNG bytes in standard base64, the format Standard Webhooks libraries
 * decode (secrets issued before were base64url: they still sign, see standardWebhookKey).
 */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** Encrypts signing secrets at rest with AES-256-GCM; the AAD binds a ciphertext to its row. */
export interface SecretBox {
  seal(plaintext: string, aad: string): string;
  open(sealed: string, aad: string): string;
  /** Whether a sealed value is not under the newest key (or in the old format): `secrets reseal` rewrites it. */
  isStale(sealed: string): boolean;
}

/** One key of the at-rest key ring. */
export type SecretKey = RingKey;

function decrypt(key: Buffer, iv: string, tag: string, ciphertext: string, aad: string): string {
  const authTag = Buffer.from(tag, 'base64');
  if (authTag.length !== GCM_TAG_BYTES) throw new Error('sealed secret has a GCM tag that is not 16 bytes');
  const sealed = { nonce: Buffer.from(iv, 'base64'), ciphertext: Buffer.from(ciphertext, 'base64'), tag: authTag };
  return gcmOpen(key, sealed, Buffer.from(aad, 'utf8')).toString('utf8');
}

/**
 * A secret box over a key ring: the first key seals (its id is written into the sealed value), every key opens, so
 * a key can be rotated and old rows still open until `secrets reseal` rewrites them. A single key is ring `k0`.
 */
export function createSecretBox(keys: Buffer | SecretKey[]): SecretBox {
  const ring = Buffer.isBuffer(keys) ? [{ id: SINGLE_KEY_ID, key: keys }] : keys;
  if (ring.length === 0) throw new Error('the secret key ring is empty');
  for (const { key } of ring) if (key.length !== 32) throw new Error('secret key must be 32 bytes');
  const current = ring[0]!;
  const byId = new Map(ring.map(({ id, key }) => [id, key]));
  return {
    seal(plaintext, aad) {
      const { nonce, tag, ciphertext } = gcmSeal(current.key, Buffer.from(plaintext, 'utf8'), Buffer.from(aad, 'utf8'));
      return [
        SEALED_VERSION,
        current.id,
        nonce.toString('base64'),
        tag.toString('base64'),
        ciphertext.toString('base64'),
      ].join(':');
    },
    open(sealed, aad) {
      const parts = sealed.split(':');
      if (parts[0] === SEALED_VERSION && parts.length === 5) {
        const [, id, iv, tag, ciphertext] = parts as [string, string, string, string, string];
        const key = byId.get(id);
        if (!key) throw new Error(`sealed with key ${id}, which is not in the secret key ring`);
        return decrypt(key, iv, tag, ciphertext, aad);
      }
      if (parts[0] === LEGACY_VERSION && parts.length === 4) {
        // v1 carries no key id: it was sealed with the single key of its time, whichever of the ring that is.
        const [, iv, tag, ciphertext] = parts as [string, string, string, string];
        for (const { key } of ring) {
          try {
            return decrypt(key, iv, tag, ciphertext, aad);
          } catch {
            // not this key
          }
        }
        throw new Error('no key of the ring opens this v1 sealed secret');
      }
      throw new Error('unknown sealed secret format');
    },
    isStale(sealed) {
      const [version, id] = sealed.split(':');
      return version !== SEALED_VERSION || id !== current.id;
    },
  };
}

/** `id:key[,id:key…]` (each key 64 hex digits or base64 of 32 bytes): WEBHOOK_SECRET_KEYS, the first one seals. */
export const parseSecretKeyRing = (text: string): SecretKey[] =>
  parseKeyRing(text, 'WEBHOOK_SECRET_KEYS', HEX_OR_BASE64_KEYS);

/** 32 bytes from 64 hex digits or base64 (the forms WEBHOOK_SECRET_KEY accepts). */
export const parseSecretKey = (text: string): Buffer => parseHexOrBase64Key(text);

/**
 * A development secret kept in the git-ignored data folder, created on first use (mode 0600),
 * so restarts keep working with the same value.
 */
export function readOrCreateDevSecret(
  dataDir: string,
  fileName: string,
  create: () => string,
): { value: string; created: boolean } {
  const path = join(dataDir, fileName);
  try {
    return { value: readFileSync(path, 'utf8').trim(), created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(dataDir, { recursive: true });
  const value = create();
  writeFileSync(path, value + '\n', { mode: 0o600, flag: 'wx' });
  return { value, created: true };
}

/** Where, under DATA_DIR, the development at-rest key is kept when neither key variable is set. */
export const DEV_SECRET_KEY_FILE = 'webhook-secret.key';

/** The at-rest encryption key: WEBHOOK_SECRET_KEY, or outside production a generated one kept under DATA_DIR. */
export function resolveSecretKey(config: Config, logger: Logger): Buffer {
  if (config.WEBHOOK_SECRET_KEY) return parseSecretKey(config.WEBHOOK_SECRET_KEY);
  const { value, created } = readOrCreateDevSecret(config.DATA_DIR, DEV_SECRET_KEY_FILE, () =>
    randomBytes(32).toString('hex'),
  );
  logger.warn(
    { file: join(config.DATA_DIR, DEV_SECRET_KEY_FILE), created },
    'WEBHOOK_SECRET_KEY is not set: using a development key from the data folder; set it in production',
  );
  return parseSecretKey(value);
}

/**
 * The at-rest key ring: WEBHOOK_SECRET_KEYS when set (WEBHOOK_SECRET_KEY, if also set, stays readable as `k0`);
 * otherwise WEBHOOK_SECRET_KEY alone, or outside production the development key (resolveSecretKey).
 */
export function resolveSecretKeyRing(config: Config, logger: Logger): SecretKey[] {
  if (!config.WEBHOOK_SECRET_KEYS) return [{ id: SINGLE_KEY_ID, key: resolveSecretKey(config, logger) }];
  const ring = parseSecretKeyRing(config.WEBHOOK_SECRET_KEYS);
  if (config.WEBHOOK_SECRET_KEY && !ring.some((k) => k.id === SINGLE_KEY_ID))
    ring.push({ id: SINGLE_KEY_ID, key: parseSecretKey(config.WEBHOOK_SECRET_KEY) });
  return ring;
}

/** Additional authenticated data for a registration's sealed secret: a ciphertext opens only on its own row. */
export const registrationSecretAad = (registrationId: string): string => `webhook-registration:${registrationId}`;

/** Additional authenticated data for a registration's sealed custom headers: its own row, and not the secret's column. */
export const registrationHeadersAad = (registrationId: string): string =>
  `webhook-registration-headers:${registrationId}`;

/** Additional authenticated data for a registration's sealed client-certificate key: its own row and column. */
export const registrationClientKeyAad = (registrationId: string): string =>
  `webhook-registration-client-key:${registrationId}`;

/** Additional authenticated data for a registration's sealed Ed25519 private keys (current and previous): its own row. */
export const registrationSigningKeyAad = (registrationId: string): string =>
  `webhook-registration-signing-key:${registrationId}`;

/** Additional authenticated data for a registration's sealed OAuth client secret or private key: its own row and column. */
export const registrationOAuthCredentialAad = (registrationId: string): string =>
  `webhook-registration-oauth-credential:${registrationId}`;

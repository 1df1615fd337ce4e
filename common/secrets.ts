import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from './config';
import type { Logger } from './logger';

const SECRET_PREFIX = 'whsec_';
const SEALED_VERSION = 'v1';

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
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('secret key must be 32 bytes');
  return {
    seal(plaintext, aad) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(aad, 'utf8'));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return [
        SEALED_VERSION,
        iv.toString('base64'),
        cipher.getAuthTag().toString('base64'),
        ciphertext.toString('base64'),
      ].join(':');
    },
    open(sealed, aad) {
      const [version, iv, tag, ciphertext] = sealed.split(':');
      if (version !== SEALED_VERSION || !iv || !tag || ciphertext === undefined)
        throw new Error('unknown sealed secret format');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64')), decipher.final()]).toString('utf8');
    },
  };
}

/** 32 bytes from 64 hex digits or base64 (the forms WEBHOOK_SECRET_KEY accepts). */
export function parseSecretKey(text: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('WEBHOOK_SECRET_KEY must decode to 32 bytes');
  return key;
}

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

/** The at-rest encryption key: WEBHOOK_SECRET_KEY, or outside production a generated one kept under DATA_DIR. */
export function resolveSecretKey(config: Config, logger: Logger): Buffer {
  if (config.WEBHOOK_SECRET_KEY) return parseSecretKey(config.WEBHOOK_SECRET_KEY);
  const { value, created } = readOrCreateDevSecret(config.DATA_DIR, 'webhook-secret.key', () =>
    randomBytes(32).toString('hex'),
  );
  logger.warn(
    { file: join(config.DATA_DIR, 'webhook-secret.key'), created },
    'WEBHOOK_SECRET_KEY is not set: using a development key from the data folder; set it in production',
  );
  return parseSecretKey(value);
}

/** Additional authenticated data for a registration's sealed secret: a ciphertext opens only on its own row. */
export const registrationSecretAad = (registrationId: string): string => `webhook-registration:${registrationId}`;

import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { AuditPublicKey, AuditSigningKey, AuditTrailKeys } from '../../db/audit/chain';
import type { Config } from '../config';
import { HEX_OR_BASE64_KEYS, parseKeyRing } from './key-ring';
import type { Logger } from '../telemetry/logger';
import { isDevelopment } from '../node-env';
import { readOrCreateDevSecret } from './secrets';

/** Files under DATA_DIR holding the development audit keys, and the development digest directory. */
export const DEV_AUDIT_HMAC_KEYS_FILE = 'audit-hmac.keys';
export const DEV_AUDIT_SIGNING_KEY_FILE = 'audit-signing.key';
export const DEV_AUDIT_DIGEST_DIR = 'audit-digests';

// The fixed PKCS#8 header of an Ed25519 private key: the 32-byte seed follows it.
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** The signing key of `id:base64seed`, with its public half. */
export function parseAuditSigningKey(text: string): AuditSigningKey {
  const separator = text.indexOf(':');
  const seed = Buffer.from(text.slice(separator + 1), 'base64');
  if (separator < 1 || seed.length !== 32)
    throw new Error('AUDIT_SIGNING_KEY must be id:base64 of a 32-byte Ed25519 seed');
  const privateKey = createPrivateKey({
    key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]),
    format: 'der',
    type: 'pkcs8',
  });
  const { x } = createPublicKey(privateKey).export({ format: 'jwk' });
  return { id: text.slice(0, separator), privateKey, publicKey: Buffer.from(x!, 'base64url').toString('base64') };
}

/** A new signing key as AUDIT_SIGNING_KEY takes it: `id:` and the base64 Ed25519 seed. */
export function generateAuditSigningKey(id: string): string {
  const { privateKey } = generateKeyPairSync('ed25519');
  const der = privateKey.export({ format: 'der', type: 'pkcs8' });
  return `${id}:${der.subarray(ED25519_PKCS8_PREFIX.length).toString('base64')}`;
}

export function parseAuditPublicKeys(text: string): AuditPublicKey[] {
  return text.split(',').map((entry) => {
    const separator = entry.indexOf(':');
    return { id: entry.slice(0, separator), publicKey: entry.slice(separator + 1) };
  });
}

/**
 * The audit trail's keys and digest directory from the configuration; outside production, generated ones kept under
 * DATA_DIR (as the other development keys), so `npm start` and the CLI in another terminal agree.
 */
export function auditTrailKeysFromConfig(
  config: Pick<
    Config,
    'NODE_ENV' | 'DATA_DIR' | 'AUDIT_HMAC_KEYS' | 'AUDIT_SIGNING_KEY' | 'AUDIT_SIGNING_PUBLIC_KEYS' | 'AUDIT_DIGEST_DIR'
  >,
  logger?: Logger,
): AuditTrailKeys {
  const development = isDevelopment(config);
  const missing = [
    !config.AUDIT_HMAC_KEYS && 'AUDIT_HMAC_KEYS',
    !config.AUDIT_SIGNING_KEY && 'AUDIT_SIGNING_KEY',
    !config.AUDIT_DIGEST_DIR && 'AUDIT_DIGEST_DIR',
  ].filter(Boolean);
  if (!development && missing.length > 0) throw new Error(`${missing.join(', ')} required in production`);
  const devFile = (file: string, create: () => string) => {
    const { value, created } = readOrCreateDevSecret(config.DATA_DIR, file, create);
    logger?.warn(
      { file: join(config.DATA_DIR, file), created },
      'an audit key is not set: using a development key from the data folder; set it in production',
    );
    return value;
  };
  const hmac =
    config.AUDIT_HMAC_KEYS ?? devFile(DEV_AUDIT_HMAC_KEYS_FILE, () => `dev1:${randomBytes(32).toString('hex')}`);
  const signing =
    config.AUDIT_SIGNING_KEY ?? devFile(DEV_AUDIT_SIGNING_KEY_FILE, () => generateAuditSigningKey('dev1'));
  return {
    hmacKeys: parseKeyRing(hmac, 'AUDIT_HMAC_KEYS', HEX_OR_BASE64_KEYS),
    signing: parseAuditSigningKey(signing),
    ...(config.AUDIT_SIGNING_PUBLIC_KEYS && {
      trustedPublicKeys: parseAuditPublicKeys(config.AUDIT_SIGNING_PUBLIC_KEYS),
    }),
    digestDir: config.AUDIT_DIGEST_DIR ?? join(config.DATA_DIR, DEV_AUDIT_DIGEST_DIR),
  };
}

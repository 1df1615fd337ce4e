import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Config } from '../config';
import { isDevelopment } from '../node-env';
import type { Logger } from '../telemetry/logger';
import { parsePersonHashKey } from './person-hash';
import { readOrCreateDevSecret } from './secrets';

/** Where, under DATA_DIR, the development person hash key is kept when PERSON_HASH_KEY is not set. */
export const DEV_PERSON_HASH_KEY_FILE = 'person-hash.key';

/**
 * The key of the person hashes: PERSON_HASH_KEY, or outside production a generated one kept under DATA_DIR (as the
 * other development keys), so `npm start` and the CLI in another terminal hash a person alike.
 */
export function resolvePersonHashKey(
  config: Pick<Config, 'PERSON_HASH_KEY' | 'DATA_DIR' | 'NODE_ENV'>,
  logger?: Logger,
): Buffer {
  if (config.PERSON_HASH_KEY) return parsePersonHashKey(config.PERSON_HASH_KEY);
  if (!isDevelopment(config)) throw new Error('PERSON_HASH_KEY is required in production');
  const { value, created } = readOrCreateDevSecret(config.DATA_DIR, DEV_PERSON_HASH_KEY_FILE, () =>
    randomBytes(32).toString('hex'),
  );
  logger?.warn(
    { file: join(config.DATA_DIR, DEV_PERSON_HASH_KEY_FILE), created },
    'PERSON_HASH_KEY is not set: using a development key from the data folder; set it in production',
  );
  return parsePersonHashKey(value);
}

/**
 * The key where the process holds one (configured, or development's), else undefined: what a starter of deliveries
 * that may run without it (the CLI's emit and redeliver) passes on, to set PersonHash when it can.
 */
export function personHashKeyIfHeld(
  config: Pick<Config, 'PERSON_HASH_KEY' | 'DATA_DIR' | 'NODE_ENV'>,
  logger?: Logger,
): Buffer | undefined {
  return config.PERSON_HASH_KEY || isDevelopment(config) ? resolvePersonHashKey(config, logger) : undefined;
}

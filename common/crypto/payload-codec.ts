// Encryption of everything Temporal stores for us (workflow inputs, activity arguments, results, failure details):
// Temporal's data-encryption model, a PayloadCodec every client and worker applies. Health data never reaches the
// Temporal server, its database or its UI in plain text; operators decode through the API's codec endpoint.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  METADATA_ENCODING_KEY,
  defaultPayloadConverter,
  type DataConverter,
  type Payload,
  type PayloadCodec,
} from '@temporalio/common';
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, gcmOpen, gcmSeal } from './aes-gcm';
import type { Config } from '../config';
import { BASE64_KEYS, parseKeyRing, type RingKey } from './key-ring';
import { isDevelopment } from '../node-env';
import { UNENCRYPTED_PAYLOAD_KEY, type UnencryptedPayload } from '../contract/sealing/unencrypted';
import type { Logger } from '../telemetry/logger';
import { readOrCreateDevSecret } from './secrets';

/** The `encoding` of an encrypted payload (Temporal's convention, shown as such in the UI without the codec). */
export const ENCRYPTED_ENCODING = 'binary/encrypted';
/** Which key of the ring sealed a payload, so a rotated key still opens old histories. */
export const KEY_ID_METADATA_KEY = 'encryption-key-id';

export type PayloadKey = RingKey;

/** A payload this process cannot open; the message names the key id only, never any content. */
export class PayloadDecryptionError extends Error {
  override name = 'PayloadDecryptionError';
}

/**
 * Parses `id:base64key[,id:base64key…]`: the first key encrypts, every key decrypts (rotation keeps old histories
 * readable). Throws naming the entry's position, never the key.
 */
export const parsePayloadKeyRing = (text: string): PayloadKey[] =>
  parseKeyRing(text, 'PAYLOAD_ENCRYPTION_KEYS', BASE64_KEYS);

/** A new key-ring entry: a dated id and 32 CSPRNG bytes. */
export function generatePayloadKey(now = new Date()): string {
  return `key-${now.toISOString().slice(0, 10)}-${randomBytes(3).toString('hex')}:${randomBytes(32).toString('base64')}`;
}

export interface EncryptionCodecOptions {
  /**
   * The worker's codec: decode hands over a payload that is not encrypted as an UnencryptedPayload marker (allowed or
   * not), so the workflow and the activities refuse what a client without the key sent, or knowingly accept it.
   * Unset (clients, the codec endpoint): such a payload passes through decode unchanged.
   */
  markUnencrypted?: { allowed: boolean };
}

/**
 * AES-256-GCM per payload: the whole payload (metadata and data) is sealed under a random 12-byte nonce; the result
 * carries only `encoding: binary/encrypted` and the key id. The key id is authenticated (AAD), so it cannot be swapped.
 * Payloads that are not encrypted (a foreign client's plain `temporal workflow start`) pass through decode unchanged,
 * or, in the worker, become an UnencryptedPayload marker (options.markUnencrypted).
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly byId: Map<string, Buffer>;
  private readonly current: PayloadKey;
  private readonly markUnencrypted?: { allowed: boolean };

  constructor(ring: PayloadKey[], options: EncryptionCodecOptions = {}) {
    if (ring.length === 0) throw new Error('an encryption codec needs at least one key');
    this.current = ring[0]!;
    this.byId = new Map(ring.map(({ id, key }) => [id, key]));
    this.markUnencrypted = options.markUnencrypted;
  }

  // A throw inside the executor becomes a rejection, as callers of a codec expect.
  encode(payloads: Payload[]): Promise<Payload[]> {
    return new Promise((resolve) => resolve(payloads.map((payload) => this.encrypt(payload))));
  }

  decode(payloads: Payload[]): Promise<Payload[]> {
    return new Promise((resolve) => resolve(payloads.map((payload) => this.decrypt(payload))));
  }

  private encrypt(payload: Payload): Payload {
    const { id, key } = this.current;
    const { nonce, ciphertext, tag } = gcmSeal(key, serialize(payload), Buffer.from(id, 'utf8'));
    return {
      metadata: {
        [METADATA_ENCODING_KEY]: Buffer.from(ENCRYPTED_ENCODING),
        [KEY_ID_METADATA_KEY]: Buffer.from(id),
      },
      data: Buffer.concat([nonce, ciphertext, tag]),
    };
  }

  private decrypt(payload: Payload): Payload {
    const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
    if (!encoding || Buffer.from(encoding).toString() !== ENCRYPTED_ENCODING)
      return this.markUnencrypted ? unencryptedMarker(payload, this.markUnencrypted.allowed) : payload;
    const idBytes = payload.metadata?.[KEY_ID_METADATA_KEY];
    const id = idBytes ? Buffer.from(idBytes).toString() : '';
    const key = this.byId.get(id);
    if (!key)
      throw new PayloadDecryptionError(
        `Payload encrypted with key ${JSON.stringify(id)}, which is not in this process's PAYLOAD_ENCRYPTION_KEYS`,
      );
    const data = Buffer.from(payload.data ?? new Uint8Array());
    if (data.length < GCM_NONCE_BYTES + GCM_TAG_BYTES)
      throw new PayloadDecryptionError(`Encrypted payload (key ${JSON.stringify(id)}) is truncated`);
    try {
      const sealed = {
        nonce: data.subarray(0, GCM_NONCE_BYTES),
        ciphertext: data.subarray(GCM_NONCE_BYTES, data.length - GCM_TAG_BYTES),
        tag: data.subarray(data.length - GCM_TAG_BYTES),
      };
      return deserialize(gcmOpen(key, sealed, Buffer.from(id, 'utf8')));
    } catch {
      throw new PayloadDecryptionError(
        `Encrypted payload (key ${JSON.stringify(id)}) failed authentication: wrong key or altered data`,
      );
    }
  }
}

/** The marker for a payload that arrived unencrypted: a JSON object the workflow recognises (contract/unencrypted). */
function unencryptedMarker(payload: Payload, allowed: boolean): Payload {
  let value: unknown;
  try {
    value = defaultPayloadConverter.fromPayload(payload);
  } catch {
    value = undefined; // an encoding the default converter does not know: nothing a workflow of ours could accept
  }
  const marker: UnencryptedPayload = { allowed, value };
  return defaultPayloadConverter.toPayload({ [UNENCRYPTED_PAYLOAD_KEY]: marker });
}

/** A payload as JSON with base64 bytes (the shape of Temporal's remote codec protocol). */
export interface JsonPayload {
  metadata?: Record<string, string> | null;
  data?: string | null;
}

export function payloadToJson(payload: Payload): JsonPayload {
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([name, value]) => [name, Buffer.from(value).toString('base64')]),
    ),
    data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64'),
  };
}

export function payloadFromJson(json: JsonPayload): Payload {
  return {
    metadata: Object.fromEntries(
      Object.entries(json.metadata ?? {}).map(([name, value]) => [name, Buffer.from(value, 'base64')]),
    ),
    data: Buffer.from(json.data ?? '', 'base64'),
  };
}

const serialize = (payload: Payload): Buffer => Buffer.from(JSON.stringify(payloadToJson(payload)), 'utf8');
const deserialize = (bytes: Buffer): Payload => payloadFromJson(JSON.parse(bytes.toString('utf8')) as JsonPayload);

export const PAYLOAD_KEYS_FILE = 'payload-encryption.keys';

/**
 * The key ring: PAYLOAD_ENCRYPTION_KEYS, or outside production a generated one kept under DATA_DIR, so `npm start`
 * and the CLI in another terminal agree (loadConfig refuses production without it).
 */
export function resolvePayloadKeys(
  config: Pick<Config, 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'>,
  logger?: Logger,
): PayloadKey[] {
  if (config.PAYLOAD_ENCRYPTION_KEYS) return parsePayloadKeyRing(config.PAYLOAD_ENCRYPTION_KEYS);
  if (!isDevelopment(config)) throw new Error('PAYLOAD_ENCRYPTION_KEYS is required in production');
  const { value, created } = readOrCreateDevSecret(config.DATA_DIR, PAYLOAD_KEYS_FILE, () => generatePayloadKey());
  logger?.warn(
    { file: join(config.DATA_DIR, PAYLOAD_KEYS_FILE), created },
    'PAYLOAD_ENCRYPTION_KEYS is not set: using a development key from the data folder; set it in production',
  );
  return parsePayloadKeyRing(value);
}

/**
 * The data converter of every Temporal client and worker of this service: payloads through the codec, and failure
 * messages and stack traces moved into an encoded (so encrypted) attribute instead of plain text in the history.
 */
export function encryptedDataConverter(codec: PayloadCodec): DataConverter {
  return { payloadCodecs: [codec], failureConverterPath: FAILURE_CONVERTER_PATH };
}

/** The module of the failure converter (encodeCommonAttributes), for workflow bundles too. */
export const FAILURE_CONVERTER_PATH = require.resolve('../temporal/failure-converter');

/**
 * Whether a worker delivers events whose input is not encrypted by our codec: outside production yes; in production
 * only with ALLOW_UNENCRYPTED_EVENTS=true (a migration window for clients that do not encrypt yet).
 */
export const unencryptedEventsAllowed = (config: Pick<Config, 'NODE_ENV' | 'ALLOW_UNENCRYPTED_EVENTS'>): boolean =>
  isDevelopment(config) || config.ALLOW_UNENCRYPTED_EVENTS === true;

/** The worker's codec: the key ring, and unencrypted payloads marked as refused or allowed (unencryptedEventsAllowed). */
export function workerPayloadCodecFromConfig(
  config: Pick<Config, 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV' | 'ALLOW_UNENCRYPTED_EVENTS'>,
  logger?: Logger,
): EncryptionCodec {
  return new EncryptionCodec(resolvePayloadKeys(config, logger), {
    markUnencrypted: { allowed: unencryptedEventsAllowed(config) },
  });
}

/** The codec every Temporal client of this service uses. */
export function payloadCodecFromConfig(
  config: Pick<Config, 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'>,
  logger?: Logger,
): EncryptionCodec {
  return new EncryptionCodec(resolvePayloadKeys(config, logger));
}

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
  type SerializationContext,
} from '@temporalio/common';
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, gcmOpen, gcmSeal } from './aes-gcm';
import type { Config } from '../config';
import { BASE64_KEYS, parseKeyRing, type RingKey } from './key-ring';
import { isDevelopment } from '../node-env';
import { UNENCRYPTED_PAYLOAD_KEY, type UnencryptedPayload } from '../contract/sealing/unencrypted';
import type { Logger } from '../telemetry/logger';
import { readOrCreateDevSecret } from './secrets';
import { DataKeyUnavailableError, ProjectDataKeys, type DataKey, type DataKeyStore } from './data-keys';
import { isSafeId } from '../contract/ids';

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
  /**
   * Envelope encryption: a project's payloads are sealed under its own data key (wrapped by the ring, kept in the
   * service's database), so destroying that key makes every copy unreadable. Unset (a client without the database):
   * everything is sealed under the ring key, and payloads sealed under a data key cannot be opened.
   */
  dataKeys?: ProjectDataKeys;
  /** How many workflows' projects to remember (PROJECT_MEMORY unless given). */
  projectMemory?: number;
}

/** Which project data key sealed a payload (envelope encryption); a payload sealed by the ring key names that instead. */
export const DATA_KEY_ID_METADATA_KEY = 'encryption-data-key-id';

/** How many workflows' projects a process remembers (learned from what it decoded), most recent first. */
export const PROJECT_MEMORY = 100_000;

/**
 * AES-256-GCM per payload: the whole payload (metadata and data) is sealed under a random 12-byte nonce; the result
 * carries only `encoding: binary/encrypted` and the key's id. The key id is authenticated (AAD), so it cannot be swapped.
 *
 * With data keys (options.dataKeys), the key is the project's: the project a payload belongs to is the one a delivery's
 * value names (an event's input, an attempt's arguments carry `projectId` and `webhookType`), else the one this process
 * last saw the same workflow's payloads sealed for (Temporal's serialization context names the workflow). A payload of
 * no known project (the service's own workflows: an erasure, a purge, whose inputs must outlive the project's key) is
 * sealed under the ring key as before.
 *
 * Payloads that are not encrypted (a foreign client's plain `temporal workflow start`) pass through decode unchanged,
 * or, in the worker, become an UnencryptedPayload marker (options.markUnencrypted).
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly byId: Map<string, Buffer>;
  private readonly current: PayloadKey;
  private readonly markUnencrypted?: { allowed: boolean };
  private readonly dataKeys?: ProjectDataKeys;
  /** Workflow id → project, as this process sealed or opened its payloads (bounded, oldest forgotten first). */
  private readonly projects = new Map<string, string>();
  private readonly projectMemory: number;

  constructor(ring: PayloadKey[], options: EncryptionCodecOptions = {}) {
    if (ring.length === 0) throw new Error('an encryption codec needs at least one key');
    this.current = ring[0]!;
    this.byId = new Map(ring.map(({ id, key }) => [id, key]));
    this.markUnencrypted = options.markUnencrypted;
    this.dataKeys = options.dataKeys;
    this.projectMemory = options.projectMemory ?? PROJECT_MEMORY;
  }

  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    const dataKey = await this.dataKeyFor(payloads, context?.workflowId);
    if (dataKey) return payloads.map((payload) => seal(payload, dataKey.id, dataKey.key, DATA_KEY_ID_METADATA_KEY));
    return payloads.map((payload) => seal(payload, this.current.id, this.current.key, KEY_ID_METADATA_KEY));
  }

  async decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    const opened: Payload[] = [];
    for (const payload of payloads) opened.push(await this.decrypt(payload, context?.workflowId));
    return opened;
  }

  /** The data key of the payloads' project, when there are data keys and a project is known. */
  private async dataKeyFor(payloads: Payload[], workflowId: string | undefined): Promise<DataKey | undefined> {
    if (!this.dataKeys) return undefined;
    const projectId =
      projectNamedBy(payloads) ?? (workflowId === undefined ? undefined : this.projects.get(workflowId));
    if (projectId === undefined) return undefined;
    this.remember(workflowId, projectId);
    return this.dataKeys.forProject(projectId);
  }

  private remember(workflowId: string | undefined, projectId: string): void {
    if (workflowId === undefined) return;
    this.projects.delete(workflowId);
    this.projects.set(workflowId, projectId);
    if (this.projects.size > this.projectMemory) this.projects.delete(this.projects.keys().next().value!);
  }

  private async decrypt(payload: Payload, workflowId: string | undefined): Promise<Payload> {
    const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
    if (!encoding || Buffer.from(encoding).toString() !== ENCRYPTED_ENCODING)
      return this.markUnencrypted ? unencryptedMarker(payload, this.markUnencrypted.allowed) : payload;
    const dataKeyId = metadataText(payload, DATA_KEY_ID_METADATA_KEY);
    if (dataKeyId !== undefined) {
      const dataKey = await this.openDataKey(dataKeyId);
      this.remember(workflowId, dataKey.projectId);
      return open(payload, dataKey.id, dataKey.key, `data key ${JSON.stringify(dataKeyId)}`);
    }
    const id = metadataText(payload, KEY_ID_METADATA_KEY) ?? '';
    const key = this.byId.get(id);
    if (!key)
      throw new PayloadDecryptionError(
        `Payload encrypted with key ${JSON.stringify(id)}, which is not in this process's PAYLOAD_ENCRYPTION_KEYS`,
      );
    return open(payload, id, key, `key ${JSON.stringify(id)}`);
  }

  private async openDataKey(id: string): Promise<DataKey> {
    if (!this.dataKeys)
      throw new PayloadDecryptionError(
        `Payload sealed under the project data key ${JSON.stringify(id)}; this process has no access to data keys ` +
          "(it needs the service's database)",
      );
    try {
      return await this.dataKeys.byKeyId(id);
    } catch (error) {
      if (error instanceof DataKeyUnavailableError) throw new PayloadDecryptionError(error.message);
      throw error;
    }
  }
}

const metadataText = (payload: Payload, name: string): string | undefined => {
  const bytes = payload.metadata?.[name];
  return bytes ? Buffer.from(bytes).toString() : undefined;
};

/** Seals one payload under `key`, named by `id` in the metadata entry `idKey`. */
function seal(payload: Payload, id: string, key: Buffer, idKey: string): Payload {
  const { nonce, ciphertext, tag } = gcmSeal(key, serialize(payload), Buffer.from(id, 'utf8'));
  return {
    metadata: { [METADATA_ENCODING_KEY]: Buffer.from(ENCRYPTED_ENCODING), [idKey]: Buffer.from(id) },
    data: Buffer.concat([nonce, ciphertext, tag]),
  };
}

/** Opens one sealed payload; the errors name the key (`what`), never any content. */
function open(payload: Payload, id: string, key: Buffer, what: string): Payload {
  const data = Buffer.from(payload.data ?? new Uint8Array());
  if (data.length < GCM_NONCE_BYTES + GCM_TAG_BYTES)
    throw new PayloadDecryptionError(`Encrypted payload (${what}) is truncated`);
  try {
    const sealed = {
      nonce: data.subarray(0, GCM_NONCE_BYTES),
      ciphertext: data.subarray(GCM_NONCE_BYTES, data.length - GCM_TAG_BYTES),
      tag: data.subarray(data.length - GCM_TAG_BYTES),
    };
    return deserialize(gcmOpen(key, sealed, Buffer.from(id, 'utf8')));
  } catch {
    throw new PayloadDecryptionError(`Encrypted payload (${what}) failed authentication: wrong key or altered data`);
  }
}

/**
 * The project a delivery's JSON value names at its top level (`projectId`, beside its `webhookType`), if any of the
 * payloads does. A value with a project but no event type (a purge's input) names none: sealed under the project's key,
 * the purge that destroys the key could no longer read its own history.
 */
function projectNamedBy(payloads: Payload[]): string | undefined {
  for (const payload of payloads) {
    if (metadataText(payload, METADATA_ENCODING_KEY) !== 'json/plain' || !payload.data) continue;
    let value: unknown;
    try {
      value = JSON.parse(Buffer.from(payload.data).toString('utf8'));
    } catch {
      continue;
    }
    const { projectId, webhookType } = (value ?? {}) as { projectId?: unknown; webhookType?: unknown };
    if (isSafeId(projectId) && typeof webhookType === 'string') return projectId;
  }
  return undefined;
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

/**
 * The worker's codec: the key ring, and unencrypted payloads marked as refused or allowed (unencryptedEventsAllowed);
 * with the database's data keys, each project's payloads under its own key.
 */
export function workerPayloadCodecFromConfig(
  config: Pick<Config, 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV' | 'ALLOW_UNENCRYPTED_EVENTS'>,
  logger?: Logger,
  dataKeys?: DataKeyStore,
): EncryptionCodec {
  const ring = resolvePayloadKeys(config, logger);
  return new EncryptionCodec(ring, {
    markUnencrypted: { allowed: unencryptedEventsAllowed(config) },
    dataKeys: dataKeys && new ProjectDataKeys(ring, dataKeys),
  });
}

/** The codec every Temporal client of this service uses; with the database's data keys where the process has them. */
export function payloadCodecFromConfig(
  config: Pick<Config, 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'>,
  logger?: Logger,
  dataKeys?: DataKeyStore,
): EncryptionCodec {
  const ring = resolvePayloadKeys(config, logger);
  return new EncryptionCodec(ring, { dataKeys: dataKeys && new ProjectDataKeys(ring, dataKeys) });
}

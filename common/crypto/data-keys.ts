// Envelope encryption's keys: each project's payloads are sealed under a data key of its own, stored only wrapped by
// the payload key ring (PAYLOAD_ENCRYPTION_KEYS). Destroying a project's data key (its purge) leaves every copy of its
// histories, backups included, unreadable, while the ring and other projects' keys still open theirs.
import { randomBytes } from 'node:crypto';
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, gcmOpen, gcmSeal } from './aes-gcm';
import type { RingKey } from './key-ring';

/** A data key as stored (db/secrets/data-keys.ts): wrapped, or destroyed (no bytes, a time). */
export interface StoredDataKey {
  id: string;
  projectId: string;
  wrapped: Buffer | null;
  wrappingKeyId: string | null;
  destroyedAt: Date | null;
}

/** Where data keys are kept: the service's database, through db/secrets/data-keys.ts. */
export interface DataKeyStore {
  live(projectId: string): Promise<StoredDataKey | undefined>;
  find(id: string): Promise<StoredDataKey | undefined>;
  /** Stores a new key unless the project has a live one; returns the live one either way. */
  insert(key: { id: string; projectId: string; wrapped: Buffer; wrappingKeyId: string }): Promise<StoredDataKey>;
}

/** A data key ready to seal and open with. */
export interface DataKey {
  id: string;
  projectId: string;
  key: Buffer;
}

/** A payload sealed under a key that cannot be had: destroyed by a purge, unknown, or wrapped by a key not in the ring. */
export class DataKeyUnavailableError extends Error {
  override name = 'DataKeyUnavailableError';
}

/** How long an unwrapped key is kept in memory before the store is asked again (so a purge reaches running processes). */
export const DATA_KEY_CACHE_MS = 60_000;

// Stryker disable next-line StringLiteral: a module constant, read once when the module loads, which a mutant switched on
// later cannot change (test/common/data-keys.test.ts checks the ids it makes)
const DATA_KEY_ID_PREFIX = 'pdk_';

/** The AAD of a wrapped key: its id and project, so a wrapped key moved to another row or project does not open. */
const wrapAad = (id: string, projectId: string) => Buffer.from(`project-data-key\0${id}\0${projectId}`, 'utf8');

/** Wraps a data key under a ring key: nonce ‖ ciphertext ‖ tag. */
export function wrapDataKey(ringKey: RingKey, key: DataKey): { wrapped: Buffer; wrappingKeyId: string } {
  const { nonce, ciphertext, tag } = gcmSeal(ringKey.key, key.key, wrapAad(key.id, key.projectId));
  return { wrapped: Buffer.concat([nonce, ciphertext, tag]), wrappingKeyId: ringKey.id };
}

/** Opens a stored key with the ring; throws DataKeyUnavailableError naming the key (never any key bytes). */
export function unwrapDataKey(ring: readonly RingKey[], stored: StoredDataKey): DataKey {
  const name = `data key ${JSON.stringify(stored.id)} of project ${JSON.stringify(stored.projectId)}`;
  if (stored.destroyedAt || !stored.wrapped || !stored.wrappingKeyId)
    throw new DataKeyUnavailableError(
      `Payload sealed under ${name}, destroyed ${stored.destroyedAt?.toISOString()} when the project was purged: ` +
        'it can no longer be decoded by anyone',
    );
  const ringKey = ring.find(({ id }) => id === stored.wrappingKeyId);
  if (!ringKey)
    throw new DataKeyUnavailableError(
      `The ${name} is wrapped by key ${JSON.stringify(stored.wrappingKeyId)}, which is not in this process's ` +
        'PAYLOAD_ENCRYPTION_KEYS',
    );
  const wrapped = stored.wrapped;
  try {
    const key = gcmOpen(
      ringKey.key,
      {
        nonce: wrapped.subarray(0, GCM_NONCE_BYTES),
        ciphertext: wrapped.subarray(GCM_NONCE_BYTES, wrapped.length - GCM_TAG_BYTES),
        tag: wrapped.subarray(wrapped.length - GCM_TAG_BYTES),
      },
      wrapAad(stored.id, stored.projectId),
    );
    return { id: stored.id, projectId: stored.projectId, key };
  } catch {
    throw new DataKeyUnavailableError(`The ${name} failed authentication: wrong ring key or altered row`);
  }
}

interface Cached<T> {
  value: Promise<T>;
  until: number;
}

/**
 * Each project's data key, unwrapped once and kept for DATA_KEY_CACHE_MS: sealing a payload asks the store only when
 * the cache has no live key for the project (the first payload of a project makes its key).
 */
export class ProjectDataKeys {
  private readonly byProject = new Map<string, Cached<DataKey>>();
  private readonly byId = new Map<string, Cached<DataKey>>();

  constructor(
    private readonly ring: readonly RingKey[],
    private readonly store: DataKeyStore,
    private readonly options: { cacheMs?: number; now?: () => number } = {},
  ) {
    if (ring.length === 0) throw new Error('project data keys need a payload key ring');
  }

  /** The project's live key, made (and stored wrapped) when it has none. */
  forProject(projectId: string): Promise<DataKey> {
    return this.cached(this.byProject, projectId, async () => {
      const live = (await this.store.live(projectId)) ?? (await this.store.insert(this.newKey(projectId)));
      const key = unwrapDataKey(this.ring, live);
      this.byId.set(key.id, { value: Promise.resolve(key), until: this.until() });
      return key;
    });
  }

  /** The key a payload names; rejects with DataKeyUnavailableError when it was destroyed, is unknown or cannot open. */
  byKeyId(id: string): Promise<DataKey> {
    return this.cached(this.byId, id, async () => {
      const stored = await this.store.find(id);
      if (!stored)
        throw new DataKeyUnavailableError(
          `Payload sealed under data key ${JSON.stringify(id)}, which this service's database does not hold`,
        );
      return unwrapDataKey(this.ring, stored);
    });
  }

  private newKey(projectId: string) {
    const key: DataKey = {
      id: `${DATA_KEY_ID_PREFIX}${randomBytes(12).toString('hex')}`,
      projectId,
      key: randomBytes(32),
    };
    return { id: key.id, projectId, ...wrapDataKey(this.ring[0]!, key) };
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private until(): number {
    return this.now() + (this.options.cacheMs ?? DATA_KEY_CACHE_MS);
  }

  /** One lookup per key at a time; a failure is not kept (the next payload asks again). */
  private cached(map: Map<string, Cached<DataKey>>, name: string, load: () => Promise<DataKey>): Promise<DataKey> {
    const hit = map.get(name);
    if (hit && hit.until > this.now()) return hit.value;
    const value = load();
    map.set(name, { value, until: this.until() });
    value.catch(() => map.get(name)?.value === value && map.delete(name));
    return value;
  }
}

// Each project's data key as stored: wrapped by the payload key ring (common/crypto/data-keys.ts wraps and unwraps;
// the database never holds the ring, so never a usable key). A destroyed key keeps its row, without its bytes.
import { unwrapDataKey, wrapDataKey, type DataKeyStore } from '../../common/crypto/data-keys';
import type { RingKey } from '../../common/crypto/key-ring';
import type { Db } from '../connection';

export interface DataKeyRow {
  id: string;
  projectId: string;
  /** nonce ‖ ciphertext ‖ tag under the ring key `wrappingKeyId`; null once destroyed. */
  wrapped: Buffer | null;
  wrappingKeyId: string | null;
  createdAt: Date;
  destroyedAt: Date | null;
}

interface DataKeyColumns {
  id: string;
  project_id: string;
  wrapped: Buffer | null;
  wrapping_key_id: string | null;
  created_at: Date;
  destroyed_at: Date | null;
}

const DATA_KEYS = 'project_data_keys';

const toRow = (c: DataKeyColumns): DataKeyRow => ({
  id: c.id,
  projectId: c.project_id,
  wrapped: c.wrapped,
  wrappingKeyId: c.wrapping_key_id,
  createdAt: c.created_at,
  destroyedAt: c.destroyed_at,
});

/** The project's live data key, if it has one. */
export async function liveProjectDataKey(db: Db, projectId: string): Promise<DataKeyRow | undefined> {
  const row = await db(DATA_KEYS)
    .where({ project_id: projectId })
    .whereNull('destroyed_at')
    .first<DataKeyColumns | undefined>();
  return row && toRow(row);
}

/** A data key by its id, live or destroyed. */
export async function findDataKey(db: Db, id: string): Promise<DataKeyRow | undefined> {
  const row = await db(DATA_KEYS).where({ id }).first<DataKeyColumns | undefined>();
  return row && toRow(row);
}

/**
 * Stores a new wrapped data key for the project unless it has a live one already (two processes making the first key
 * at once: one wins); returns the project's live key either way.
 */
export async function insertProjectDataKey(
  db: Db,
  key: { id: string; projectId: string; wrapped: Buffer; wrappingKeyId: string },
): Promise<DataKeyRow> {
  await db.raw(
    `INSERT INTO ${DATA_KEYS} (id, project_id, wrapped, wrapping_key_id) VALUES (?, ?, ?, ?)
     ON CONFLICT (project_id) WHERE destroyed_at IS NULL DO NOTHING`,
    [key.id, key.projectId, key.wrapped, key.wrappingKeyId],
  );
  return (await liveProjectDataKey(db, key.projectId))!;
}

/**
 * Destroys the project's data keys: their wrapped bytes are cleared for good, the rows stay as tombstones naming the
 * key and when it was destroyed. Returns the ids destroyed now (none when there were none, or a purge run again).
 */
export async function destroyProjectDataKeys(db: Db, projectId: string): Promise<string[]> {
  const rows = await db(DATA_KEYS)
    .where({ project_id: projectId })
    .whereNull('destroyed_at')
    .update({ wrapped: null, wrapping_key_id: null, destroyed_at: db.fn.now() })
    .returning<{ id: string }[]>('id');
  return rows.map((row) => row.id);
}

/** Live data keys not wrapped by this ring key (a rotation's rewrap reads them), ids after `after`, at most `limit`. */
export async function dataKeysNotWrappedBy(
  db: Db,
  wrappingKeyId: string,
  after = '',
  limit = 1_000,
): Promise<DataKeyRow[]> {
  const rows = await db(DATA_KEYS)
    .whereNull('destroyed_at')
    .whereNot({ wrapping_key_id: wrappingKeyId })
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
    .select<DataKeyColumns[]>();
  return rows.map(toRow);
}

/** Replaces a live key's wrapping (the same key, wrapped by another ring key); false when it was destroyed meanwhile. */
export async function rewrapDataKey(
  db: Db,
  id: string,
  wrapping: { wrapped: Buffer; wrappingKeyId: string },
): Promise<boolean> {
  const updated = await db(DATA_KEYS)
    .where({ id })
    .whereNull('destroyed_at')
    .update({ wrapped: wrapping.wrapped, wrapping_key_id: wrapping.wrappingKeyId });
  return updated > 0;
}

/** The store the payload codec reads its data keys from (common/crypto/data-keys.ts). */
export const dataKeyStore = (db: Db): DataKeyStore => ({
  live: (projectId) => liveProjectDataKey(db, projectId),
  find: (id) => findDataKey(db, id),
  insert: (key) => insertProjectDataKey(db, key),
});

/** What a rewrap did: keys wrapped again under `keyId`, and those left as they were because the ring cannot open them. */
export interface RewrapReport {
  keyId: string;
  rewrapped: number;
  unopened: { id: string; projectId: string; reason: string }[];
}

/**
 * Wraps every live data key not yet under the newest ring key again under it (after a rotation of
 * PAYLOAD_ENCRYPTION_KEYS, before an old key is dropped). A key the ring cannot open is left as it was and reported.
 */
export async function rewrapDataKeys(db: Db, ring: readonly RingKey[]): Promise<RewrapReport> {
  const report: RewrapReport = { keyId: ring[0]!.id, rewrapped: 0, unopened: [] };
  for (let after = ''; ;) {
    const batch = await dataKeysNotWrappedBy(db, report.keyId, after);
    if (batch.length === 0) return report;
    for (const stored of batch) {
      after = stored.id;
      let key;
      try {
        key = unwrapDataKey(ring, stored);
      } catch (error) {
        report.unopened.push({ id: stored.id, projectId: stored.projectId, reason: (error as Error).message });
        continue;
      }
      if (await rewrapDataKey(db, stored.id, wrapDataKey(ring[0]!, key))) report.rewrapped += 1;
    }
  }
}

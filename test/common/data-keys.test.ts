// Envelope encryption's logic on an in-memory store: which key seals a payload, what a destroyed or foreign key
// answers, and how long a process keeps an unwrapped key. The database store and a real Temporal are proven in
// test/erasure/crypto-shredding.test.ts and test/operations/key-procedures.test.ts.
import assert from 'node:assert/strict';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import {
  DATA_KEY_CACHE_MS,
  ProjectDataKeys,
  unwrapDataKey,
  type DataKeyStore,
  type StoredDataKey,
} from '../../common/crypto/data-keys';
import {
  DATA_KEY_ID_METADATA_KEY,
  EncryptionCodec,
  KEY_ID_METADATA_KEY,
  PayloadDecryptionError,
  generatePayloadKey,
  parsePayloadKeyRing,
  payloadCodecFromConfig,
} from '../../common/crypto/payload-codec';

/** The store as the database keeps it, in memory, counting what is asked of it. */
class MemoryStore implements DataKeyStore {
  readonly rows = new Map<string, StoredDataKey>();
  asked = 0;
  live(projectId: string) {
    this.asked += 1;
    return Promise.resolve([...this.rows.values()].find((row) => row.projectId === projectId && !row.destroyedAt));
  }
  find(id: string) {
    this.asked += 1;
    return Promise.resolve(this.rows.get(id));
  }
  async insert(key: { id: string; projectId: string; wrapped: Buffer; wrappingKeyId: string }) {
    const live = await this.live(key.projectId);
    if (live) return live;
    const row = { ...key, destroyedAt: null };
    this.rows.set(key.id, row);
    return row;
  }
  destroy(projectId: string) {
    for (const row of this.rows.values())
      if (row.projectId === projectId)
        Object.assign(row, { wrapped: null, wrappingKeyId: null, destroyedAt: new Date() });
  }
}

const ring = parsePayloadKeyRing(`${generatePayloadKey()},${generatePayloadKey(new Date('2025-01-01'))}`);
const value = (payload: Payload) => defaultPayloadConverter.fromPayload<unknown>(payload);
const text = (payload: Payload, key: string) => Buffer.from(payload.metadata?.[key] ?? new Uint8Array()).toString();
const event = (projectId: unknown) =>
  defaultPayloadConverter.toPayload({
    projectId,
    webhookType: 'FALL_DETECTION',
    userUUID: 'u-1',
    payload: { firstName: 'Pat' },
  });
const result = () => defaultPayloadConverter.toPayload({ status: 'delivered' });
const workflow = (workflowId: string) => ({ type: 'workflow' as const, namespace: 'default', workflowId });

function envelope(store = new MemoryStore(), options: { cacheMs?: number; now?: () => number } = {}) {
  return { store, codec: new EncryptionCodec(ring, { dataKeys: new ProjectDataKeys(ring, store, options) }) };
}

describe('project data keys (envelope encryption in the payload codec)', () => {
  it('seals a value naming its project under that project’s own key, made once and stored only wrapped', async () => {
    const { store, codec } = envelope();
    const [a1] = await codec.encode([event('proj-a')]);
    const [a2] = await codec.encode([event('proj-a')]);
    const [b] = await codec.encode([event('proj-b')]);
    const idOf = (payload: Payload) => text(payload, DATA_KEY_ID_METADATA_KEY);
    assert.match(idOf(a1!), /^pdk_[0-9a-f]{24}$/);
    assert.equal(idOf(a2!), idOf(a1!), 'one key per project');
    assert.notEqual(idOf(b!), idOf(a1!), 'each project its own');
    assert.equal(text(a1!, KEY_ID_METADATA_KEY), '', 'no ring key named');
    assert.equal(store.rows.size, 2);
    const row = store.rows.get(idOf(a1!))!;
    assert.equal(row.projectId, 'proj-a');
    assert.equal(row.wrappingKeyId, ring[0]!.id, 'wrapped by the newest ring key');
    assert.equal(row.wrapped!.length, 12 + 32 + 16);
    assert.deepEqual(value((await codec.decode([a1!]))[0]!), value(event('proj-a')));
  });

  it('keeps an unwrapped key for DATA_KEY_CACHE_MS, then asks the store again', async () => {
    let now = 0;
    const { store, codec } = envelope(new MemoryStore(), { now: () => now });
    await codec.encode([event('proj-a')]);
    const asked = store.asked;
    now = DATA_KEY_CACHE_MS - 1;
    await codec.encode([event('proj-a')]);
    assert.equal(store.asked, asked, 'cached');
    now = DATA_KEY_CACHE_MS;
    await codec.encode([event('proj-a')]);
    assert.equal(store.asked, asked + 1, 'asked again once the time is up');
  });

  it('seals what names no project under its workflow’s project once the process has seen one, else under the ring', async () => {
    const { store, codec } = envelope();
    const [input] = await codec.encode([event('proj-a')], workflow('wf-1'));
    const [other] = await codec.encode([result()], workflow('wf-2'));
    assert.equal(text(other!, KEY_ID_METADATA_KEY), ring[0]!.id, 'a workflow of no known project: the ring key');
    assert.equal(text(other!, DATA_KEY_ID_METADATA_KEY), '');
    const [sealed] = await codec.encode([result()], workflow('wf-1'));
    assert.equal(text(sealed!, DATA_KEY_ID_METADATA_KEY), text(input!, DATA_KEY_ID_METADATA_KEY));

    // Another process learns the workflow's project from what it opens (a worker replaying the history).
    const { codec: worker } = envelope(store);
    await worker.decode([input!], workflow('wf-1'));
    const [written] = await worker.encode([result()], workflow('wf-1'));
    assert.equal(text(written!, DATA_KEY_ID_METADATA_KEY), text(input!, DATA_KEY_ID_METADATA_KEY));
  });

  it('reads the project only from a delivery’s JSON value: its own projectId in the safe alphabet, beside its type', async () => {
    const { codec } = envelope();
    for (const payload of [
      event('../etc'),
      event(42),
      defaultPayloadConverter.toPayload({ nested: { projectId: 'proj-a', webhookType: 'FALL_DETECTION' } }),
      // A purge's input names the project it removes: sealed under that project's key, it could not be read after.
      defaultPayloadConverter.toPayload({ purgeId: 'p-1', projectId: 'proj-a' }),
      defaultPayloadConverter.toPayload({ projectId: 'proj-a', webhookType: 7 }),
      {
        metadata: { encoding: Buffer.from('binary/plain') },
        data: Buffer.from('{"projectId":"proj-a","webhookType":"FALL_DETECTION"}'),
      },
      { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{not json') },
    ]) {
      const [sealed] = await codec.encode([payload]);
      assert.equal(text(sealed!, KEY_ID_METADATA_KEY), ring[0]!.id);
    }
  });

  it('answers a payload of a destroyed key with an error naming the key and its project, nothing of the content', async () => {
    const { store, codec } = envelope();
    const [sealed] = await codec.encode([event('proj-a')]);
    store.destroy('proj-a');
    const fresh = envelope(store).codec;
    await assert.rejects(fresh.decode([sealed!]), (error: unknown) => {
      assert.ok(error instanceof PayloadDecryptionError);
      assert.match(
        error.message,
        /^Payload sealed under data key "pdk_[0-9a-f]{24}" of project "proj-a", destroyed \d{4}-\d\d-\d\dT.* when the project was purged: it can no longer be decoded by anyone$/,
      );
      assert.doesNotMatch(error.message, /Pat|u-1/);
      return true;
    });
    // The next payload of the project gets a new key: a purge ends what was, not what comes.
    const [after] = await fresh.encode([event('proj-a')]);
    assert.notEqual(text(after!, DATA_KEY_ID_METADATA_KEY), text(sealed!, DATA_KEY_ID_METADATA_KEY));
  });

  it('refuses a key the database does not hold, one wrapped by a ring key not configured, and a row moved', async () => {
    const { store, codec } = envelope();
    const [sealed] = await codec.encode([event('proj-a')]);
    const id = text(sealed!, DATA_KEY_ID_METADATA_KEY);
    const unknown = { ...sealed!, metadata: { ...sealed!.metadata, [DATA_KEY_ID_METADATA_KEY]: Buffer.from('pdk_0') } };
    await assert.rejects(envelope(store).codec.decode([unknown]), /data key "pdk_0", which this service's database/);

    const otherRing = parsePayloadKeyRing(generatePayloadKey(new Date('2020-01-01')));
    const stranger = new EncryptionCodec(otherRing, { dataKeys: new ProjectDataKeys(otherRing, store) });
    await assert.rejects(
      stranger.decode([sealed!]),
      new RegExp(`wrapped by key "${ring[0]!.id}", which is not in this process's PAYLOAD_ENCRYPTION_KEYS`),
    );

    // The wrapped bytes bound to their id and project: moved to another project's row, they do not open.
    const row = store.rows.get(id)!;
    assert.throws(
      () => unwrapDataKey(ring, { ...row, projectId: 'proj-b' }),
      /data key "pdk_[0-9a-f]{24}" of project "proj-b" failed authentication/,
    );
  });

  it('refuses a data-key payload in a process without data keys, and altered ciphertext', async () => {
    const { store, codec } = envelope();
    const [sealed] = await codec.encode([event('proj-a')]);
    await assert.rejects(
      new EncryptionCodec(ring).decode([sealed!]),
      /^PayloadDecryptionError: Payload sealed under the project data key "pdk_[0-9a-f]{24}"; this process has no access to data keys \(it needs the service's database\)$/,
    );
    const data = Buffer.from(sealed!.data!);
    data[20] = data[20]! ^ 1;
    await assert.rejects(
      envelope(store).codec.decode([{ ...sealed!, data }]),
      /Encrypted payload \(data key "pdk_[0-9a-f]{24}"\) failed authentication/,
    );
  });

  it('remembers the projects of the most recent workflows only, as many as it is told', async () => {
    const store = new MemoryStore();
    const codec = new EncryptionCodec(ring, { dataKeys: new ProjectDataKeys(ring, store), projectMemory: 2 });
    const [input] = await codec.encode([event('proj-a')], workflow('wf-1'));
    const dataKeyId = text(input!, DATA_KEY_ID_METADATA_KEY);
    await codec.encode([event('proj-a')], workflow('wf-2'));
    const sealedFor = async (workflowId: string) =>
      text((await codec.encode([result()], workflow(workflowId)))[0]!, DATA_KEY_ID_METADATA_KEY);
    assert.equal(await sealedFor('wf-1'), dataKeyId, 'two remembered');
    // wf-1 was used last: a third workflow makes wf-2 the one forgotten.
    await codec.encode([event('proj-a')], workflow('wf-3'));
    assert.equal(await sealedFor('wf-1'), dataKeyId);
    assert.equal(await sealedFor('wf-2'), '', 'forgotten: under the ring');
  });

  it('asks the store again after a failed lookup: a failure is not kept', async () => {
    const store = new MemoryStore();
    const [sealed] = await envelope(store).codec.encode([event('proj-a')]);
    const flaky = Object.assign(Object.create(store) as MemoryStore, {
      failures: 1,
      find(this: MemoryStore & { failures: number }, id: string) {
        if (this.failures-- > 0) return Promise.reject(new Error('database unavailable'));
        return store.find(id);
      },
    });
    const { codec } = envelope(flaky);
    await assert.rejects(codec.decode([sealed!]), /database unavailable/);
    assert.deepEqual(value((await codec.decode([sealed!]))[0]!), value(event('proj-a')));
  });

  it('payloadCodecFromConfig with a store seals each project under its key; without one, under the ring', async () => {
    const config = {
      PAYLOAD_ENCRYPTION_KEYS: generatePayloadKey(),
      DATA_DIR: '.data',
      NODE_ENV: 'production' as const,
    };
    const [withKeys] = await payloadCodecFromConfig(config, undefined, new MemoryStore()).encode([event('proj-a')]);
    assert.match(text(withKeys!, DATA_KEY_ID_METADATA_KEY), /^pdk_/);
    const [ringOnly] = await payloadCodecFromConfig(config).encode([event('proj-a')]);
    assert.equal(text(ringOnly!, DATA_KEY_ID_METADATA_KEY), '');
  });

  it('needs a ring', () => {
    assert.throws(() => new ProjectDataKeys([], new MemoryStore()), /need a payload key ring/);
  });
});

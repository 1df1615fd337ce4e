import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { loadConfig } from '../../common/config';
import { BASE64_KEY_RING_PATTERN } from '../../common/crypto/key-ring';
import {
  ENCRYPTED_ENCODING,
  EncryptionCodec,
  KEY_ID_METADATA_KEY,
  PAYLOAD_KEYS_FILE,
  PayloadDecryptionError,
  generatePayloadKey,
  parsePayloadKeyRing,
  payloadCodecFromConfig,
  payloadFromJson,
  payloadToJson,
  resolvePayloadKeys,
  workerPayloadCodecFromConfig,
} from '../../common/crypto/payload-codec';
import { MockActivityEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType, unencryptedPayloadOf } from '../../common/contract';
import { unencryptedActivityInputGuard } from '../../worker/unencrypted-guard';
import { captureLogger } from '../support/deliveries';
import { fallPayload } from '../support/deliveries';

const keyEntry = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
const text = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('latin1');
const event = () => defaultPayloadConverter.toPayload({ projectId: 'p1', payload: fallPayload });

describe('payload codec (AES-256-GCM, key ring)', () => {
  const oldKey = keyEntry('k-2025');
  const newKey = keyEntry('k-2026');

  it('seals the whole payload: only encoding and key id show, no personal field, and it opens again', async () => {
    const codec = new EncryptionCodec(parsePayloadKeyRing(oldKey));
    const plain = event();
    const [sealed] = await codec.encode([plain]);
    assert.deepEqual(Object.keys(sealed!.metadata ?? {}).sort(), ['encoding', KEY_ID_METADATA_KEY]);
    assert.equal(text(sealed!.metadata!.encoding), ENCRYPTED_ENCODING);
    assert.equal(text(sealed!.metadata![KEY_ID_METADATA_KEY]), 'k-2025');
    for (const field of ['ada@example.com', 'Lovelace', 'json/plain', 'fall'])
      assert.ok(!text(sealed!.data).includes(field), `${field} must not show in the ciphertext`);
    const [opened] = await codec.decode([sealed!]);
    assert.deepEqual(defaultPayloadConverter.fromPayload(opened!), { projectId: 'p1', payload: fallPayload });
    assert.equal(text(opened!.metadata!.encoding), 'json/plain');
  });

  it('uses a fresh 12-byte nonce per payload (same input, different ciphertexts) and a 16-byte tag', async () => {
    const codec = new EncryptionCodec(parsePayloadKeyRing(oldKey));
    const [a, b] = await codec.encode([event(), event()]);
    assert.notDeepEqual(Buffer.from(a!.data!), Buffer.from(b!.data!));
    assert.notDeepEqual(Buffer.from(a!.data!).subarray(0, 12), Buffer.from(b!.data!).subarray(0, 12));
    const inner = Buffer.from(JSON.stringify(payloadToJson(event())));
    assert.equal(a!.data!.length, 12 + inner.length + 16);
  });

  it('opens a payload encrypted by an earlier release (histories keep opening)', async () => {
    const codec = new EncryptionCodec(parsePayloadKeyRing(`k-2025:${Buffer.alloc(32, 2).toString('base64')}`));
    const recorded = payloadFromJson({
      metadata: { encoding: 'YmluYXJ5L2VuY3J5cHRlZA==', 'encryption-key-id': 'ay0yMDI1' },
      data:
        'CLO2pwLmdWjN//WspjHI0BRLPOoNjCCHqKoZe7pVet7Mn3yCx/eVgJyocsFBaRrnQs5q0NrElfawdJ6ZgiHJ/TPRf+t1L0Tb/HE95FusPwnUv/' +
        'OiU4EYdw6sm3xb37KX2xSb7Jfw6k7G1w==',
    });
    const [opened] = await codec.decode([recorded]);
    assert.deepEqual(defaultPayloadConverter.fromPayload(opened!), { recorded: true });
  });

  it('after rotation encrypts with the first key and still opens payloads of the old one', async () => {
    const before = new EncryptionCodec(parsePayloadKeyRing(oldKey));
    const after = new EncryptionCodec(parsePayloadKeyRing(`${newKey},${oldKey}`));
    const [old] = await before.encode([event()]);
    const [fresh] = await after.encode([event()]);
    assert.equal(text(fresh!.metadata![KEY_ID_METADATA_KEY]), 'k-2026');
    const [a, b] = await after.decode([old!, fresh!]);
    assert.deepEqual(defaultPayloadConverter.fromPayload(a!), defaultPayloadConverter.fromPayload(b!));
  });

  it('passes payloads that are not encrypted through decode (foreign clients keep working)', async () => {
    const codec = new EncryptionCodec(parsePayloadKeyRing(oldKey));
    const plain = event();
    const [decoded] = await codec.decode([plain]);
    assert.equal(decoded, plain);
    const bare: Payload = { data: Buffer.from('x') }; // no metadata at all
    assert.equal((await codec.decode([bare]))[0], bare);
    // The clients' codec (API, CLI) does the same: it never wraps a payload as the worker does.
    const client = payloadCodecFromConfig({
      PAYLOAD_ENCRYPTION_KEYS: oldKey,
      DATA_DIR: '.data',
      NODE_ENV: 'production',
    });
    assert.equal((await client.decode([plain]))[0], plain);
    const [sealed] = await client.encode([plain]);
    assert.equal(text(sealed!.metadata![KEY_ID_METADATA_KEY]), 'k-2025');
    assert.deepEqual((await codec.decode([sealed!]))[0], payloadFromJson(payloadToJson(plain)));
  });

  it('seals and opens a payload without metadata or data', async () => {
    const codec = new EncryptionCodec(parsePayloadKeyRing(oldKey));
    const [opened] = await codec.decode(await codec.encode([{}]));
    assert.deepEqual(opened, { metadata: {}, data: Buffer.alloc(0) });
  });

  it('needs at least one key', () => {
    assert.throws(() => new EncryptionCodec([]), /needs at least one key/);
  });

  it('the worker’s codec hands over an unencrypted payload as a marker: refused in production, allowed in the window', async () => {
    const ring = { PAYLOAD_ENCRYPTION_KEYS: newKey, DATA_DIR: '.data', ALLOW_UNENCRYPTED_EVENTS: false };
    const strict = workerPayloadCodecFromConfig({ ...ring, NODE_ENV: 'production' });
    const window = workerPayloadCodecFromConfig({ ...ring, NODE_ENV: 'production', ALLOW_UNENCRYPTED_EVENTS: true });
    const development = workerPayloadCodecFromConfig({ ...ring, NODE_ENV: 'development' });
    const value = (payload: Payload) => defaultPayloadConverter.fromPayload(payload);
    const [refused] = await strict.decode([event()]);
    assert.deepEqual(unencryptedPayloadOf(value(refused!)), { allowed: false, value: value(event()) });
    assert.equal(unencryptedPayloadOf(value((await window.decode([event()]))[0]!))?.allowed, true);
    assert.equal(unencryptedPayloadOf(value((await development.decode([event()]))[0]!))?.allowed, true);
    const test = workerPayloadCodecFromConfig({ ...ring, NODE_ENV: 'test' });
    assert.equal(unencryptedPayloadOf(value((await test.decode([event()]))[0]!))?.allowed, false, 'test is production');
    // Encrypted with the key: the value itself, no marker.
    const [sealed] = await new EncryptionCodec(parsePayloadKeyRing(newKey)).encode([event()]);
    assert.deepEqual(value((await strict.decode([sealed!]))[0]!), value(event()));
    // A plain payload dressed as an allowed marker is wrapped like any other: it cannot allow itself.
    const forged = defaultPayloadConverter.toPayload({ __unencryptedPayload: { allowed: true, value: 1 } });
    assert.equal(unencryptedPayloadOf(value((await strict.decode([forged]))[0]!))?.allowed, false);
    // An encoding no converter of ours reads: marked too, with no value a workflow could act on.
    const foreign: Payload = { metadata: { encoding: Buffer.from('binary/foreign') }, data: Buffer.from('?') };
    assert.deepEqual(unencryptedPayloadOf(value((await strict.decode([foreign]))[0]!)), { allowed: false });
    assert.deepEqual(unencryptedPayloadOf(value((await development.decode([foreign]))[0]!)), { allowed: true });
  });

  it('an activity whose input arrived unencrypted fails for good in production, before it runs; allowed, it is unwrapped', async () => {
    const log = captureLogger();
    const env = new MockActivityEnvironment(undefined, { interceptors: [unencryptedActivityInputGuard(log.logger)] });
    const ran: unknown[] = [];
    const activity = (input: unknown) => (ran.push(input), Promise.resolve('sent'));
    const refusal = await env.run(activity, { __unencryptedPayload: { allowed: false, value: { body: 'x' } } }).then(
      () => assert.fail('must be refused'),
      (error: unknown) => error,
    );
    assert.ok(refusal instanceof ApplicationFailure);
    assert.equal(refusal.type, FailureType.UnencryptedEventRefused);
    assert.equal(refusal.nonRetryable, true);
    assert.deepEqual(ran, [], 'the activity never ran');
    assert.equal(log.lines.filter((l) => /not encrypted/.test(String(l.msg))).length, 1);
    assert.ok(!log.raw.join('').includes('"body"'), 'no input in the log');
    assert.equal(await env.run(activity, { __unencryptedPayload: { allowed: true, value: { body: 'y' } } }), 'sent');
    assert.equal(await env.run(activity, { body: 'z' }), 'sent');
    assert.deepEqual(ran, [{ body: 'y' }, { body: 'z' }]);
  });

  it('refuses an unencrypted activity input whatever the scheduling workflow calls itself (deliverWebhookEvent too)', async () => {
    // A foreign workflow may take our workflow's type name: the name proves nothing, the input's encryption does.
    for (const workflowType of ['deliverWebhookEvent', 'someoneElsesWorkflow']) {
      const env = new MockActivityEnvironment(
        { workflowType, workflowExecution: { workflowId: `foreign-${workflowType}`, runId: 'r1' } },
        { interceptors: [unencryptedActivityInputGuard(captureLogger().logger)] },
      );
      const ran: unknown[] = [];
      const activity = (input: unknown) => (ran.push(input), Promise.resolve('sent'));
      const refusal = await env.run(activity, { __unencryptedPayload: { allowed: false, value: { body: 'x' } } }).then(
        () => assert.fail(`${workflowType}: must be refused`),
        (error: unknown) => error,
      );
      assert.equal((refusal as ApplicationFailure).type, FailureType.UnencryptedEventRefused, workflowType);
      assert.deepEqual(ran, [], `${workflowType}: the activity never ran`);
    }
  });

  it('refuses an unknown key id or altered data with an error naming the key id and nothing of the content', async () => {
    const writer = new EncryptionCodec(parsePayloadKeyRing(newKey));
    const reader = new EncryptionCodec(parsePayloadKeyRing(oldKey));
    const [sealed] = await writer.encode([event()]);
    await assert.rejects(reader.decode([sealed!]), (error: Error) => {
      assert.ok(error instanceof PayloadDecryptionError);
      assert.match(error.message, /key "k-2026", which is not in this process's PAYLOAD_ENCRYPTION_KEYS/);
      assert.doesNotMatch(error.message, /ada|Lovelace/);
      return true;
    });
    const tampered: Payload = { ...sealed!, data: Buffer.from(sealed!.data!) };
    tampered.data![20]! ^= 1;
    await assert.rejects(writer.decode([tampered]), /failed authentication: wrong key or altered data/);
    // The key id is authenticated: relabelling a payload with another ring key fails too.
    const both = new EncryptionCodec(parsePayloadKeyRing(`${newKey},${oldKey}`));
    const relabelled = { ...sealed!, metadata: { ...sealed!.metadata, [KEY_ID_METADATA_KEY]: Buffer.from('k-2025') } };
    await assert.rejects(both.decode([relabelled]), /failed authentication/);
    // Without a key id, or cut short: refused as such, never handed on.
    const unlabelled = { ...sealed!, metadata: { encoding: Buffer.from(ENCRYPTED_ENCODING) } };
    await assert.rejects(writer.decode([unlabelled]), /^PayloadDecryptionError: Payload encrypted with key "", which/);
    for (const length of [0, 27]) {
      const truncated = { ...sealed!, data: Buffer.from(sealed!.data!).subarray(0, length) };
      await assert.rejects(
        writer.decode([truncated]),
        /^PayloadDecryptionError: Encrypted payload \(key "k-2026"\) is truncated$/,
      );
    }
    await assert.rejects(writer.decode([{ metadata: sealed!.metadata }]), /is truncated/);
  });

  it('round-trips the JSON form of the remote codec protocol', () => {
    const payload = event();
    assert.deepEqual(payloadFromJson(payloadToJson(payload)), {
      metadata: { encoding: Buffer.from('json/plain') },
      data: Buffer.from(payload.data!),
    });
  });

  it('parses the key ring and refuses malformed ones, naming the entry but never the key', () => {
    assert.deepEqual(
      parsePayloadKeyRing(`${newKey},${oldKey}`).map((k) => k.id),
      ['k-2026', 'k-2025'],
    );
    assert.throws(
      () => parsePayloadKeyRing(`k1:${randomBytes(16).toString('base64')}`),
      /key k1 must decode to 32 bytes/,
    );
    assert.throws(() => parsePayloadKeyRing(`${oldKey},${oldKey}`), /key id twice/);
    assert.throws(() => parsePayloadKeyRing(randomBytes(32).toString('base64')), /entry 1 must be id:base64key/);
    const spaced = parsePayloadKeyRing(` ${newKey} , ,${oldKey},`);
    assert.deepEqual(spaced, parsePayloadKeyRing(`${newKey},${oldKey}`));
    assert.deepEqual(spaced[0]!.key, Buffer.from(newKey.slice('k-2026:'.length), 'base64'));
    for (const empty of ['', ' ', ', ,']) assert.throws(() => parsePayloadKeyRing(empty), /has no key/);
    const key = randomBytes(32).toString('base64');
    for (const id of ['', ' ', 'k 1', 'k/1', 'é1', 'k1é', 'i'.repeat(65)])
      assert.throws(
        () => parsePayloadKeyRing(`${oldKey},${id}:${key}`),
        (error: Error) =>
          /^PAYLOAD_ENCRYPTION_KEYS entry 2 must be id:base64key/.test(error.message) && !error.message.includes(key),
      );
    assert.equal(parsePayloadKeyRing(`${'i'.repeat(64)}:${key}`)[0]!.id.length, 64);
    assert.equal(parsePayloadKeyRing(`a:${key}`)[0]!.id, 'a');
    assert.throws(() => parsePayloadKeyRing(`k1${'A'.repeat(43)}=`), /entry 1 must be id:base64key/);
  });

  it('generates dated key-ring entries of 32 random bytes that the configuration accepts', () => {
    const entry = generatePayloadKey(new Date('2026-11-24T23:59:59Z'));
    assert.match(entry, /^key-2026-11-24-[0-9a-f]{6}:/);
    assert.match(entry, new RegExp(BASE64_KEY_RING_PATTERN));
    const [key] = parsePayloadKeyRing(entry);
    assert.equal(key!.key.length, 32);
    assert.equal(
      loadConfig({ PAYLOAD_ENCRYPTION_KEYS: `${entry},${generatePayloadKey()}` }).PAYLOAD_ENCRYPTION_KEYS?.length,
      2 * entry.length + 1,
    );
    const entries = new Set(Array.from({ length: 20 }, () => generatePayloadKey(new Date('2026-11-24T00:00:00Z'))));
    assert.equal(entries.size, 20);
    assert.equal(new Set([...entries].map((e) => e.split(':')[0])).size, 20, 'ids differ even on the same day');
  });

  it('config: production refuses to start without PAYLOAD_ENCRYPTION_KEYS and rejects a malformed ring', () => {
    const production = { NODE_ENV: 'production', WEBHOOK_SECRET_KEY: 'ab'.repeat(32) };
    assert.throws(() => loadConfig(production), /PAYLOAD_ENCRYPTION_KEYS is required in production/);
    assert.equal(loadConfig({ ...production, PAYLOAD_ENCRYPTION_KEYS: oldKey }).PAYLOAD_ENCRYPTION_KEYS, oldKey);
    assert.throws(() => loadConfig({ PAYLOAD_ENCRYPTION_KEYS: 'not a key' }), /PAYLOAD_ENCRYPTION_KEYS/);
    assert.throws(() => loadConfig({ PAYLOAD_ENCRYPTION_KEYS: `${oldKey},${oldKey}` }), /key id twice/);
  });

  it('outside production without keys, creates a development key ring in DATA_DIR (0600) and reuses it', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'payload-keys-'));
    const config = loadConfig({ DATA_DIR: dataDir });
    const log = captureLogger();
    const first = resolvePayloadKeys(config, log.logger);
    const second = resolvePayloadKeys(config, log.logger);
    assert.equal(first.length, 1);
    assert.deepEqual(second, first);
    const file = join(dataDir, PAYLOAD_KEYS_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(readFileSync(file, 'utf8').startsWith(`${first[0]!.id}:`));
    // The operator is told which file holds the keys, and whether it was just made; never the key.
    assert.deepEqual(
      log.lines.map((l) => [l.level, l.file, l.created]),
      [
        [40, file, true],
        [40, file, false],
      ],
    );
    assert.match(String(log.lines[0]!.msg), /PAYLOAD_ENCRYPTION_KEYS is not set/);
    assert.ok(!log.raw.join('').includes(first[0]!.key.toString('base64')));
  });

  it('in production refuses to make up a key ring, and uses the configured one', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'payload-keys-'));
    assert.throws(
      () => resolvePayloadKeys({ DATA_DIR: dataDir, NODE_ENV: 'production' }),
      /PAYLOAD_ENCRYPTION_KEYS is required in production/,
    );
    assert.deepEqual(
      resolvePayloadKeys({
        PAYLOAD_ENCRYPTION_KEYS: `${newKey},${oldKey}`,
        DATA_DIR: dataDir,
        NODE_ENV: 'development',
      }),
      parsePayloadKeyRing(`${newKey},${oldKey}`),
    );
    assert.throws(() => readFileSync(join(dataDir, PAYLOAD_KEYS_FILE)), /ENOENT/, 'no file was made');
  });
});

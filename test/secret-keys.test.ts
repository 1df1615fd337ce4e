import assert from 'node:assert/strict';
import { createCipheriv, randomBytes } from 'node:crypto';
import { main } from '../cli/index';
import type { CliIo } from '../cli/command';
import { loadConfig } from '../common/config';
import { createSecretBox, parseSecretKeyRing, registrationSecretAad } from '../common/secrets';
import { addProject, createRegistration } from '../db';
import { createTestDatabase, type TestDatabase } from './support/postgres';

const hex = () => randomBytes(32).toString('hex');
const aad = registrationSecretAad('3b8f2c1e-0000-4000-8000-000000000000');

/** The v1 format as it was written before key ids: `v1:iv:tag:ciphertext`. */
function sealV1(key: Buffer, plaintext: string, additional: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(additional));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), ciphertext.toString('base64')].join(':');
}

describe('at-rest secret key ring (WEBHOOK_SECRET_KEYS)', () => {
  const k1 = hex();
  const k2 = hex();

  it('writes the key id into the sealed value and opens old keys after rotation', () => {
    const before = createSecretBox(parseSecretKeyRing(`k1:${k1}`));
    const after = createSecretBox(parseSecretKeyRing(`k2:${k2},k1:${k1}`));
    const old = before.seal('whsec_old', aad);
    assert.match(old, /^v2:k1:/);
    assert.match(after.seal('whsec_new', aad), /^v2:k2:/);
    assert.equal(after.open(old, aad), 'whsec_old');
    assert.equal(after.isStale(old), true);
    assert.equal(after.isStale(after.seal('x', aad)), false);
    assert.throws(() => createSecretBox(parseSecretKeyRing(`k2:${k2}`)).open(old, aad), /key k1, which is not in/);
  });

  it('still reads the v1 format (no key id) with whichever ring key sealed it', () => {
    const legacy = sealV1(Buffer.from(k1, 'hex'), 'whsec_legacy', aad);
    const ring = createSecretBox(parseSecretKeyRing(`k2:${k2},k1:${k1}`));
    assert.equal(ring.open(legacy, aad), 'whsec_legacy');
    assert.equal(ring.isStale(legacy), true);
    assert.equal(createSecretBox(Buffer.from(k1, 'hex')).open(legacy, aad), 'whsec_legacy', 'WEBHOOK_SECRET_KEY alone');
    assert.throws(() => createSecretBox(parseSecretKeyRing(`k2:${k2}`)).open(legacy, aad), /no key of the ring/);
  });

  it('refuses a GCM tag shorter than 16 bytes', () => {
    const box = createSecretBox(parseSecretKeyRing(`k1:${k1}`));
    const parts = box.seal('whsec_x', aad).split(':');
    parts[3] = Buffer.from(parts[3]!, 'base64').subarray(0, 12).toString('base64');
    assert.throws(() => box.open(parts.join(':'), aad), /GCM tag that is not 16 bytes/);
  });

  it('config: accepts a ring in production, refuses malformed ones', () => {
    const payloadKeys = `p1:${randomBytes(32).toString('base64')}`;
    const ring = `k2:${k2},k1:${randomBytes(32).toString('base64')}`;
    const config = loadConfig({
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEYS: ring,
      PAYLOAD_ENCRYPTION_KEYS: payloadKeys,
    });
    assert.equal(config.WEBHOOK_SECRET_KEYS, ring);
    assert.throws(() => loadConfig({ WEBHOOK_SECRET_KEYS: `k1:${hex().slice(2)}` }), /WEBHOOK_SECRET_KEYS/);
    assert.throws(() => parseSecretKeyRing(`k1:${k1},k1:${k2}`), /key id twice/);
  });

  describe('CLI: secrets reseal (real PostgreSQL)', () => {
    let t: TestDatabase;
    before(async () => (t = await createTestDatabase()));
    after(() => t?.destroy());

    function run(env: NodeJS.ProcessEnv) {
      const out: string[] = [];
      const err: string[] = [];
      const io: CliIo = { env: { DATABASE_URL: t.url, ...env }, out: (l) => out.push(l), err: (l) => err.push(l) };
      return main(['secrets', 'reseal'], io).then((code) => ({ code, out, err }));
    }
    const sealedRows = () =>
      t.db<{ id: string; secret_sealed: string }>('webhook_registrations').select('id', 'secret_sealed').orderBy('id');

    it('re-seals every secret under the newest key, keeps the secrets, and is idempotent', async () => {
      const oldBox = createSecretBox(parseSecretKeyRing(`k1:${k1}`));
      const secrets = new Map<string, string>();
      for (const projectId of ['reseal-a', 'reseal-b']) {
        await addProject(t.db, projectId);
        const created = await createRegistration(t.db, oldBox, {
          projectId,
          url: 'https://receiver.example/hook',
          types: ['FALL_DETECTION'],
        });
        secrets.set(created!.row.id, created!.secret);
      }
      // One row still in the v1 format of before key ids.
      const [first] = await sealedRows();
      const v1 = sealV1(Buffer.from(k1, 'hex'), secrets.get(first!.id)!, registrationSecretAad(first!.id));
      await t.db('webhook_registrations').where({ id: first!.id }).update({ secret_sealed: v1 });

      const result = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.equal(result.code, 0, result.err.join('\n'));
      assert.deepEqual(result.out, ['Resealed 2 of 2 webhook secrets under key k2']);
      const newOnly = createSecretBox(parseSecretKeyRing(`k2:${k2}`));
      for (const row of await sealedRows()) {
        assert.match(row.secret_sealed, /^v2:k2:/);
        assert.equal(newOnly.open(row.secret_sealed, registrationSecretAad(row.id)), secrets.get(row.id));
      }
      const again = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.deepEqual(again.out, ['Resealed 0 of 2 webhook secrets under key k2']);
    });

    it('changes nothing when a secret cannot be opened, naming the registration', async () => {
      const before = await sealedRows();
      const result = await run({ WEBHOOK_SECRET_KEYS: `k3:${hex()}` });
      assert.equal(result.code, 1);
      assert.match(result.err.join('\n'), /registration [0-9a-f-]{36}: .*nothing was resealed/);
      assert.deepEqual(await sealedRows(), before);
    });
  });
});

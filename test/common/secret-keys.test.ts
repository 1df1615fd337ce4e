import assert from 'node:assert/strict';
import { createCipheriv, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { main } from '../../cli/index';
import type { CliIo } from '../../cli/command';
import { loadConfig } from '../../common/config';
import {
  createSecretBox,
  parseSecretKeyRing,
  registrationSecretAad,
  type SecretBox,
} from '../../common/crypto/secrets';
import {
  addProject,
  createRegistration,
  findRegistration,
  resealRegistrationSecrets,
  rotateRegistrationSecret,
  type RotatedSecret,
} from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

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

  it('opens a v2 secret sealed by an earlier release (rows in the database keep opening)', () => {
    const box = createSecretBox(parseSecretKeyRing(`k1:${Buffer.alloc(32, 1).toString('hex')}`));
    const recorded = 'v2:k1:f+q0m1VXfS1rjYre:WiDpyBEmlPdNgtJa53j+sQ==:KRUAXvq+nZH1TsdOLEs=';
    assert.equal(box.open(recorded, aad), 'whsec_recorded');
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

  describe('secrets reseal (real PostgreSQL)', () => {
    let t: TestDatabase;
    before(async () => (t = await createTestDatabase()));
    after(() => t?.destroy());
    // Each test starts from an empty table: reseal reads every registration, so tests must not see each other's.
    beforeEach(async () => {
      await t.db('webhook_registrations').del();
      await t.db('projects').del();
    });

    const k1Box = () => createSecretBox(parseSecretKeyRing(`k1:${k1}`));
    const bothBox = () => createSecretBox(parseSecretKeyRing(`k2:${k2},k1:${k1}`));
    const k2Only = () => createSecretBox(parseSecretKeyRing(`k2:${k2}`));

    function run(env: NodeJS.ProcessEnv) {
      const out: string[] = [];
      const err: string[] = [];
      const io: CliIo = { env: { DATABASE_URL: t.url, ...env }, out: (l) => out.push(l), err: (l) => err.push(l) };
      return main(['secrets', 'reseal'], io).then((code) => ({ code, out, err }));
    }
    interface SealedRow {
      id: string;
      secret_sealed: string;
      previous_secret_sealed: string | null;
      previous_secret_expires_at: Date | null;
    }
    const sealedRows = () =>
      t
        .db<SealedRow>('webhook_registrations')
        .select('id', 'secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at')
        .orderBy('id');

    /** A project with a webhook whose secret is sealed by `box`; returns the row id and the secret. */
    async function registered(box: SecretBox, projectId = `reseal-${randomUUID()}`) {
      await addProject(t.db, projectId);
      const created = await createRegistration(t.db, box, {
        projectId,
        url: 'https://receiver.example/hook',
        types: ['FALL_DETECTION'],
      });
      return { projectId, id: created!.row.id, secret: created!.secret };
    }

    it('re-seals every secret under the newest key, keeps the secrets, and is idempotent', async () => {
      const secrets = new Map<string, string>();
      for (let i = 0; i < 2; i++) {
        const { id, secret } = await registered(k1Box());
        secrets.set(id, secret);
      }
      // One row still in the v1 format of before key ids.
      const [first] = await sealedRows();
      const v1 = sealV1(Buffer.from(k1, 'hex'), secrets.get(first!.id)!, registrationSecretAad(first!.id));
      await t.db('webhook_registrations').where({ id: first!.id }).update({ secret_sealed: v1 });

      const result = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.equal(result.code, 0, result.err.join('\n'));
      assert.deepEqual(result.out, ['Resealed 2 of 2 webhook secrets under key k2']);
      for (const row of await sealedRows()) {
        assert.match(row.secret_sealed, /^v2:k2:/);
        assert.equal(k2Only().open(row.secret_sealed, registrationSecretAad(row.id)), secrets.get(row.id));
      }
      const again = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.deepEqual(again.out, ['Resealed 0 of 2 webhook secrets under key k2']);
    });

    it('changes nothing when a secret cannot be opened, naming the registration', async () => {
      await registered(k1Box());
      const before = await sealedRows();
      const result = await run({ WEBHOOK_SECRET_KEYS: `k3:${hex()}` });
      assert.equal(result.code, 1);
      assert.match(result.err.join('\n'), /registration [0-9a-f-]{36} \(current secret\): .*nothing was resealed/);
      assert.deepEqual(await sealedRows(), before);
    });

    it('refuses without a configured key and without a development key, and writes no key file', async () => {
      await registered(k1Box());
      const before = await sealedRows();
      const dataDir = mkdtempSync(join(tmpdir(), 'reseal-no-key-'));
      try {
        const result = await run({ DATA_DIR: dataDir });
        assert.equal(result.code, 1);
        assert.match(result.err.join('\n'), /WEBHOOK_SECRET_KEYS is not set .*nothing was resealed/);
        assert.deepEqual(readdirSync(dataDir), []);
        assert.deepEqual(await sealedRows(), before);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    it('reseals the previous secret of a rotation still in its overlap, and erases one whose overlap is over', async () => {
      const overlapping = await registered(k1Box());
      const over = await registered(k1Box());
      const replacement = await rotateRegistrationSecret(t.db, k1Box(), overlapping.projectId, 3600);
      await rotateRegistrationSecret(t.db, k1Box(), over.projectId, 3600);
      await t
        .db('webhook_registrations')
        .where({ id: over.id })
        .update({ previous_secret_expires_at: t.db.raw("now() - interval '1 second'") });

      const result = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.equal(result.code, 0, result.err.join('\n'));
      assert.deepEqual(result.out, ['Resealed 3 of 3 webhook secrets under key k2']);
      // The old key dropped: both secrets of the overlap still open.
      const row = await findRegistration(t.db, overlapping.projectId);
      const aad = registrationSecretAad(overlapping.id);
      assert.equal(k2Only().open(row!.secretSealed, aad), replacement!.secret);
      assert.equal(k2Only().open(row!.previousSecretSealed!, aad), overlapping.secret);
      assert.deepEqual(row!.previousSecretExpiresAt, replacement!.previousSecretExpiresAt, 'the overlap is unchanged');
      const ended = await findRegistration(t.db, over.projectId);
      assert.equal(ended!.previousSecretSealed, null);
      assert.equal(ended!.previousSecretExpiresAt, null);
      // Everything is under k2 now, the previous secret included: a second run has nothing left to do.
      const again = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.deepEqual(again.out, ['Resealed 0 of 3 webhook secrets under key k2']);
    });

    it('changes nothing when a previous secret cannot be opened, naming it', async () => {
      const { projectId } = await registered(k1Box());
      // Rotated under a key that was dropped since (never resealed): the previous secret is sealed with k9.
      await rotateRegistrationSecret(t.db, createSecretBox(parseSecretKeyRing(`k9:${hex()}`)), projectId, 3600);
      await rotateRegistrationSecret(t.db, k1Box(), projectId, 3600);
      const before = await sealedRows();
      assert.match(before[0]!.previous_secret_sealed!, /^v2:k9:/);
      const result = await run({ WEBHOOK_SECRET_KEYS: `k2:${k2},k1:${k1}` });
      assert.equal(result.code, 1);
      assert.match(
        result.err.join('\n'),
        /registration [0-9a-f-]{36} \(previous secret\): sealed with key k9, .*nothing/,
      );
      assert.deepEqual(await sealedRows(), before, 'not even the current secret was resealed');
    });

    it("a rotation landing between the reseal's read and write waits for it and keeps its new secret", async () => {
      const { projectId, id, secret: original } = await registered(k1Box());
      let rotation: Promise<RotatedSecret | undefined> | undefined;
      let rotationWaited = false;
      const report = await resealRegistrationSecrets(t.db, bothBox(), {
        // The rows are read; the rotation either waits for their lock or, were there none, commits now.
        async afterRead() {
          const started = rotateRegistrationSecret(t.db, bothBox(), projectId, 3600);
          rotation = started;
          rotationWaited = await waitsForALock(t.db, started);
        },
      });
      const rotated = await rotation!;
      const row = await findRegistration(t.db, projectId);
      const aad = registrationSecretAad(id);
      assert.equal(k2Only().open(row!.secretSealed, aad), rotated!.secret, 'the rotation was not overwritten');
      assert.equal(k2Only().open(row!.previousSecretSealed!, aad), original, 'the resealed secret is the previous');
      assert.equal(rotationWaited, true, "the rotation waited for the reseal's row lock");
      assert.deepEqual(report, { total: 1, resealed: 1 });
    });
  });
});

/**
 * Whether `statement` ends up waiting for a lock in the database: polls PostgreSQL's own view of its backends until
 * one of this database waits for a lock (true), or the statement settles first (false).
 */
async function waitsForALock(db: Knex, statement: Promise<unknown>): Promise<boolean> {
  let settled = false;
  statement.then(
    () => (settled = true),
    () => (settled = true),
  );
  while (!settled) {
    const waiting = await db('pg_stat_activity')
      .where({ wait_event_type: 'Lock' })
      .andWhere('datname', db.raw('current_database()'))
      .count<{ count: string }[]>({ count: '*' });
    if (Number(waiting[0]!.count) > 0) return true;
    await sleep(10);
  }
  return false;
}

// Secret rotation as the database stores it (db/secrets/rotation.ts), on a real PostgreSQL and its clock: what a
// rotation keeps, for how long, and what the sweep erases. test/activities/rotation.test.ts proves the same end to end, with
// deliveries signed on Temporal; this file needs no Temporal, so mutation testing (npm run test:mutation) runs it.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { createSecretBox, registrationSecretAad, registrationSigningKeyAad } from '../../common/crypto/secrets';
import { standardWebhookPublicKey } from '../../common/crypto/signature';
import {
  addProject,
  createRegistration,
  eraseExpiredPreviousSecrets,
  findRegistration,
  listAuditEvents,
  rotateRegistrationSecret,
  rotateRegistrationSigningKey,
  type RegistrationRow,
} from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

describe('secret rotation in PostgreSQL: the secret replaced stays for the overlap, then the sweep erases it', () => {
  let t: TestDatabase;
  const box = createSecretBox(randomBytes(32));
  before(async () => (t = await createTestDatabase()));
  after(() => t?.destroy());

  /** The database's clock: the overlap is counted from it, whatever the test process's clock says. */
  const dbNow = async () => (await t.db.raw<{ rows: { now: Date }[] }>('select now()')).rows[0]!.now.getTime();
  const open = (row: RegistrationRow, sealed: string | null) =>
    sealed === null ? null : box.open(sealed, registrationSecretAad(row.id));

  async function registered(signatureScheme: 'v1' | 'v1a' = 'v1') {
    const projectId = `rot-${randomUUID().slice(0, 8)}`;
    await addProject(t.db, projectId);
    const created = await createRegistration(t.db, box, {
      projectId,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
      signatureScheme,
    });
    return { projectId, first: created!.secret, row: created!.row };
  }
  const stored = async (projectId: string) => (await findRegistration(t.db, projectId))!;

  it('without a webhook: undefined, and nothing written', async () => {
    const projectId = `rot-${randomUUID().slice(0, 8)}`;
    await addProject(t.db, projectId);
    assert.equal(await rotateRegistrationSecret(t.db, box, projectId, 60), undefined);
    assert.equal(await findRegistration(t.db, projectId), undefined);
  });

  it('with an overlap: the new secret signs, the replaced one is kept until the overlap ends', async () => {
    const { projectId, first, row } = await registered();
    const before = await dbNow();
    const rotated = await rotateRegistrationSecret(t.db, box, projectId, 3600);
    const after = await dbNow();
    assert.ok(rotated);
    assert.match(rotated.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.notEqual(rotated.secret, first);
    const now = await stored(projectId);
    assert.equal(open(now, now.secretSealed), rotated.secret);
    assert.equal(open(now, now.previousSecretSealed), first);
    assert.equal(now.previousSecretExpiresAt?.getTime(), rotated.previousSecretExpiresAt.getTime());
    const expires = rotated.previousSecretExpiresAt.getTime();
    assert.ok(expires >= before + 3_600_000 && expires <= after + 3_600_000, `expires ${expires - before} ms after`);
    assert.ok(now.updatedAt.getTime() > row.updatedAt.getTime(), 'updated_at moves');
  });

  it('without an overlap: the replaced secret is dropped at once, and the answer says it ended now', async () => {
    const { projectId } = await registered();
    const before = await dbNow();
    const rotated = await rotateRegistrationSecret(t.db, box, projectId, 0, 'whsec_given-by-the-caller');
    const after = await dbNow();
    const now = await stored(projectId);
    assert.equal(open(now, now.secretSealed), 'whsec_given-by-the-caller');
    assert.deepEqual([now.previousSecretSealed, now.previousSecretExpiresAt], [null, null]);
    const ended = rotated!.previousSecretExpiresAt.getTime();
    assert.ok(ended >= before && ended <= after, `ended ${ended - before} ms after the call began`);
  });

  it('a second rotation within the overlap keeps the secret it replaces, drops the oldest, and restarts the overlap', async () => {
    const { projectId, first } = await registered();
    const one = await rotateRegistrationSecret(t.db, box, projectId, 60);
    const two = await rotateRegistrationSecret(t.db, box, projectId, 3600);
    const now = await stored(projectId);
    assert.equal(open(now, now.secretSealed), two!.secret);
    assert.equal(open(now, now.previousSecretSealed), one!.secret);
    assert.notEqual(open(now, now.previousSecretSealed), first);
    assert.ok(two!.previousSecretExpiresAt.getTime() - one!.previousSecretExpiresAt.getTime() > 3_000_000);
  });

  it('the sweep erases previous secrets whose overlap is over, of one registration or of all, and counts them', async () => {
    const ended = await registered();
    const endedToo = await registered();
    const lasting = await registered();
    for (const { projectId } of [ended, endedToo, lasting]) await rotateRegistrationSecret(t.db, box, projectId, 3600);
    // The first two overlaps ended a second ago (the database's clock), the third lasts an hour.
    await t
      .db('webhook_registrations')
      .whereIn('project_id', [ended.projectId, endedToo.projectId])
      .update({ previous_secret_expires_at: t.db.raw("now() - interval '1 second'") });

    assert.equal(
      await eraseExpiredPreviousSecrets(t.db, lasting.row.id),
      0,
      'scoped to a registration still in its overlap',
    );
    assert.equal(await eraseExpiredPreviousSecrets(t.db, ended.row.id), 1, 'scoped to one whose overlap is over');
    assert.equal((await stored(endedToo.projectId)).previousSecretSealed !== null, true, 'the other is left alone');
    assert.equal(await eraseExpiredPreviousSecrets(t.db), 1, 'of all: the one left whose overlap is over');
    for (const { projectId } of [ended, endedToo]) {
      const row = await stored(projectId);
      assert.deepEqual([row.previousSecretSealed, row.previousSecretExpiresAt], [null, null]);
    }
    const kept = await stored(lasting.projectId);
    assert.equal(open(kept, kept.previousSecretSealed), lasting.first);
    assert.equal(await eraseExpiredPreviousSecrets(t.db, ended.row.id), 0, 'nothing left to erase');
  });

  describe('the Ed25519 key pair (v1a)', () => {
    /** The whpk_ public key of a sealed private key, opened as the worker opens it. */
    const publicKeyOf = (row: RegistrationRow, sealed: string | null) =>
      sealed === null
        ? null
        : standardWebhookPublicKey(
            createPublicKey(createPrivateKey(box.open(sealed, registrationSigningKeyAad(row.id)))),
          );

    it('with an overlap: a new pair signs, the replaced one is kept, private and public, until the overlap ends', async () => {
      const { projectId, row } = await registered('v1a');
      const first = row.signingPublicKey!;
      assert.equal(publicKeyOf(row, row.signingKeySealed), first);
      const before = await dbNow();
      const rotated = await rotateRegistrationSigningKey(t.db, box, row.id, 3600);
      const after = await dbNow();
      assert.ok(rotated);
      assert.match(rotated.publicKey, /^whpk_[A-Za-z0-9+/]{43}=$/);
      assert.notEqual(rotated.publicKey, first);
      assert.equal(rotated.previousPublicKey, first);
      const now = await stored(projectId);
      assert.equal(now.signingPublicKey, rotated.publicKey);
      assert.equal(publicKeyOf(now, now.signingKeySealed), rotated.publicKey, 'the sealed key is the new pair’s');
      assert.equal(now.previousSigningPublicKey, first);
      assert.equal(publicKeyOf(now, now.previousSigningKeySealed), first);
      assert.equal(now.previousSigningKeyExpiresAt?.getTime(), rotated.previousPublicKeyExpiresAt.getTime());
      const expires = rotated.previousPublicKeyExpiresAt.getTime();
      assert.ok(expires >= before + 3_600_000 && expires <= after + 3_600_000, `expires ${expires - before} ms after`);
      assert.ok(now.updatedAt.getTime() > row.updatedAt.getTime(), 'updated_at moves');
      // The secret is not the key's business.
      assert.deepEqual([now.secretSealed, now.previousSecretSealed], [row.secretSealed, null]);
    });

    it('without an overlap: the replaced pair is dropped at once, and the answer says it ended now', async () => {
      const { projectId, row } = await registered('v1a');
      const before = await dbNow();
      const rotated = await rotateRegistrationSigningKey(t.db, box, row.id, 0);
      const after = await dbNow();
      assert.equal(rotated!.previousPublicKey, null);
      const ended = rotated!.previousPublicKeyExpiresAt.getTime();
      assert.ok(ended >= before && ended <= after, `ended ${ended - before} ms after the call began`);
      const now = await stored(projectId);
      assert.equal(publicKeyOf(now, now.signingKeySealed), rotated!.publicKey);
      assert.deepEqual(
        [now.previousSigningKeySealed, now.previousSigningPublicKey, now.previousSigningKeyExpiresAt],
        [null, null, null],
      );
      assert.equal(
        (await rotateRegistrationSigningKey(t.db, box, row.id, -5))!.previousPublicKey,
        null,
        'negative: none',
      );
    });

    it('a second rotation within the overlap keeps the pair it replaces and drops the oldest', async () => {
      const { projectId, row } = await registered('v1a');
      const one = await rotateRegistrationSigningKey(t.db, box, row.id, 60);
      const two = await rotateRegistrationSigningKey(t.db, box, row.id, 3600);
      assert.equal(two!.previousPublicKey, one!.publicKey);
      const now = await stored(projectId);
      assert.equal(now.previousSigningPublicKey, one!.publicKey);
      assert.equal(publicKeyOf(now, now.previousSigningKeySealed), one!.publicKey);
      assert.ok(two!.previousPublicKeyExpiresAt.getTime() - one!.previousPublicKeyExpiresAt.getTime() > 3_000_000);
    });

    it('a v1 registration or one that is gone: undefined, and nothing written', async () => {
      const { projectId, row } = await registered('v1');
      assert.equal(await rotateRegistrationSigningKey(t.db, box, row.id, 60), undefined);
      const now = await stored(projectId);
      assert.deepEqual(
        [now.signingKeySealed, now.signingPublicKey, now.previousSigningKeySealed, now.updatedAt.getTime()],
        [null, null, null, row.updatedAt.getTime()],
      );
      assert.equal(await rotateRegistrationSigningKey(t.db, box, randomUUID(), 60), undefined);
    });

    it('the sweep erases previous pairs whose overlap is over, apart from secrets, each end audited by its kind', async () => {
      const both = await registered('v1a');
      const keyOnly = await registered('v1a');
      await rotateRegistrationSecret(t.db, box, both.projectId, 3600);
      for (const { row } of [both, keyOnly]) await rotateRegistrationSigningKey(t.db, box, row.id, 3600);
      // Both key pairs' overlaps ended; the secret's of the first, too; nothing else.
      await t
        .db('webhook_registrations')
        .whereIn('id', [both.row.id, keyOnly.row.id])
        .update({ previous_signing_key_expires_at: t.db.raw("now() - interval '1 second'") });
      await t
        .db('webhook_registrations')
        .where({ id: both.row.id })
        .update({ previous_secret_expires_at: t.db.raw("now() - interval '1 second'") });

      assert.equal(await eraseExpiredPreviousSecrets(t.db, both.row.id), 2, 'its secret and its key pair');
      const erased = await stored(both.projectId);
      assert.deepEqual(
        [
          erased.previousSecretSealed,
          erased.previousSigningKeySealed,
          erased.previousSigningPublicKey,
          erased.previousSigningKeyExpiresAt,
        ],
        [null, null, null, null],
      );
      assert.notEqual(erased.signingKeySealed, null, 'the current pair stays');
      assert.notEqual((await stored(keyOnly.projectId)).previousSigningKeySealed, null, 'scoped to the one named');

      const trail = await listAuditEvents(t.db, { projectId: both.projectId, limit: 10 });
      assert.deepEqual(
        trail
          .filter((event) => event.action.endsWith('overlap-ended'))
          .map(({ action, outcome, actor, registrationId }) => ({ action, outcome, kind: actor.kind, registrationId }))
          .sort((a, b) => a.action.localeCompare(b.action)),
        [
          { action: 'webhook.secret.overlap-ended', outcome: 'ok', kind: 'system', registrationId: both.row.id },
          { action: 'webhook.signing-key.overlap-ended', outcome: 'ok', kind: 'system', registrationId: both.row.id },
        ],
      );
    });
  });
});

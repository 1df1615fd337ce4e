import assert from 'node:assert/strict';
import { createPublicKey, randomBytes, randomUUID, sign, verify, type KeyObject } from 'node:crypto';
import { createSecretBox, registrationSigningKeyAad, type SecretBox } from '../../common/crypto/secrets';
import { generateSigningKeyPair } from '../../common/crypto/signature';
import { MAX_KEPT_SIGNING_KEYS, createSigningKeyCache } from '../../common/crypto/signing-keys';

/** A secret box that counts what it opens. */
function countingBox(): SecretBox & { opened: number } {
  const box = createSecretBox(randomBytes(32));
  const counting = {
    opened: 0,
    seal: (plaintext: string, aad: string) => box.seal(plaintext, aad),
    open(sealed: string, aad: string) {
      counting.opened += 1;
      return box.open(sealed, aad);
    },
  };
  return counting as SecretBox & { opened: number };
}

describe('the v1a signing keys, parsed once per registration and key version (common/crypto/signing-keys.ts)', () => {
  let box: ReturnType<typeof countingBox>;
  beforeEach(() => (box = countingBox()));

  /** A registration's row with a fresh current pair sealed to it, and its public key. */
  const rowWithKey = (id = randomUUID()) => {
    const pair = generateSigningKeyPair();
    const sealed = box.seal(pair.privateKeyPem, registrationSigningKeyAad(id));
    return { row: { id, signingKeySealed: sealed, previousSigningKeySealed: null as string | null }, pair };
  };

  const publicPem = (key: KeyObject | string) =>
    createPublicKey(key).export({ format: 'pem', type: 'spki' }).toString();

  it('opens and parses a key once: the next attempts get the same KeyObject without opening it again', () => {
    const cache = createSigningKeyCache(box);
    const { row, pair } = rowWithKey();
    const [first] = cache.open(row, true);
    assert.ok(first);
    assert.equal(first.type, 'private');
    assert.equal(first.asymmetricKeyType, 'ed25519');
    const message = Buffer.from('webhook-event-e1.1700000000.{}');
    assert.ok(verify(null, message, createPublicKey(pair.privateKeyPem), sign(null, message, first)), 'it signs');
    assert.equal(box.opened, 1);
    const [again] = cache.open({ ...row }, true);
    assert.equal(again, first, 'the same object');
    assert.equal(box.opened, 1, 'not opened again');
    assert.equal(cache.size, 1);
  });

  it('a rotation (a new sealed key, the old one previous) opens the new one, keeps both apart, newest first', () => {
    const cache = createSigningKeyCache(box);
    const { row } = rowWithKey();
    const [before] = cache.open(row, true);
    const next = generateSigningKeyPair();
    const rotated = {
      id: row.id,
      signingKeySealed: box.seal(next.privateKeyPem, registrationSigningKeyAad(row.id)),
      previousSigningKeySealed: row.signingKeySealed,
    };
    const keys = cache.open(rotated, true);
    assert.equal(keys.length, 2);
    assert.notEqual(keys[0], before, 'the current key is the new one');
    assert.equal(publicPem(keys[0]!), publicPem(next.privateKeyPem));
    assert.equal(publicPem(keys[1]!), publicPem(before!), 'the previous one is the key it replaced');
    assert.equal(box.opened, 3, 'the new current and the previous opened once each');
    assert.equal(cache.size, 2);
    const [current, previous] = cache.open(rotated, true);
    assert.deepEqual([current, previous, box.opened], [keys[0], keys[1], 3], 'both kept');
  });

  it('leaves the previous key out unless asked, and a row without keys gives none', () => {
    const cache = createSigningKeyCache(box);
    const { row } = rowWithKey();
    const previous = generateSigningKeyPair();
    const withPrevious = {
      ...row,
      previousSigningKeySealed: box.seal(previous.privateKeyPem, registrationSigningKeyAad(row.id)),
    };
    assert.equal(cache.open(withPrevious, false).length, 1);
    assert.equal(box.opened, 1, 'the previous one not even opened');
    assert.equal(cache.open(withPrevious, true).length, 2);
    assert.deepEqual(cache.open({ id: row.id, signingKeySealed: null, previousSigningKeySealed: null }, true), []);
  });

  it('a key sealed to another registration is refused, never taken from the cache', () => {
    const cache = createSigningKeyCache(box);
    const { row } = rowWithKey();
    cache.open(row, false);
    assert.throws(() => cache.open({ ...row, id: randomUUID() }, false));
    assert.throws(() => cache.open({ ...row, signingKeySealed: 'not sealed' }, false));
    assert.equal(cache.size, 1, 'what failed is not kept');
  });

  it('keeps at most its bound: the least recently used goes first', () => {
    const cache = createSigningKeyCache(box, 2);
    const [a, b, c] = [rowWithKey(), rowWithKey(), rowWithKey()];
    const [keyA] = cache.open(a.row, false);
    cache.open(b.row, false);
    assert.equal(cache.open(a.row, false)[0], keyA, 'a used again: b is now the oldest');
    cache.open(c.row, false);
    assert.equal(cache.size, 2);
    const opened = box.opened;
    assert.equal(cache.open(a.row, false)[0], keyA, 'a still kept');
    cache.open(c.row, false);
    assert.equal(box.opened, opened, 'c kept');
    cache.open(b.row, false);
    assert.equal(box.opened, opened + 1, 'b was forgotten and is opened again');
    assert.equal(cache.size, 2);
    assert.equal(MAX_KEPT_SIGNING_KEYS, 10_000);
  });
});

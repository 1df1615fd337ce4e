import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  BASE64_KEYS,
  BASE64_KEY_ENTRY_PATTERN,
  BASE64_KEY_RING_PATTERN,
  HEX_OR_BASE64_KEYS,
  HEX_OR_BASE64_KEY_PATTERN,
  HEX_OR_BASE64_KEY_RING_PATTERN,
  KEY_ID_PATTERN,
  parseHexOrBase64Key,
  parseKeyRing,
  type KeyForm,
} from '../../common/crypto/key-ring';

const matches = (pattern: string, text: string) => new RegExp(pattern).test(text);

describe('key rings (id:key[,id:key…])', () => {
  const hex = randomBytes(32).toString('hex');
  const base64 = randomBytes(32).toString('base64');

  describe('patterns', () => {
    it('key ids: 1 to 64 of A-Z a-z 0-9 . _ -', () => {
      for (const id of ['a', 'Z', '9', 'k-2026.b_1', 'i'.repeat(64)]) assert.ok(matches(KEY_ID_PATTERN, id), id);
      for (const id of ['', 'i'.repeat(65), 'k 1', 'k/1', 'k:1', 'é1', 'k1é', 'k,1'])
        assert.ok(!matches(KEY_ID_PATTERN, id), id);
    });

    it('one key: 64 hex digits or base64 of 32 bytes', () => {
      for (const key of [hex, hex.toUpperCase(), base64]) assert.ok(matches(HEX_OR_BASE64_KEY_PATTERN, key), key);
      for (const key of [hex.slice(1), hex + 'a', 'g' + hex.slice(1), base64.slice(0, -1), `k1:${hex}`, ` ${hex}`])
        assert.ok(!matches(HEX_OR_BASE64_KEY_PATTERN, key), key);
    });

    it('a ring of hex or base64 keys', () => {
      for (const ring of [`k1:${hex}`, `k1:${base64}`, `k2:${hex},k1:${base64}`, `a:${hex},b:${hex},c:${base64}`])
        assert.ok(matches(HEX_OR_BASE64_KEY_RING_PATTERN, ring), ring);
      for (const ring of [hex, `:${hex}`, `k1:${hex},`, `k1:${hex}, k2:${hex}`, `k1:${hex.slice(2)}`, `k 1:${hex}`])
        assert.ok(!matches(HEX_OR_BASE64_KEY_RING_PATTERN, ring), ring);
    });

    it('base64 keys: one entry, and a ring', () => {
      assert.ok(matches(BASE64_KEY_ENTRY_PATTERN, `s1:${base64}`));
      for (const entry of [base64, `s1:${hex}`, `s1:${base64},s2:${base64}`, `s1:${base64.slice(1)}`])
        assert.ok(!matches(BASE64_KEY_ENTRY_PATTERN, entry), entry);
      for (const ring of [`k1:${base64}`, `k2:${base64},k1:${base64}`])
        assert.ok(matches(BASE64_KEY_RING_PATTERN, ring), ring);
      for (const ring of [base64, `k1:${hex}`, `k1:${base64},`, `k1:${base64}, k2:${base64}`, `:${base64}`])
        assert.ok(!matches(BASE64_KEY_RING_PATTERN, ring), ring);
    });
  });

  describe('parseKeyRing', () => {
    const form: KeyForm = {
      entry: 'id:word',
      decode(text, variable, id) {
        if (text === 'bad') throw new Error(`${variable} key ${id} is bad`);
        return Buffer.from(`${variable}/${id}/${text}`);
      },
    };

    it('reads the entries in order, skipping blanks and empty entries, and hands the form the variable and id', () => {
      assert.deepEqual(parseKeyRing(' k2:b , ,k1:a,', 'RING', form), [
        { id: 'k2', key: Buffer.from('RING/k2/b') },
        { id: 'k1', key: Buffer.from('RING/k1/a') },
      ]);
      assert.deepEqual(parseKeyRing('k1:a:b', 'RING', form), [{ id: 'k1', key: Buffer.from('RING/k1/a:b') }]);
      assert.equal(parseKeyRing(`${'i'.repeat(64)}:a`, 'RING', form)[0]!.id.length, 64);
    });

    it('refuses an empty ring, a malformed entry, a key the form refuses, and an id twice, naming the variable', () => {
      for (const empty of ['', ' ', ', ,'])
        assert.throws(() => parseKeyRing(empty, 'RING', form), /^Error: RING has no key$/);
      for (const id of ['', ' ', 'k 1', 'k/1', 'é1', 'i'.repeat(65)])
        assert.throws(
          () => parseKeyRing(`k0:a,${id}:secret`, 'RING', form),
          (error: Error) => error.message === 'RING entry 2 must be id:word',
        );
      assert.throws(() => parseKeyRing('secret', 'RING', form), /^Error: RING entry 1 must be id:word$/);
      assert.throws(() => parseKeyRing('k0:a,k1:bad', 'RING', form), /^Error: RING key k1 is bad$/);
      assert.throws(() => parseKeyRing('k1:a,k2:b,k1:c', 'RING', form), /^Error: RING has a key id twice$/);
    });
  });

  describe('key forms', () => {
    it('hex or base64: 32 bytes from 64 hex digits (either case) or base64, else refused', () => {
      const key = randomBytes(32);
      assert.deepEqual(parseHexOrBase64Key(key.toString('hex')), key);
      assert.deepEqual(parseHexOrBase64Key(key.toString('hex').toUpperCase()), key);
      assert.deepEqual(parseHexOrBase64Key(key.toString('base64')), key);
      assert.deepEqual(parseKeyRing(`k1:${key.toString('hex')}`, 'AUDIT_HMAC_KEYS', HEX_OR_BASE64_KEYS)[0]!.key, key);
      for (const text of [key.toString('hex').slice(2), randomBytes(16).toString('base64'), key.toString('hex') + 'a'])
        assert.throws(() => parseHexOrBase64Key(text), /^Error: WEBHOOK_SECRET_KEY must decode to 32 bytes$/);
      assert.throws(
        () => parseKeyRing(`k1:${key.toString('hex').slice(2)}`, 'AUDIT_HMAC_KEYS', HEX_OR_BASE64_KEYS),
        /^Error: WEBHOOK_SECRET_KEY must decode to 32 bytes$/,
      );
      assert.throws(() => parseKeyRing('k1', 'AUDIT_HMAC_KEYS', HEX_OR_BASE64_KEYS), /entry 1 must be id:key$/);
    });

    it('base64: 32 bytes from base64 only, refusing other lengths by the key’s id', () => {
      const key = randomBytes(32);
      assert.deepEqual(parseKeyRing(`p1:${key.toString('base64')}`, 'KEYS', BASE64_KEYS)[0]!.key, key);
      for (const text of [key.toString('hex'), randomBytes(16).toString('base64')])
        assert.throws(
          () => parseKeyRing(`p1:${text}`, 'KEYS', BASE64_KEYS),
          (error: Error) => error.message === 'KEYS key p1 must decode to 32 bytes' && !error.message.includes(text),
        );
      assert.throws(
        () => parseKeyRing(key.toString('base64'), 'KEYS', BASE64_KEYS),
        /^Error: KEYS entry 1 must be id:base64key \(id of letters, digits, \. _ -\)$/,
      );
    });
  });
});

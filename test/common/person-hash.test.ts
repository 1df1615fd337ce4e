// The person hash an erasure finds deliveries by: HMAC-SHA256 of the canonical userUUID under PERSON_HASH_KEY.
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  PERSON_HASH_PATTERN,
  canonicalUserUUID,
  eventPersonHash,
  namesPerson,
  parsePersonHashKey,
  personHash,
} from '../../common/crypto/person-hash';
import { DEV_PERSON_HASH_KEY_FILE, resolvePersonHashKey } from '../../common/crypto/person-hash-key';
import { ConfigError, loadConfig } from '../../common/config';

const KEY = Buffer.alloc(32, 0x5a);
const USER = '3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f';

describe('person hash (PERSON_HASH_KEY)', () => {
  it('is the hex HMAC-SHA256 of the userUUID under the key: a fixed vector and an independent HMAC agree', () => {
    assert.equal(personHash(KEY, USER), '39e301accb31c77d4dc58ce7a991cd8b5d9e23e2b7442c9eacc09627c52f8500');
    const key = randomBytes(32);
    assert.equal(personHash(key, USER), createHmac('sha256', key).update(USER).digest('hex'));
    assert.match(personHash(key, USER), PERSON_HASH_PATTERN);
  });

  it('never contains the userUUID, and differs per key and per person', () => {
    const hash = personHash(KEY, USER);
    assert.ok(!hash.includes(USER.replace(/-/g, '')) && !hash.includes(USER));
    assert.notEqual(personHash(randomBytes(32), USER), hash);
    assert.notEqual(personHash(KEY, '3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6e'), hash);
  });

  it('hashes every spelling of one UUID alike: upper case and the urn:uuid: prefix', () => {
    const hash = personHash(KEY, USER);
    assert.equal(personHash(KEY, USER.toUpperCase()), hash);
    assert.equal(personHash(KEY, `urn:uuid:${USER}`), hash);
    assert.equal(personHash(KEY, `URN:UUID:${USER.toUpperCase()}`), hash);
    assert.equal(canonicalUserUUID(`urn:uuid:${USER.toUpperCase()}`), USER);
  });

  it('refuses what is not a UUID, and a key that is not 32 bytes', () => {
    for (const bad of ['', 'not-a-uuid', `${USER}0`, ` ${USER}`, `${USER}\n`, USER.replace(/-/g, ''), `x${USER}`])
      assert.throws(() => personHash(KEY, bad), /this is not a UUID/, JSON.stringify(bad));
    assert.throws(() => personHash(Buffer.alloc(31), USER), /must be 32 bytes/);
    assert.throws(() => personHash(Buffer.alloc(33), USER), /must be 32 bytes/);
    assert.equal(canonicalUserUUID('nope'), undefined);
  });

  it('an event names a person unless its userUUID is the nil UUID (TEST events) or no UUID at all', () => {
    assert.equal(namesPerson(USER), true);
    assert.equal(namesPerson('00000000-0000-0000-0000-000000000000'), false);
    assert.equal(namesPerson('urn:uuid:00000000-0000-0000-0000-000000000000'), false);
    assert.equal(namesPerson('nope'), false);
    assert.equal(eventPersonHash(KEY, USER), personHash(KEY, USER));
    assert.equal(eventPersonHash(KEY, '00000000-0000-0000-0000-000000000000'), undefined);
    assert.equal(eventPersonHash(KEY, 42), undefined);
    assert.equal(eventPersonHash(KEY, undefined), undefined);
  });

  it('reads the key from 64 hex digits or base64, naming the variable and never the key when it is wrong', () => {
    const key = randomBytes(32);
    assert.deepEqual(parsePersonHashKey(key.toString('hex')), key);
    assert.deepEqual(parsePersonHashKey(key.toString('hex').toUpperCase()), key);
    assert.deepEqual(parsePersonHashKey(key.toString('base64')), key);
    assert.deepEqual(parsePersonHashKey(` ${key.toString('hex')}\n`), key);
    for (const bad of [key.toString('hex').slice(2), randomBytes(31).toString('base64'), 'x'.repeat(64), ''])
      assert.throws(
        () => parsePersonHashKey(bad),
        (error: Error) =>
          error.message === 'PERSON_HASH_KEY must be 32 bytes as 64 hex digits or base64' &&
          (bad === '' || !error.message.includes(bad)),
      );
  });

  describe('in the configuration', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
    };

    function configError(env: NodeJS.ProcessEnv, needs: Parameters<typeof loadConfig>[1] = {}): string {
      try {
        loadConfig(env, needs);
      } catch (error) {
        assert.ok(error instanceof ConfigError, String(error));
        return error.message;
      }
      assert.fail('expected a ConfigError');
    }

    it('production refuses a process that hashes persons without PERSON_HASH_KEY, naming it', () => {
      assert.match(configError(production, { persons: true }), /PERSON_HASH_KEY is required in production/);
      assert.match(
        configError({ NODE_ENV: undefined }, { persons: true, standalone: true }),
        /PERSON_HASH_KEY is required in production/,
      );
      const key = randomBytes(32).toString('hex');
      assert.equal(loadConfig({ ...production, PERSON_HASH_KEY: key }, { persons: true }).PERSON_HASH_KEY, key);
      assert.doesNotThrow(() => loadConfig(production), 'a process that hashes nobody needs none');
      assert.doesNotThrow(() => loadConfig({}, { persons: true }), 'development generates it');
    });

    it('refuses a PERSON_HASH_KEY that is not 32 bytes as hex or base64', () => {
      assert.match(configError({ PERSON_HASH_KEY: 'ab'.repeat(31) }), /PERSON_HASH_KEY must match pattern/);
      assert.doesNotThrow(() => loadConfig({ PERSON_HASH_KEY: randomBytes(32).toString('base64') }));
    });

    it('an erasure looks again after ERASURE_RECHECK_MS (1 min), doubling up to ERASURE_RECHECK_MAX_MS (15 min)', () => {
      const config = loadConfig({});
      assert.deepEqual([config.ERASURE_RECHECK_MS, config.ERASURE_RECHECK_MAX_MS], [60_000, 900_000]);
      assert.match(
        configError({ ERASURE_RECHECK_MS: '5000', ERASURE_RECHECK_MAX_MS: '4000' }),
        /ERASURE_RECHECK_MAX_MS must be at least ERASURE_RECHECK_MS/,
      );
      assert.match(configError({ ERASURE_RECHECK_MS: '999' }), /ERASURE_RECHECK_MS must be >= 1000/);
      assert.doesNotThrow(() => loadConfig({ ERASURE_RECHECK_MS: '1000', ERASURE_RECHECK_MAX_MS: '1000' }));
    });

    it('development generates the key once into DATA_DIR (mode 0600) and keeps it; production never generates it', () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-person-key-'));
      const first = resolvePersonHashKey(loadConfig({ DATA_DIR: dataDir }));
      const again = resolvePersonHashKey(loadConfig({ DATA_DIR: dataDir }));
      assert.deepEqual(again, first);
      assert.equal(first.length, 32);
      assert.deepEqual(readdirSync(dataDir), [DEV_PERSON_HASH_KEY_FILE]);
      assert.equal(statSync(join(dataDir, DEV_PERSON_HASH_KEY_FILE)).mode & 0o777, 0o600);
      assert.deepEqual(parsePersonHashKey(readFileSync(join(dataDir, DEV_PERSON_HASH_KEY_FILE), 'utf8')), first);
      const configured = randomBytes(32);
      assert.deepEqual(
        resolvePersonHashKey({
          DATA_DIR: dataDir,
          NODE_ENV: 'production',
          PERSON_HASH_KEY: configured.toString('hex'),
        }),
        configured,
      );
      const empty = mkdtempSync(join(tmpdir(), 'webhooks-person-key-'));
      assert.throws(
        () => resolvePersonHashKey({ DATA_DIR: empty, NODE_ENV: 'production' }),
        /PERSON_HASH_KEY is required in production/,
      );
      assert.deepEqual(readdirSync(empty), []);
    });
  });
});

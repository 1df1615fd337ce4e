import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../common/config';
import {
  createSecretBox,
  generateWebhookSecret,
  parseSecretKey,
  parseSecretKeyRing,
  readOrCreateDevSecret,
  registrationSecretAad,
  resolveSecretKey,
  resolveSecretKeyRing,
} from '../../common/crypto/secrets';

describe('secrets', () => {
  it('generates whsec_ secrets of 32 random bytes in standard base64 (Standard Webhooks), all different', () => {
    const secrets = new Set(Array.from({ length: 100 }, generateWebhookSecret));
    assert.equal(secrets.size, 100);
    for (const secret of secrets) {
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    }
  });

  describe('secret box (AES-256-GCM)', () => {
    const key = randomBytes(32);
    const box = createSecretBox(key);
    const aad = registrationSecretAad('3b8f2c1e-0000-4000-8000-000000000000');

    it('seals to something other than the plaintext, differently each time, and opens back', () => {
      const secret = generateWebhookSecret();
      const a = box.seal(secret, aad);
      const b = box.seal(secret, aad);
      assert.notEqual(a, b);
      assert.ok(!a.includes(secret) && !a.includes(secret.slice(6)));
      assert.equal(box.open(a, aad), secret);
      assert.equal(box.open(b, aad), secret);
    });

    it('does not open with another key, another row, or after tampering', () => {
      const sealed = box.seal('whsec_abc', aad);
      assert.throws(() => createSecretBox(randomBytes(32)).open(sealed, aad));
      assert.throws(() => box.open(sealed, registrationSecretAad('another-row')));
      const parts = sealed.split(':');
      const ciphertext = Buffer.from(parts[3]!, 'base64');
      ciphertext[0]! ^= 1;
      parts[3] = ciphertext.toString('base64');
      assert.throws(() => box.open(parts.join(':'), aad));
      assert.throws(() => box.open('v0:x:y:z', aad), /unknown sealed secret format/);
    });

    it('needs a 32-byte key', () => {
      assert.throws(() => createSecretBox(randomBytes(16)), /32 bytes/);
      assert.throws(
        () =>
          createSecretBox([
            { id: 'k1', key: key },
            { id: 'k2', key: randomBytes(31) },
          ]),
        /32 bytes/,
      );
      assert.throws(() => createSecretBox([]), /the secret key ring is empty/);
    });

    it('refuses a sealed value with the wrong number of parts as an unknown format', () => {
      const [version, id, iv, tag, ciphertext] = box.seal('whsec_abc', aad).split(':');
      for (const malformed of [
        [version, id, iv, tag],
        [version, id, iv, tag, ciphertext, ciphertext],
        ['v1', iv, tag],
        ['v1', iv, tag, ciphertext, ciphertext],
      ])
        assert.throws(() => box.open(malformed.join(':'), aad), /^Error: unknown sealed secret format$/);
    });
  });

  describe('WEBHOOK_SECRET_KEY', () => {
    it('parses 64 hex digits or base64 of 32 bytes', () => {
      const key = randomBytes(32);
      assert.deepEqual(parseSecretKey(key.toString('hex')), key);
      assert.deepEqual(parseSecretKey(key.toString('hex').toUpperCase()), key);
      assert.deepEqual(parseSecretKey(key.toString('base64')), key);
      assert.throws(() => parseSecretKey(randomBytes(16).toString('base64')), /32 bytes/);
      // One hex digit too many is a typo, not a key: refused, never cut to its first 64 digits.
      assert.throws(() => parseSecretKey(key.toString('hex') + 'a'), /32 bytes/);
    });

    it('uses the configured key', () => {
      const key = randomBytes(32);
      const logger = pino({ level: 'silent' });
      assert.deepEqual(resolveSecretKey(loadConfig({ WEBHOOK_SECRET_KEY: key.toString('hex') }), logger), key);
    });

    it('outside production without a key, creates one in DATA_DIR (mode 0600), warns, and reuses it', () => {
      const dataDir = join(mkdtempSync(join(tmpdir(), 'webhooks-secrets-')), 'data');
      const warnings: string[] = [];
      const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) });
      const config = loadConfig({ DATA_DIR: dataDir });
      const first = resolveSecretKey(config, logger);
      const second = resolveSecretKey(config, logger);
      assert.equal(first.length, 32);
      assert.deepEqual(second, first);
      const file = join(dataDir, 'webhook-secret.key');
      assert.equal(readFileSync(file, 'utf8'), `${first.toString('hex')}\n`);
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.equal(warnings.length, 2);
      assert.match(warnings[0]!, /WEBHOOK_SECRET_KEY is not set/);
      // The operator is told which file holds the key, and whether it was just made.
      const [created, reused] = warnings.map((line) => JSON.parse(line) as { file: string; created: boolean });
      assert.deepEqual([created!.file, created!.created], [file, true]);
      assert.deepEqual([reused!.file, reused!.created], [file, false]);
    });
  });

  describe('development secret file', () => {
    const scratch = () => mkdtempSync(join(tmpdir(), 'webhooks-dev-secret-'));

    it('creates missing parent folders and reads the value back without the line break or blanks around it', () => {
      const dataDir = join(scratch(), 'a', 'b');
      assert.deepEqual(
        readOrCreateDevSecret(dataDir, 'x.key', () => 'first'),
        { value: 'first', created: true },
      );
      writeFileSync(join(dataDir, 'x.key'), '  edited \n\n');
      assert.deepEqual(
        readOrCreateDevSecret(dataDir, 'x.key', () => 'second'),
        { value: 'edited', created: false },
      );
    });

    it('never overwrites a secret another process wrote meanwhile', () => {
      const dataDir = scratch();
      const file = join(dataDir, 'x.key');
      // The other process writes its secret between our read (none yet) and our write.
      assert.throws(
        () =>
          readOrCreateDevSecret(dataDir, 'x.key', () => {
            writeFileSync(file, 'theirs\n');
            return 'ours';
          }),
        /EEXIST/,
      );
      assert.equal(readFileSync(file, 'utf8'), 'theirs\n');
    });

    it('fails on a file it cannot read instead of replacing it', () => {
      const dataDir = scratch();
      mkdirSync(join(dataDir, 'x.key')); // a folder where the file should be: EISDIR, not ENOENT
      assert.throws(() => readOrCreateDevSecret(dataDir, 'x.key', () => 'new'), /EISDIR/);
    });
  });

  describe('WEBHOOK_SECRET_KEYS', () => {
    const hex = () => randomBytes(32).toString('hex');
    const logger = pino({ level: 'silent' });

    it('parses id:key entries in order, hex or base64, ignoring blanks and empty entries', () => {
      const [a, b] = [randomBytes(32), randomBytes(32)];
      assert.deepEqual(parseSecretKeyRing(` k-2026.b_1:${a.toString('hex')} , ,k1:${b.toString('base64')},`), [
        { id: 'k-2026.b_1', key: a },
        { id: 'k1', key: b },
      ]);
      assert.equal(parseSecretKeyRing(`${'i'.repeat(64)}:${hex()}`)[0]!.id.length, 64);
      assert.equal(parseSecretKeyRing(`a:${hex()}`)[0]!.id, 'a');
    });

    it('refuses an empty ring and malformed entries, naming the entry but never the key', () => {
      const key = hex();
      for (const empty of ['', ' ', ', ,']) assert.throws(() => parseSecretKeyRing(empty), /has no key/);
      for (const id of ['', ' ', 'k 1', 'k/1', 'é1', 'k1é', 'i'.repeat(65)])
        assert.throws(
          () => parseSecretKeyRing(`k0:${hex()},${id}:${key}`),
          (error: Error) =>
            error.message === 'WEBHOOK_SECRET_KEYS entry 2 must be id:key' && !error.message.includes(key),
        );
      assert.throws(() => parseSecretKeyRing(key), /^Error: WEBHOOK_SECRET_KEYS entry 1 must be id:key$/);
      assert.throws(() => parseSecretKeyRing(`k1:${key.slice(2)}`), /must decode to 32 bytes/);
    });

    it('resolves the ring: WEBHOOK_SECRET_KEYS first, WEBHOOK_SECRET_KEY kept readable as k0', () => {
      const [single, a, b] = [randomBytes(32), randomBytes(32), randomBytes(32)];
      const ring = `k2:${a.toString('hex')},k1:${b.toString('hex')}`;
      const resolve = (env: NodeJS.ProcessEnv) => resolveSecretKeyRing(loadConfig(env), logger);
      assert.deepEqual(resolve({ WEBHOOK_SECRET_KEY: single.toString('hex') }), [{ id: 'k0', key: single }]);
      assert.deepEqual(resolve({ WEBHOOK_SECRET_KEYS: ring }), [
        { id: 'k2', key: a },
        { id: 'k1', key: b },
      ]);
      assert.deepEqual(resolve({ WEBHOOK_SECRET_KEYS: ring, WEBHOOK_SECRET_KEY: single.toString('hex') }), [
        { id: 'k2', key: a },
        { id: 'k1', key: b },
        { id: 'k0', key: single },
      ]);
      // The ring names k0 itself (say, the single key moved into it): the ring's k0 is the one.
      assert.deepEqual(
        resolve({ WEBHOOK_SECRET_KEYS: `k0:${a.toString('hex')}`, WEBHOOK_SECRET_KEY: single.toString('hex') }),
        [{ id: 'k0', key: a }],
      );
      assert.deepEqual(
        resolve({
          WEBHOOK_SECRET_KEYS: `k0:${a.toString('hex')},k1:${b.toString('hex')}`,
          WEBHOOK_SECRET_KEY: single.toString('hex'),
        }),
        [
          { id: 'k0', key: a },
          { id: 'k1', key: b },
        ],
      );
    });
  });
});

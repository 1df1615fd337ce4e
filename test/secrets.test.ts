import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../common/config';
import {
  createSecretBox,
  generateWebhookSecret,
  parseSecretKey,
  registrationSecretAad,
  resolveSecretKey,
} from '../common/secrets';

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
    });
  });

  describe('WEBHOOK_SECRET_KEY', () => {
    it('parses 64 hex digits or base64 of 32 bytes', () => {
      const key = randomBytes(32);
      assert.deepEqual(parseSecretKey(key.toString('hex')), key);
      assert.deepEqual(parseSecretKey(key.toString('base64')), key);
      assert.throws(() => parseSecretKey(randomBytes(16).toString('base64')), /32 bytes/);
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
      assert.equal(readFileSync(file, 'utf8').trim(), first.toString('hex'));
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.equal(warnings.length, 2);
      assert.match(warnings[0]!, /WEBHOOK_SECRET_KEY is not set/);
    });
  });
});

// The receiver URL rules (common/registration/webhook-url.ts) as a pure unit: what registration and every attempt accept.
import assert from 'node:assert/strict';
import {
  MAX_WEBHOOK_URL_LENGTH,
  parseWebhookUrl,
  refusedScheme,
  webhookUrlPolicy,
} from '../../common/registration/webhook-url';

describe('webhook URL rules (pure)', () => {
  it('accepts absolute http and https URLs with a host, as the WHATWG parser reads them', () => {
    assert.equal(parseWebhookUrl('https://receiver.example/hooks?x=1')?.href, 'https://receiver.example/hooks?x=1');
    assert.equal(parseWebhookUrl('http://127.0.0.1:8080/hooks')?.host, '127.0.0.1:8080');
    assert.equal(parseWebhookUrl('HTTPS://Receiver.Example')?.href, 'https://receiver.example/');
  });

  it('refuses other schemes, credentials, relative and unparseable URLs', () => {
    for (const text of [
      'ftp://receiver.example/hooks',
      'file:///etc/passwd',
      'mailto:ops@receiver.example',
      'javascript:alert(1)',
      'data:text/plain,hi',
      'https://user:secret@receiver.example/hooks',
      'https://user@receiver.example/hooks',
      'https://:secret@receiver.example/hooks',
      '/hooks',
      'receiver.example/hooks',
      'not a url',
      '',
    ])
      assert.equal(parseWebhookUrl(text), undefined, text);
  });

  it(`accepts up to ${MAX_WEBHOOK_URL_LENGTH} characters, not one more`, () => {
    const base = 'https://receiver.example/';
    const longest = base + 'a'.repeat(MAX_WEBHOOK_URL_LENGTH - base.length);
    assert.equal(parseWebhookUrl(longest)?.href, longest);
    assert.equal(parseWebhookUrl(`${longest}a`), undefined);
  });

  it('delivers over https only in production, unless ALLOW_HTTP_WEBHOOK_URLS=true', () => {
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'production' }), { httpsOnly: true });
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'production', ALLOW_HTTP_WEBHOOK_URLS: false }), { httpsOnly: true });
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'production', ALLOW_HTTP_WEBHOOK_URLS: true }), { httpsOnly: false });
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'development' }), { httpsOnly: false });
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'test' }), { httpsOnly: true }, 'every NODE_ENV but development');
    assert.deepEqual(webhookUrlPolicy({}), { httpsOnly: false });
  });

  it('refuses a plain http receiver under an https-only policy, and nothing else', () => {
    const http = new URL('http://receiver.example/hooks');
    const https = new URL('https://receiver.example/hooks');
    assert.equal(refusedScheme(http, { httpsOnly: true }), true);
    assert.equal(refusedScheme(https, { httpsOnly: true }), false);
    assert.equal(refusedScheme(http, { httpsOnly: false }), false);
    assert.equal(refusedScheme(https, { httpsOnly: false }), false);
  });
});

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { checkWebhookSignature, signPayload, verifyWebhookSignature } from '../../common/crypto/signature';

describe('signature (spec section 5)', () => {
  const secret = 'whsec_test-secret';
  const body = '{"test":"hello","n":1}';
  const now = 1_740_000_000_000;
  const timestamp = String(now);
  // Computed here, not by the code under test.
  const expected = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');

  it('signs lowercase hex HMAC-SHA256 over "{timestamp}.{body}"', () => {
    assert.equal(signPayload(secret, timestamp, body), expected);
    assert.equal(signPayload(secret, now, Buffer.from(body)), expected);
    assert.match(expected, /^[0-9a-f]{64}$/);
  });

  it('accepts a correct signature within 5 minutes either way', () => {
    for (const skew of [0, 300_000, -300_000])
      assert.equal(
        verifyWebhookSignature({ secret, timestamp, signature: expected, rawBody: body, now: now + skew }),
        true,
      );
  });

  it('refuses a stale or future timestamp beyond the tolerance', () => {
    for (const skew of [300_001, -300_001])
      assert.deepEqual(
        checkWebhookSignature({ secret, timestamp, signature: expected, rawBody: body, now: now + skew }),
        {
          valid: false,
          reason: 'stale-timestamp',
        },
      );
    assert.equal(
      verifyWebhookSignature({
        secret,
        timestamp,
        signature: expected,
        rawBody: body,
        now: now + 2_000,
        toleranceMs: 1_000,
      }),
      false,
    );
  });

  it('refuses a tampered body, another secret, a re-serialised body and an altered signature', () => {
    const check = (overrides: object) =>
      checkWebhookSignature({ secret, timestamp, signature: expected, rawBody: body, now, ...overrides });
    assert.equal(check({ rawBody: body.replace('1', '2') }).valid, false);
    assert.equal(check({ secret: 'whsec_other' }).valid, false);
    assert.equal(check({ rawBody: JSON.stringify(JSON.parse(body), null, 1) }).valid, false);
    assert.equal(check({ signature: expected.toUpperCase() }).valid, false);
    assert.deepEqual(check({ signature: expected.slice(0, -1) }), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({ signature: expected + '0' }), { valid: false, reason: 'bad-signature' });
  });

  it('refuses missing headers and timestamps that are not digits', () => {
    const check = (overrides: object) =>
      checkWebhookSignature({ secret, timestamp, signature: expected, rawBody: body, now, ...overrides });
    assert.deepEqual(check({ timestamp: undefined }), { valid: false, reason: 'missing-headers' });
    assert.deepEqual(check({ signature: undefined }), { valid: false, reason: 'missing-headers' });
    assert.deepEqual(check({ timestamp: [timestamp, timestamp] }), { valid: false, reason: 'missing-headers' });
    for (const bad of ['', ' 1740000000000', '1740000000000.0', '-1', '1e12', '0x19'])
      assert.deepEqual(check({ timestamp: bad }), { valid: false, reason: 'malformed-timestamp' }, bad);
  });
});

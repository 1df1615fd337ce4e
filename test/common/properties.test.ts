// Property tests (fast-check) for the pure guards every delivery and every request passes through.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { forbiddenRange } from '../../activities/http/ssrf';
import { parseRetryAfter } from '../../activities/http/retry-after';
import { isSafeId, VITAL_TYPES } from '../../common/contract';
import { validateDeliveryInput, validateEvent } from '../../common/contract/validate';
import { createSecretBox } from '../../common/crypto/secrets';
import { checkWebhookSignature, signPayload } from '../../common/crypto/signature';
import { parseWebhookUrl } from '../../common/registration/webhook-url';

const NOW = Date.UTC(2026, 0, 1);
const octet = fc.integer({ min: 0, max: 255 });
const v4 = (a: number, b: number, c: number, d: number) => `${a}.${b}.${c}.${d}`;

/** Any string, NUL, lone surrogates and astral characters included. */
const anyString = fc.string({
  unit: fc.oneof(
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    fc.constantFrom('\u0000', '\ud800', '\udfff'),
  ),
});

describe('properties: the SSRF guard', () => {
  /** Private, loopback, link-local, CGNAT, multicast and reserved IPv4 ranges, each as a generator. */
  const privateV4 = fc.oneof(
    fc.tuple(octet, octet, octet).map(([b, c, d]) => v4(10, b, c, d)),
    fc.tuple(octet, octet, octet).map(([b, c, d]) => v4(127, b, c, d)),
    fc.tuple(octet, octet).map(([c, d]) => v4(169, 254, c, d)),
    fc.tuple(fc.integer({ min: 16, max: 31 }), octet, octet).map(([b, c, d]) => v4(172, b, c, d)),
    fc.tuple(octet, octet).map(([c, d]) => v4(192, 168, c, d)),
    fc.tuple(fc.integer({ min: 64, max: 127 }), octet, octet).map(([b, c, d]) => v4(100, b, c, d)),
    fc.tuple(octet, octet, octet).map(([b, c, d]) => v4(0, b, c, d)),
    fc.tuple(fc.integer({ min: 224, max: 255 }), octet, octet, octet).map(([a, b, c, d]) => v4(a, b, c, d)),
  );

  it('refuses every private, loopback, link-local, CGNAT, multicast and reserved IPv4 address', () => {
    fc.assert(fc.property(privateV4, (address) => forbiddenRange(address) !== undefined));
  });

  it('refuses the same addresses written as IPv4-mapped IPv6', () => {
    fc.assert(fc.property(privateV4, (address) => forbiddenRange(`::ffff:${address}`) !== undefined));
  });

  it('gives mapped and plain IPv4 the same verdict, and never throws on any text', () => {
    fc.assert(
      fc.property(octet, octet, octet, octet, (a, b, c, d) => {
        const plain = forbiddenRange(v4(a, b, c, d));
        assert.equal(forbiddenRange(`::ffff:${v4(a, b, c, d)}`) === undefined, plain === undefined);
      }),
    );
    fc.assert(fc.property(anyString, (text) => void forbiddenRange(text)));
  });

  it('accepts only absolute http(s) URLs with a host and no credentials, and never throws', () => {
    fc.assert(
      fc.property(fc.oneof(anyString, fc.webUrl({ withQueryParameters: true, withFragments: true })), (text) => {
        const url = parseWebhookUrl(text);
        if (url === undefined) return;
        assert.ok(url.protocol === 'http:' || url.protocol === 'https:');
        assert.notEqual(url.hostname, '');
        assert.equal(url.username + url.password, '');
      }),
    );
    fc.assert(
      fc.property(fc.webUrl(), fc.string({ minLength: 1, maxLength: 8, unit: 'grapheme-ascii' }), (url, user) => {
        const withUser = url.replace('://', `://${encodeURIComponent(user)}@`);
        assert.equal(parseWebhookUrl(withUser), undefined, withUser);
      }),
    );
  });
});

describe('properties: parseRetryAfter', () => {
  it('never throws, and answers undefined or a positive finite delay, for any text', () => {
    fc.assert(
      fc.property(anyString, (text) => {
        const delay = parseRetryAfter(text, NOW);
        assert.ok(delay === undefined || (Number.isFinite(delay) && delay > 0), String(delay));
      }),
    );
  });

  it('reads delta-seconds as seconds, zero as no wait', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), fc.constantFrom('', ' ', '\t'), (seconds, pad) => {
        assert.equal(parseRetryAfter(`${pad}${seconds}${pad}`, NOW), seconds === 0 ? undefined : seconds * 1000);
      }),
    );
  });

  it('reads an IMF-fixdate as the time until it, and a past one as no wait', () => {
    fc.assert(
      fc.property(fc.integer({ min: -86_400, max: 86_400 }), (offsetSeconds) => {
        const header = new Date(NOW + offsetSeconds * 1000).toUTCString();
        const delay = parseRetryAfter(header, NOW);
        assert.equal(delay, offsetSeconds > 0 ? offsetSeconds * 1000 : undefined, header);
      }),
    );
  });

  it('refuses negative, fractional and signed numbers', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true }), (value) => {
        const text = String(value);
        fc.pre(!/^\d+$/.test(text));
        assert.equal(parseRetryAfter(text, NOW), undefined, text);
      }),
    );
  });
});

describe('properties: the signature verifier', () => {
  const secret = fc.string({ minLength: 1, maxLength: 40 }).map((s) => `whsec_${s}`);
  const body = fc.uint8Array({ maxLength: 512 }).map((bytes) => Buffer.from(bytes));
  const skew = fc.integer({ min: -300_000, max: 300_000 });

  it('accepts what was signed with the secret, within the tolerance', () => {
    fc.assert(
      fc.property(secret, body, skew, (key, raw, offset) => {
        const timestamp = String(NOW + offset);
        const signature = signPayload(key, timestamp, raw);
        assert.deepEqual(checkWebhookSignature({ secret: key, timestamp, signature, rawBody: raw, now: NOW }), {
          valid: true,
        });
      }),
    );
  });

  it('refuses a changed body, another secret, or a timestamp outside the tolerance', () => {
    fc.assert(
      fc.property(secret, secret, body, fc.nat(), skew, (key, otherKey, raw, at, offset) => {
        const timestamp = String(NOW + offset);
        const signature = signPayload(key, timestamp, raw);
        const check = (input: Partial<Parameters<typeof checkWebhookSignature>[0]>) =>
          checkWebhookSignature({ secret: key, timestamp, signature, rawBody: raw, now: NOW, ...input }).valid;
        if (raw.length > 0) {
          const changed = Buffer.from(raw);
          changed[at % raw.length] = changed[at % raw.length]! ^ 0x01;
          assert.equal(check({ rawBody: changed }), false);
        }
        assert.equal(check({ rawBody: Buffer.concat([raw, Buffer.from(' ')]) }), false);
        if (otherKey !== key) assert.equal(check({ secret: otherKey }), false);
        assert.equal(check({ now: NOW + 300_001 + Math.abs(offset) * 2 + 1 }), false);
      }),
    );
  });

  it('never throws and never accepts arbitrary header values', () => {
    fc.assert(
      fc.property(
        secret,
        body,
        fc.oneof(anyString, fc.constant(undefined), fc.array(fc.string())),
        fc.oneof(anyString, fc.constant(undefined), fc.array(fc.string())),
        (key, raw, timestamp, signature) => {
          const result = checkWebhookSignature({ secret: key, timestamp, signature, rawBody: raw, now: NOW });
          const right = typeof timestamp === 'string' && signature === signPayload(key, timestamp, raw);
          assert.equal(
            result.valid,
            right && /^\d{1,16}$/.test(timestamp) && Math.abs(NOW - Number(timestamp)) <= 300_000,
          );
        },
      ),
    );
  });
});

describe('properties: sealed secrets', () => {
  const box = createSecretBox(randomBytes(32));
  const aad = fc.string({ minLength: 1, maxLength: 60 });

  it('opens what it sealed, with the same associated data only', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), aad, aad, (plaintext, id, otherId) => {
        const sealed = box.seal(plaintext, id);
        assert.equal(box.open(sealed, id), plaintext);
        if (otherId !== id) assert.throws(() => box.open(sealed, otherId));
      }),
    );
  });

  it('refuses any sealed text changed in one part, and any text that was never sealed, by throwing', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40 }),
        aad,
        fc.integer({ min: 1, max: 3 }),
        fc.uint8Array({ minLength: 1, maxLength: 40 }),
        (plaintext, id, part, replacement) => {
          const sealed = box.seal(plaintext, id);
          const parts = sealed.split(':');
          const other = Buffer.from(replacement).toString('base64');
          fc.pre(Buffer.from(parts[part]!, 'base64').toString('base64') !== other);
          parts[part] = other;
          assert.throws(() => box.open(parts.join(':'), id));
        },
      ),
    );
    fc.assert(fc.property(anyString, aad, (text, id) => void assert.throws(() => box.open(text, id))));
  });
});

describe('properties: the event validator', () => {
  const person = {
    userUUID: fc.uuid(),
    email: fc.emailAddress(),
    firstName: fc.string(),
    lastName: fc.string(),
  };
  const fall = fc.record({
    ...person,
    reasons: fc.array(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 4 }),
    happenedAt: fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4e12) }).map((d) => d.toISOString()),
  });
  const vital = fc.record({
    ...person,
    triggeredVitals: fc.array(
      fc.record({
        vitalType: fc.constantFrom(...VITAL_TYPES),
        badValue: fc.double({ noNaN: true, noDefaultInfinity: true }),
        thresholdValue: fc.double({ noNaN: true, noDefaultInfinity: true }),
        vital_id: fc.string({ minLength: 1 }),
        reason: fc.constantFrom('high', 'low', null),
      }),
      { minLength: 1, maxLength: 4 },
    ),
  });

  it('accepts every event of the spec shape', () => {
    fc.assert(fc.property(fall, (payload) => validateEvent('FALL_DETECTION', payload) === undefined));
    fc.assert(fc.property(vital, (payload) => validateEvent('VITAL_THRESHOLD', payload) === undefined));
  });

  it('refuses an event with any extra field, __proto__ and constructor included, naming it', () => {
    fc.assert(
      fc.property(
        fall,
        fc.oneof(fc.string({ minLength: 1 }), fc.constantFrom('__proto__', 'constructor')),
        (payload, key) => {
          fc.pre(!(key in payload) || key === '__proto__' || key === 'constructor');
          const withExtra = JSON.parse(
            JSON.stringify(payload).replace(/^\{/, () => `{${JSON.stringify(key)}:1,`),
          ) as object;
          assert.match(validateEvent('FALL_DETECTION', withExtra) ?? '', /which this event type does not allow/);
        },
      ),
    );
  });

  it('never throws on any input, and passes a delivery only with a project id in the safe alphabet', () => {
    fc.assert(
      fc.property(fc.anything({ withObjectString: true, withNullPrototype: true }), fc.anything(), (type, payload) => {
        const message = validateEvent(type, payload);
        assert.ok(message === undefined || typeof message === 'string');
      }),
    );
    fc.assert(
      fc.property(fall, anyString, (payload, projectId) => {
        const verdict = validateDeliveryInput({
          projectId,
          webhookType: 'FALL_DETECTION',
          userUUID: payload.userUUID,
          payload,
        });
        assert.equal(verdict === undefined, isSafeId(projectId), `${JSON.stringify(projectId)}: ${verdict}`);
      }),
    );
  });
});

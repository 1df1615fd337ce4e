import assert from 'node:assert/strict';
import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, verify } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { deliverWebhookEvent } from '../../workflows';
import { generateWebhookSecret } from '../../common/crypto/secrets';
import {
  asymmetricSignatureHeader,
  checkStandardWebhook,
  checkStandardWebhookV1a,
  generateSigningKeyPair,
  parseStandardWebhookPublicKey,
  signStandardWebhook,
  signStandardWebhookV1a,
  standardWebhookPublicKey,
  standardWebhookSignatureHeader,
  verifyStandardWebhookV1a,
  verifyWebhookSignature,
} from '../../common/crypto/signature';
import { addProject, createRegistration } from '../../db';
import { fallEvent, fallPayload, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid, type ReceivedRequest } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

/** The headers of a received request as the stock library takes them. */
const stringHeaders = (headers: IncomingHttpHeaders): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)]));

/** The stock `standardwebhooks` verifier, as a receiver would call it; throws WebhookVerificationError on refusal. */
const stockVerify = (secret: string, request: ReceivedRequest, headers = stringHeaders(request.headers)) =>
  new Webhook(secret).verify(request.rawBody, headers);

describe('Standard Webhooks signatures (pure)', () => {
  const secret = generateWebhookSecret();
  const body = JSON.stringify(fallPayload);
  const webhookId = 'webhook-event-e1';
  // Read when each test runs: the stock verifier checks the timestamp against its own clock (5 minutes).
  let seconds: number;
  beforeEach(() => (seconds = Math.floor(Date.now() / 1000)));

  it('signs exactly like the stock standardwebhooks library', () => {
    const stock = new Webhook(secret).sign(webhookId, new Date(seconds * 1000), body);
    assert.equal(signStandardWebhook(secret, webhookId, seconds, body), stock);
    assert.equal(signStandardWebhook(secret, webhookId, String(seconds), Buffer.from(body)), stock);
  });

  it('puts one signature per active secret in webhook-signature, each accepted by the stock library', () => {
    const previous = generateWebhookSecret();
    const header = standardWebhookSignatureHeader([secret, previous], webhookId, seconds, body);
    assert.equal(header.split(' ').length, 2);
    const headers = { 'webhook-id': webhookId, 'webhook-timestamp': String(seconds), 'webhook-signature': header };
    for (const key of [secret, previous]) assert.deepEqual(new Webhook(key).verify(body, headers), fallPayload);
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(body, headers), WebhookVerificationError);
    assert.deepEqual(checkStandardWebhook({ secret: [generateWebhookSecret(), previous], headers, rawBody: body }), {
      valid: true,
    });
  });

  it('refuses another webhook-id, another body, a stale timestamp, missing headers and other secrets', () => {
    const headers = {
      'webhook-id': webhookId,
      'webhook-timestamp': String(seconds),
      'webhook-signature': signStandardWebhook(secret, webhookId, seconds, body),
    };
    const check = (overrides: object, rawBody = body, key: string | string[] = secret) =>
      checkStandardWebhook({ secret: key, headers: { ...headers, ...overrides }, rawBody });
    assert.deepEqual(check({}), { valid: true });
    assert.deepEqual(check({ 'webhook-id': 'webhook-event-e2' }), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({}, body.replace('fall', 'fell')), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({}, body, [generateWebhookSecret()]), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({ 'webhook-timestamp': String(seconds - 301) }), {
      valid: false,
      reason: 'stale-timestamp',
    });
    // The tolerance (5 min) is inclusive, in both directions, on the receiver's clock.
    for (const skew of [300_000, -300_000])
      assert.deepEqual(checkStandardWebhook({ secret, headers, rawBody: body, now: seconds * 1000 + skew }), {
        valid: true,
      });
    for (const skew of [300_001, -300_001])
      assert.deepEqual(checkStandardWebhook({ secret, headers, rawBody: body, now: seconds * 1000 + skew }), {
        valid: false,
        reason: 'stale-timestamp',
      });
    assert.deepEqual(check({ 'webhook-timestamp': `${seconds}.5` }), { valid: false, reason: 'malformed-timestamp' });
    assert.deepEqual(check({ 'webhook-signature': undefined }), { valid: false, reason: 'missing-headers' });
    assert.deepEqual(check({ 'webhook-signature': headers['webhook-signature'].replace('v1,', 'v2,') }), {
      valid: false,
      reason: 'bad-signature',
    });
  });

  it('keeps secrets issued in base64url signing: X-Signature keyed with the whole string, webhook-signature decoded', () => {
    const legacy = 'whsec_' + Buffer.from('fb'.repeat(16) + 'ff'.repeat(16), 'hex').toString('base64url');
    assert.match(legacy, /[-_]/);
    const key = Buffer.from(legacy.slice(6), 'base64url');
    const stock = new Webhook(key, { format: 'raw' }).sign(webhookId, new Date(seconds * 1000), body);
    assert.equal(signStandardWebhook(legacy, webhookId, seconds, body), stock);
  });

  it('verifyWebhookSignature (X-Signature) accepts any secret of a list, and none outside it', () => {
    const previous = generateWebhookSecret();
    const timestamp = String(Date.now());
    // Computed here, not by the code under test.
    const signed = (key: string) => ({
      timestamp,
      rawBody: body,
      signature: createHmac('sha256', key).update(`${timestamp}.${body}`).digest('hex'),
    });
    assert.equal(verifyWebhookSignature({ secret: [previous, secret], ...signed(secret) }), true);
    assert.equal(verifyWebhookSignature({ secret: [previous, secret], ...signed(previous) }), true);
    assert.equal(verifyWebhookSignature({ secret: [previous], ...signed(secret) }), false);
    assert.equal(verifyWebhookSignature({ secret: [], ...signed(secret) }), false);
  });
});

/** This test's own import of a whpk_ key, independent of the code under test: the raw 32 bytes under an SPKI header. */
const independentPublicKey = (whpk: string) => {
  assert.match(whpk, /^whpk_[A-Za-z0-9+/]{43}=$/);
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(whpk.slice(5), 'base64')]);
  return createPublicKey({ key: spki, format: 'der', type: 'spki' });
};

describe('Standard Webhooks v1a, Ed25519 (pure)', () => {
  const body = JSON.stringify(fallPayload);
  const webhookId = 'webhook-event-e1';
  const pair = generateSigningKeyPair();
  let seconds: number;
  beforeEach(() => (seconds = Math.floor(Date.now() / 1000)));

  const headersWith = (signature: string) => ({
    'webhook-id': webhookId,
    'webhook-timestamp': String(seconds),
    'webhook-signature': signature,
  });

  it('makes a key pair whose public key is whpk_ and base64 of the raw 32 bytes of the private key’s public half', () => {
    const derived = createPublicKey(createPrivateKey(pair.privateKeyPem)).export({ format: 'der', type: 'spki' });
    assert.equal(pair.publicKey, 'whpk_' + derived.subarray(-32).toString('base64'));
    assert.match(pair.privateKeyPem, /^-----BEGIN PRIVATE KEY-----\n/);
    assert.notEqual(generateSigningKeyPair().publicKey, pair.publicKey);
    assert.equal(standardWebhookPublicKey(independentPublicKey(pair.publicKey)), pair.publicKey);
    assert.throws(() => standardWebhookPublicKey(generateKeyPairSync('ed448').publicKey), /not an Ed25519 public key/);
  });

  it('signs `{webhook-id}.{webhook-timestamp}.{body}` with Ed25519: node:crypto verifies it with the raw public key', () => {
    const signed = signStandardWebhookV1a(pair.privateKeyPem, webhookId, seconds, body);
    assert.match(signed, /^v1a,[A-Za-z0-9+/]{86}==$/);
    const signature = Buffer.from(signed.slice(4), 'base64');
    const key = independentPublicKey(pair.publicKey);
    assert.equal(verify(null, Buffer.from(`${webhookId}.${seconds}.${body}`), key, signature), true);
    assert.equal(verify(null, Buffer.from(`${webhookId}.${seconds}.${body} `), key, signature), false);
    assert.equal(verify(null, Buffer.from(`${webhookId}.${seconds + 1}.${body}`), key, signature), false);
    // A Buffer body and a string timestamp sign the same message (Ed25519 is deterministic).
    assert.equal(signStandardWebhookV1a(pair.privateKeyPem, webhookId, String(seconds), Buffer.from(body)), signed);
  });

  it('verifies with the public key alone, and refuses another key, id, timestamp, body, and a stale or missing header', () => {
    const headers = headersWith(signStandardWebhookV1a(pair.privateKeyPem, webhookId, seconds, body));
    const check = (overrides: object, rawBody = body, publicKey: string | string[] = pair.publicKey) =>
      checkStandardWebhookV1a({ publicKey, headers: { ...headers, ...overrides }, rawBody });
    assert.deepEqual(check({}), { valid: true });
    assert.equal(verifyStandardWebhookV1a({ publicKey: pair.publicKey, headers, rawBody: Buffer.from(body) }), true);
    const other = generateSigningKeyPair().publicKey;
    assert.deepEqual(check({}, body, other), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({}, body, [other, pair.publicKey]), { valid: true });
    assert.deepEqual(check({}, body, []), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({ 'webhook-id': 'webhook-event-e2' }), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({ 'webhook-timestamp': String(seconds - 1) }), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({}, body.replace('fall', 'fell')), { valid: false, reason: 'bad-signature' });
    assert.deepEqual(check({ 'webhook-timestamp': String(seconds - 301) }), {
      valid: false,
      reason: 'stale-timestamp',
    });
    assert.deepEqual(check({ 'webhook-timestamp': `${seconds}.5` }), { valid: false, reason: 'malformed-timestamp' });
    assert.deepEqual(check({ 'webhook-signature': undefined }), { valid: false, reason: 'missing-headers' });
    assert.deepEqual(check({ 'webhook-id': '' }), { valid: false, reason: 'missing-headers' });
    for (const skew of [300_000, -300_000])
      assert.equal(
        verifyStandardWebhookV1a({ publicKey: pair.publicKey, headers, rawBody: body, now: seconds * 1000 + skew }),
        true,
      );
    assert.equal(
      verifyStandardWebhookV1a({ publicKey: pair.publicKey, headers, rawBody: body, now: seconds * 1000 + 300_001 }),
      false,
    );
  });

  it('reads only v1a entries: the same bytes under v1 or v2, truncated or padded, and a v1 HMAC never pass', () => {
    const signed = signStandardWebhookV1a(pair.privateKeyPem, webhookId, seconds, body);
    const raw = signed.slice(4);
    const secret = generateWebhookSecret();
    const check = (signature: string) =>
      checkStandardWebhookV1a({ publicKey: pair.publicKey, headers: headersWith(signature), rawBody: body });
    for (const refused of [
      `v1,${raw}`,
      `v2,${raw}`,
      `v1a,${raw.slice(0, -4)}`,
      `v1a,${raw}AAAA`,
      `v1a ${raw}`,
      signStandardWebhook(secret, webhookId, seconds, body),
    ])
      assert.deepEqual(check(refused), { valid: false, reason: 'bad-signature' }, refused);
    // Among other entries, in any order.
    assert.deepEqual(check(`v1,abc ${signed} v2,xyz`), { valid: true });
  });

  it('refuses a public key that is not whpk_ and base64 of 32 bytes', () => {
    const raw = pair.publicKey.slice(5);
    assert.equal(standardWebhookPublicKey(parseStandardWebhookPublicKey(raw)), pair.publicKey);
    for (const bad of [
      'whpk_' + Buffer.alloc(31, 1).toString('base64'),
      'whpk_' + Buffer.alloc(33, 1).toString('base64'),
      'whpk_' + Buffer.from(raw, 'base64').toString('base64url'),
      'whsec_' + raw,
      '',
    ])
      assert.throws(() => parseStandardWebhookPublicKey(bad), /Ed25519 public key is whpk_/, bad);
    const headers = headersWith(signStandardWebhookV1a(pair.privateKeyPem, webhookId, seconds, body));
    assert.throws(() => checkStandardWebhookV1a({ publicKey: 'whpk_x', headers, rawBody: body }));
  });

  it('puts one v1a entry per key pair first, newest first, then one v1 per secret, each verifying on its own', () => {
    const previous = generateSigningKeyPair();
    const secrets = [generateWebhookSecret(), generateWebhookSecret()];
    const header = asymmetricSignatureHeader(
      [pair.privateKeyPem, previous.privateKeyPem],
      secrets,
      webhookId,
      seconds,
      body,
    );
    const entries = header.split(' ');
    assert.deepEqual(
      entries.map((entry) => entry.split(',')[0]),
      ['v1a', 'v1a', 'v1', 'v1'],
    );
    assert.equal(entries[0], signStandardWebhookV1a(pair.privateKeyPem, webhookId, seconds, body));
    assert.equal(entries[1], signStandardWebhookV1a(previous.privateKeyPem, webhookId, seconds, body));
    assert.equal(entries[2], signStandardWebhook(secrets[0]!, webhookId, seconds, body));
    const headers = headersWith(header);
    for (const key of [pair.publicKey, previous.publicKey])
      assert.equal(verifyStandardWebhookV1a({ publicKey: key, headers, rawBody: body }), true);
    // The stock library (v1 only) reads the v1 entries and skips the v1a ones.
    for (const secret of secrets) assert.deepEqual(new Webhook(secret).verify(body, headers), fallPayload);
    assert.equal(asymmetricSignatureHeader([pair.privateKeyPem], [], webhookId, seconds, body), entries[0]);
  });
});

describe('Standard Webhooks on real deliveries (Temporal dev server, real receiver on 127.0.0.1)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);

  const deliver = (projectId: string, workflowId = `webhook-event-${randomUUID()}`) =>
    fx.runWorker(async (taskQueue) => {
      const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId,
      });
      return handle.result();
    });

  it('every attempt is accepted by the stock verifier with the registration secret, and by the spec check', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script({ status: 500 }, { status: 503 });
    const workflowId = `webhook-event-${randomUUID()}`;
    const result = await deliver(projectId, workflowId);
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 3);
    for (const request of fx.receiver.requests) {
      assert.equal(request.headers['webhook-id'], workflowId);
      assert.equal(request.headers['x-webhook-id'], workflowId);
      assert.equal(
        String(request.headers['webhook-timestamp']),
        String(Math.floor(Number(request.headers['x-timestamp']) / 1000)),
      );
      assert.match(String(request.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]{43}=$/);
      assert.deepEqual(stockVerify(secret, request), fallPayload);
      assert.ok(independentSignatureValid(secret, request), 'the spec X-Signature still verifies');
      assert.throws(() => stockVerify(generateWebhookSecret(), request), WebhookVerificationError);
    }
  });

  it('a replay of a delivery under another webhook-id fails verification', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    await deliver(projectId);
    const [request] = fx.receiver.requests;
    const replayed = { ...stringHeaders(request!.headers), 'webhook-id': `webhook-event-${randomUUID()}` };
    assert.throws(() => stockVerify(secret, request!, replayed), WebhookVerificationError);
    assert.deepEqual(checkStandardWebhook({ secret, headers: replayed, rawBody: request!.rawBody }), {
      valid: false,
      reason: 'bad-signature',
    });
    assert.deepEqual(checkStandardWebhook({ secret, headers: request!.headers, rawBody: request!.rawBody }), {
      valid: true,
    });
  });

  it('a registration with a base64url secret issued before keeps verifying (X-Signature and webhook-signature)', async () => {
    const projectId = newProjectId();
    const legacy = 'whsec_' + Buffer.from('fb'.repeat(32), 'hex').toString('base64url');
    await addProject(fx.database.db, projectId);
    assert.ok(
      await createRegistration(
        fx.database.db,
        fx.registrations.secretBox,
        { projectId, url: fx.receiver.url, types: ['FALL_DETECTION'] },
        legacy,
      ),
    );
    await deliver(projectId);
    const [request] = fx.receiver.requests;
    assert.ok(independentSignatureValid(legacy, request!));
    // The stock library needs the raw key for a url-safe secret (or a rotation to a standard one).
    const key = Buffer.from(legacy.slice(6), 'base64url');
    assert.deepEqual(
      new Webhook(key, { format: 'raw' }).verify(request!.rawBody, stringHeaders(request!.headers)),
      fallPayload,
    );
    assert.equal(
      checkStandardWebhook({ secret: legacy, headers: request!.headers, rawBody: request!.rawBody }).valid,
      true,
    );
  });
});

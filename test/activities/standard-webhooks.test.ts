import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { deliverWebhookEvent } from '../../workflows';
import { generateWebhookSecret } from '../../common/crypto/secrets';
import {
  checkStandardWebhook,
  signStandardWebhook,
  standardWebhookSignatureHeader,
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

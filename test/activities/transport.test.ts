import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { createTestEventSender, describeReceiverError } from '../../api/webhooks/test-event';
import { freePort } from '../../dev/ports';
import { FailureType, type DeliveryFailedDetails } from '../../common/contract';
import { HTTPS_REQUIRED, webhookUrlPolicy } from '../../common/registration/webhook-url';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { createLocalEnvironment } from '../support/temporal';
import { bearer, hsToken } from '../support/tokens';

describe('transport: https-only receivers in production (real Postgres, Temporal dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx, () => ({ webhookUrlPolicy: webhookUrlPolicy({ NODE_ENV: 'production' }) }));

  it('the policy: https only in production, unless ALLOW_HTTP_WEBHOOK_URLS=true', () => {
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'production' }), { httpsOnly: true });
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'production', ALLOW_HTTP_WEBHOOK_URLS: true }), { httpsOnly: false });
    assert.deepEqual(webhookUrlPolicy({ NODE_ENV: 'development' }), { httpsOnly: false });
  });

  it('registration refuses an http:// receiver with a clear 400 and accepts https://', async () => {
    const projectId = newProjectId();
    await store.addProject(fx.database.db, projectId, 'Transport');
    await store.addMember(fx.database.db, projectId, 'alice');
    const register = (url: string) =>
      fetch(`${api.url}/webhooks/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...bearer(hsToken('alice')) },
        body: JSON.stringify({ projectId, url, types: ['FALL_DETECTION'] }),
      });
    const plain = await register('http://receiver.example.com/hooks');
    assert.equal(plain.status, 400);
    const problem = (await plain.json()) as { detail: string; errors: { pointer: string; detail: string }[] };
    assert.deepEqual(problem.errors, [{ pointer: '/url', detail: HTTPS_REQUIRED }]);
    assert.match(problem.detail, /\/url must be an https URL/);
    assert.equal(await store.findRegistration(fx.database.db, projectId), undefined, 'nothing stored');
    const tls = await register('https://receiver.example.com/hooks');
    assert.equal(tls.status, 201);
  });

  async function deliver(config: typeof fastConfig) {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    return fx.runWorker(
      async (taskQueue) => {
        const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
          args: [fallEvent(projectId)],
          taskQueue,
          workflowId: `webhook-event-${randomUUID()}`,
        });
        return handle.result().then(
          (result) => result,
          (error: unknown) => error,
        );
      },
      { config },
    );
  }

  it('delivery applies the same rule: an http:// registration fails at once, not retried, nothing sent', async () => {
    const outcome = await deliver({ ...fastConfig, NODE_ENV: 'production' });
    assert.ok(outcome instanceof WorkflowFailedError, String(outcome));
    const failure = outcome.cause;
    assert.ok(failure instanceof ApplicationFailure);
    assert.equal(failure.type, FailureType.DeliveryFailed);
    const details = failure.details?.[0] as DeliveryFailedDetails;
    assert.equal(details.attempts, 1, 'not retried');
    assert.match(details.lastError, /The registered webhook URL must be an https URL/);
    assert.equal(fx.receiver.requests.length, 0);
  });

  it('delivers to http:// in production when ALLOW_HTTP_WEBHOOK_URLS=true', async () => {
    const outcome = await deliver({ ...fastConfig, NODE_ENV: 'production', ALLOW_HTTP_WEBHOOK_URLS: true });
    assert.equal((outcome as { status?: string }).status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
  });
});

describe('test endpoint failures name a category, never an internal address (Temporal dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);

  const sendTest = (projectId: string, config = fastConfig) =>
    fx.runWorker(
      (taskQueue) =>
        createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: taskQueue, TEST_DELIVERY_WAIT_MS: 10_000 })(
          projectId,
        ),
      { config },
    );

  it('maps receiver error codes to categories', () => {
    assert.equal(describeReceiverError('TIMEOUT').category, 'timeout');
    assert.equal(describeReceiverError('UND_ERR_HEADERS_TIMEOUT').category, 'timeout');
    assert.equal(describeReceiverError('ECONNREFUSED').category, 'refused');
    assert.equal(describeReceiverError('UNABLE_TO_VERIFY_LEAF_SIGNATURE').category, 'tls');
    assert.equal(describeReceiverError('ERR_TLS_CERT_ALTNAME_INVALID').category, 'tls');
    assert.equal(describeReceiverError('ERR_WEBHOOK_TARGET_FORBIDDEN').category, 'forbidden-target');
    assert.equal(describeReceiverError('ENOTFOUND').category, 'unreachable');
    assert.deepEqual(describeReceiverError('PROXY_407'), {
      category: 'unreachable',
      reason: "the worker's egress proxy did not carry the request (PROXY_407)",
    });
  });

  it('refused: names the category and code, not the address', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, `http://127.0.0.1:${await freePort()}/hook`, ['FALL_DETECTION']);
    const outcome = await sendTest(projectId);
    assert.ok(!outcome.delivered);
    assert.equal(outcome.category, 'refused');
    assert.match(outcome.reason, /connection was refused \(ECONNREFUSED\)/);
    assert.doesNotMatch(outcome.reason, /127\.0\.0\.1/);
  });

  it('forbidden target: the SSRF guard refusal says so without the resolved address', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const outcome = await sendTest(projectId, { ...fastConfig, ALLOW_PRIVATE_WEBHOOK_URLS: false });
    assert.ok(!outcome.delivered);
    assert.equal(outcome.category, 'forbidden-target');
    assert.doesNotMatch(outcome.reason, /127\.0\.0\.1|loopback address/);
    assert.equal(fx.receiver.requests.length, 0);
  });

  it('HTTP status: the category and the status', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 503 };
    const outcome = await sendTest(projectId);
    assert.ok(!outcome.delivered);
    assert.equal(outcome.category, 'http-status');
    assert.equal(outcome.statusCode, 503);
  });
});

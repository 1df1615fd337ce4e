// The seam of what a delivery carries beyond its signed body (activities/delivery-options): an option added through
// the seam's registry alone reaches a real verifying receiver through the Temporal dev server and real PostgreSQL,
// on the lookup's first attempt and on the durable one after it; and how the seam merges what the options add.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import {
  DELIVERY_OPTIONS,
  createPrepareDelivery,
  type DeliveryContribution,
  type DeliveryOption,
  type DeliveryOptionSetup,
} from '../../activities/delivery-options';
import { createSecretBox } from '../../common/crypto/secrets';
import { FailureType } from '../../common/contract';
import { addProject, createRegistration, type RegistrationRow } from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { captureLogger, fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

/** The next option, as a newcomer would write it: a header derived from the registration. */
const registrationProject: DeliveryOption = {
  name: 'registration-project',
  setUp: () => (registration) => ({ headers: { 'X-Registration-Project': registration.projectId } }),
};

describe('delivery options: an option added through the seam alone is carried by real deliveries (Temporal dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);

  async function register(projectId: string) {
    await addProject(fx.database.db, projectId);
    const created = await createRegistration(fx.database.db, fx.registrations.secretBox, {
      projectId,
      url: fx.receiver.url,
      types: ['FALL_DETECTION'],
      headers: { 'X-Api-Key': 'k-123' },
    });
    assert.ok(created);
    return created.secret;
  }

  const deliver = (projectId: string, deliveryOptions?: readonly DeliveryOption[]) =>
    fx.runWorker(
      async (taskQueue) => {
        const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
          args: [fallEvent(projectId)],
          taskQueue,
          workflowId: `webhook-event-${randomUUID()}`,
        });
        return handle.result();
      },
      { deliveryOptions },
    );

  it('X-Registration-Project on the lookup’s attempt and on the durable retry, beside the custom headers, signed as ever', async () => {
    const projectId = newProjectId();
    const secret = await register(projectId);
    // The first attempt (the lookup's) gets a 500: the second is the durable activity's, reading the row afresh.
    fx.receiver.script({ status: 500 });
    const result = await deliver(projectId, [...DELIVERY_OPTIONS, registrationProject]);
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 2);
    assert.equal(fx.receiver.requests.length, 2);
    for (const request of fx.receiver.requests) {
      assert.equal(request.headers['x-registration-project'], projectId);
      assert.equal(request.headers['x-api-key'], 'k-123', 'the custom headers still carried');
      assert.ok(independentSignatureValid(secret, request), 'the signature checks out');
    }
  });

  it('without it in the registry, the header is not sent (the worker’s own options only)', async () => {
    const projectId = newProjectId();
    const secret = await register(projectId);
    const result = await deliver(projectId);
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
    const [request] = fx.receiver.requests;
    assert.ok(request);
    assert.equal(request.headers['x-registration-project'], undefined);
    assert.equal(request.headers['x-api-key'], 'k-123');
    assert.ok(independentSignatureValid(secret, request));
  });
});

describe('delivery options: how prepareDelivery merges the options (pure)', () => {
  // No option of these tests asks another server: a client that would say so.
  const http = { post: () => Promise.reject(new Error('no request expected')), close: () => Promise.resolve() };
  const setup: DeliveryOptionSetup = { config: fastConfig, secretBox: createSecretBox(Buffer.alloc(32, 7)), http };
  const registration = {
    id: 'r-1',
    projectId: 'p-1',
    customHeadersSealed: null,
    clientCertificate: null,
    oauth: null,
  } as unknown as RegistrationRow;
  const target = { url: new URL('https://receiver.example.org/hooks'), log: captureLogger().logger, attempt: 1 };
  const option = (name: string, prepared: DeliveryContribution | undefined): DeliveryOption => ({
    name,
    setUp: () => () => prepared,
  });

  it('lays headers down in registry order (a later one wins), takes the route and certificate, and asks for words in order', async () => {
    const certificate = { id: 'r-1:fp', certificate: 'CERT', privateKey: () => 'KEY' };
    const prepare = createPrepareDelivery(setup, [
      option('a', { headers: { 'X-One': 'a', 'X-Two': 'a' }, unreachable: () => undefined }),
      option('none', undefined),
      option('b', {
        headers: { 'X-Two': 'b' },
        clientCertificate: certificate,
        route: { proxy: 'http://proxy.internal:3128' },
        unreachable: (code) => (code === 'ERR_X' ? `b says ${code}` : undefined),
      }),
      { name: 'c', setUp: () => () => Promise.resolve({ unreachable: (code: string) => `c says ${code}` }) },
    ]);
    const prepared = await prepare(registration, target);
    assert.deepEqual(prepared.headers, { 'X-One': 'a', 'X-Two': 'b' });
    assert.deepEqual(prepared.connection, {
      clientCertificate: certificate,
      route: { proxy: 'http://proxy.internal:3128' },
    });
    assert.equal(prepared.unreachable('ERR_X'), 'b says ERR_X');
    assert.equal(prepared.unreachable('ERR_Y'), 'c says ERR_Y');
  });

  it('the worker’s options: no headers, the route of its egress proxy, a missing certificate named on a refused handshake', async () => {
    const direct = await createPrepareDelivery(setup)(registration, target);
    assert.deepEqual(direct.headers, {});
    assert.deepEqual(direct.connection, { route: 'direct' });
    assert.match(direct.unreachable('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED') ?? '', /the webhook has none/);
    assert.equal(direct.unreachable('ECONNREFUSED'), undefined);
    const proxied = createPrepareDelivery({
      ...setup,
      config: { ...fastConfig, HTTPS_PROXY: 'http://proxy.internal:3128' },
    });
    assert.deepEqual((await proxied(registration, target)).connection, {
      route: { proxy: 'http://proxy.internal:3128' },
    });
  });

  it('send: authorizations laid over the headers (a name once, any case), asked afresh and sent once more when one asks', async () => {
    const heard: number[] = [];
    let issued = 0;
    const prepare = createPrepareDelivery(setup, [
      option('headers', { headers: { Authorization: 'Basic gateway', 'X-Tenant': 'ward-7' } }),
      option('bearer', {
        authorization: {
          headers: () => Promise.resolve({ authorization: `Bearer t-${++issued}` }),
          refresh: (statusCode) => (heard.push(statusCode), statusCode === 401),
        },
      }),
    ]);
    const prepared = await prepare(registration, target);
    const sent: Record<string, string>[] = [];
    const answers = [401, 401, 200];
    const response = await prepared.send((headers) => {
      sent.push(headers);
      return Promise.resolve({ statusCode: answers.shift()! });
    });
    assert.deepEqual(sent, [
      { 'X-Tenant': 'ward-7', authorization: 'Bearer t-1' },
      { 'X-Tenant': 'ward-7', authorization: 'Bearer t-2' },
    ]);
    assert.equal(response.statusCode, 401, 'the second answer stands: one more request at most');
    assert.deepEqual(heard, [401]);

    const once: Record<string, string>[] = [];
    const ok = await prepared.send((headers) => (once.push(headers), Promise.resolve({ statusCode: 503 })));
    assert.equal(ok.statusCode, 503);
    assert.equal(once.length, 1, 'a status no authorization asks about is not sent again');
  });

  it('custom headers that cannot be opened refuse the attempt, retryable, before any request', async () => {
    const sealed = { ...registration, customHeadersSealed: 'not-a-sealed-value' } as RegistrationRow;
    await assert.rejects(
      createPrepareDelivery(setup)(sealed, target),
      (error: unknown) =>
        error instanceof ApplicationFailure && error.type === FailureType.SecretUnavailable && !error.nonRetryable,
    );
  });
});

import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Client } from '@temporalio/client';
import { emitWebhookEvent } from '../../client';
import { main as cli } from '../../cli';
import type { CliIo } from '../../cli/command';
import { startApi, type RunningApi } from '../../api/server';
import { loadConfig, type Config } from '../../common/config';
import type { DeliverWebhookEventResult } from '../../common/contract';
import { temporalClientOn } from '../../common/temporal/connection';
import { payloadCodecFromConfig } from '../../common/crypto/payload-codec';
import * as store from '../../db';
import { startWorker, type RunningWorker } from '../../worker/start';
import { USER, captureLogger, fallEvent, fallPayload, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

const MISSING = ['ProjectId', 'WebhookType', 'PersonHash'];
/** What the log and /readyz say running without them costs: deliveries run, the UI cannot filter them. */
const COST = /deliveries start and run without them, but the Temporal UI .* cannot list or filter deliveries by/;

interface Reply {
  status: number;
  contentType: string;
  retryAfter: string | null;
  body: Record<string, unknown>;
}

/**
 * Temporal Cloud or a fresh cluster, before anyone registers ProjectId and WebhookType: every way a delivery starts
 * falls back to a start without them (deliveries/redeliveries run, unfiltered in the UI), and says so.
 */
describe('a namespace without the ProjectId and WebhookType search attributes (bare dev server)', function () {
  this.timeout(90_000);
  const fx = useDeliveryFixture(() => createLocalEnvironment({ searchAttributes: false }));

  it('the bare dev server has neither attribute registered', async () => {
    const { customAttributes } = await fx.env.connection.operatorService.listSearchAttributes({ namespace: 'default' });
    for (const name of MISSING) assert.equal(customAttributes?.[name], undefined, name);
  });

  describe('as npm start runs them: startWorker, then startApi on its NativeConnection (eager start) or its own', () => {
    let config: Config;
    let worker: RunningWorker;
    const workerLog = captureLogger();
    let apiLog: ReturnType<typeof captureLogger>;
    const apis: RunningApi[] = [];
    /** A client's codec as the service's processes have it: the ring and the database's data keys. */
    const codec = () => payloadCodecFromConfig(config, undefined, store.dataKeyStore(fx.database.db));

    before(async () => {
      config = loadConfig(
        {
          PORT: '0',
          DATABASE_URL: fx.database.url,
          TEMPORAL_ADDRESS: fx.env.address,
          TEMPORAL_TASK_QUEUE: uniqueTaskQueue('bare'),
          JWT_SECRET: TEST_JWT_SECRET,
          WEBHOOK_SECRET_KEY: fx.registrations.key,
          ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
          PAYLOAD_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
        },
        { database: true, auth: true },
      );
      worker = await startWorker(config, workerLog.logger, fx.registrations.secretBox);
    });
    after(async () => {
      await worker?.shutdown();
    });
    beforeEach(() => (apiLog = captureLogger()));
    afterEach(async () => {
      for (const api of apis.splice(0)) await api.close();
    });

    /** A fresh API (a fresh client: nothing learnt from an earlier test), as `npm start` or `start:api` runs it. */
    async function api(eagerStart: boolean, overrides: Partial<Config> = {}): Promise<string> {
      const settings = { ...config, ...overrides };
      const running = await startApi(settings, apiLog.logger, {
        secretBox: fx.registrations.secretBox,
        ...(eagerStart && {
          temporal: temporalClientOn(worker.worker.connection!, settings, worker.payloadCodec),
          eagerStart: true,
        }),
      });
      apis.push(running);
      return `http://127.0.0.1:${(running.server.address() as AddressInfo).port}`;
    }

    async function call(base: string, method: string, path: string, body?: unknown): Promise<Reply> {
      const response = await fetch(base + path, {
        method,
        headers: { ...bearer(hsToken('alice')), ...(body !== undefined && { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return {
        status: response.status,
        contentType: response.headers.get('content-type')?.split(';')[0] ?? '',
        retryAfter: response.headers.get('retry-after'),
        body: (await response.json()) as Record<string, unknown>,
      };
    }

    /** A project with alice as its member and a webhook to the test's receiver. */
    async function project(): Promise<{ projectId: string; secret: string }> {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      await store.addMember(fx.database.db, projectId, 'alice');
      return { projectId, secret };
    }

    /** A fall delivered by the worker, started as a plain client would (without search attributes). */
    async function delivered(projectId: string): Promise<string> {
      const client = temporalClientOn(fx.env.connection, config, codec());
      const workflowId = `webhook-event-${randomUUID()}`;
      const handle = await client.workflow.start('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        workflowId,
      });
      assert.equal(((await handle.result()) as DeliverWebhookEventResult).status, 'delivered');
      return workflowId;
    }

    const result = (workflowId: string) =>
      temporalClientOn(fx.env.connection, config, codec())
        .workflow.getHandle(workflowId)
        .result() as Promise<DeliverWebhookEventResult>;

    const costLines = (lines: Record<string, unknown>[]) =>
      lines.filter((line) => String(line.msg).startsWith('search attributes missing'));

    it('the worker says once, at start, what running without them costs', () => {
      const said = costLines(workerLog.lines);
      assert.equal(said.length, 1, JSON.stringify(workerLog.lines.map((l) => l.msg)));
      assert.deepEqual(said[0]!.missing, MISSING);
      assert.match(String(said[0]!.msg), COST);
      assert.match(
        String(said[0]!.msg),
        /temporal operator search-attribute create --namespace default --name ProjectId/,
      );
    });

    it('the API says it once too, and /readyz answers 200 ready naming the missing attributes', async () => {
      const base = await api(false);
      const replies = await Promise.all([1, 2, 3].map(() => call(base, 'GET', '/readyz')));
      for (const reply of replies) {
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        assert.deepEqual(reply.body.checks, { postgres: 'up', temporal: 'up' });
        const searchAttributes = reply.body.searchAttributes as { state: string; missing: string[]; detail: string };
        assert.equal(searchAttributes.state, 'missing');
        assert.deepEqual(searchAttributes.missing, MISSING);
        assert.match(searchAttributes.detail, COST);
      }
      const said = costLines(apiLog.lines);
      assert.equal(said.length, 1, JSON.stringify(apiLog.lines.map((l) => l.msg)));
      assert.deepEqual(said[0]!.missing, MISSING);
      assert.match(String(said[0]!.msg), COST);
    });

    for (const eager of [true, false]) {
      const how = eager ? 'on the worker’s NativeConnection, eager start' : 'on its own Connection';
      it(`the test endpoint (${how}) answers 200 delivered`, async () => {
        const { projectId, secret } = await project();
        const reply = await call(await api(eager), 'POST', `/webhooks/test/project/${projectId}`);
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        assert.equal(reply.body.delivered, true);
        assert.equal(fx.receiver.requests.length, 1);
        assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
        assert.equal(fx.receiver.requests[0]!.headers['x-webhook-id'], reply.body.workflowId);
      });

      it(`redelivery (${how}) starts and delivers under the original id`, async () => {
        const { projectId, secret } = await project();
        const id = await delivered(projectId);
        const reply = await call(await api(eager), 'POST', `/webhooks/project/${projectId}/deliveries/${id}/redeliver`);
        assert.equal(reply.status, 202, JSON.stringify(reply.body));
        assert.equal((await result(String(reply.body.id))).status, 'delivered');
        const [, redelivery] = await fx.receiver.waitForRequests(2);
        assert.equal(redelivery!.headers['x-webhook-id'], id);
        assert.ok(independentSignatureValid(secret, redelivery!));
      });

      it(`recovery (${how}) starts and delivers the failed delivery`, async () => {
        const { projectId } = await project();
        const since = new Date(Date.now() - 1_000).toISOString();
        const id = await delivered(projectId);
        // As a delivery that gave up would be logged.
        await fx.database.db('deliveries').where({ id }).update({ status: 'failed' });
        const reply = await call(await api(eager), 'POST', `/webhooks/project/${projectId}/deliveries/recover`, {
          since,
        });
        assert.equal(reply.status, 202, JSON.stringify(reply.body));
        assert.deepEqual(reply.body, { count: 1 });
        const [, recovered] = await fx.receiver.waitForRequests(2);
        assert.equal(recovered!.headers['x-webhook-id'], id);
        await waitForStatus(projectId, id, 'delivered');
      });
    }

    async function waitForStatus(projectId: string, id: string, status: string): Promise<void> {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
        if ((await store.findDelivery(fx.database.db, projectId, id))?.status === status) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.fail(`delivery ${id} is not ${status}`);
    }

    describe('a start Temporal refuses for another reason: 503 naming Temporal, logged with the gRPC status', () => {
      it('an unknown namespace (TEMPORAL_NAMESPACE mistyped), on its own Connection', async () => {
        const { projectId } = await project();
        const base = await api(false, { TEMPORAL_NAMESPACE: 'no-such-namespace' });
        const reply = await call(base, 'POST', `/webhooks/test/project/${projectId}`);
        assert.equal(reply.status, 503, JSON.stringify(reply.body));
        assert.equal(reply.contentType, 'application/problem+json');
        assert.equal(reply.retryAfter, '5');
        assert.equal(reply.body.detail, 'Temporal refused the request (NOT_FOUND)');
        const logged = apiLog.lines.find((line) => line.msg === 'Temporal refused the request');
        assert.ok(logged, JSON.stringify(apiLog.lines.map((l) => l.msg)));
        assert.equal(logged.grpcStatus, 'NOT_FOUND');
        assert.match(String(logged.grpcDetails), /no-such-namespace/);
        assert.equal(fx.receiver.requests.length, 0);
      });

      it('a redelivery on an unknown namespace: 503 naming Temporal, not 410 (the event is not past retention)', async () => {
        const { projectId } = await project();
        const id = await delivered(projectId);
        const base = await api(false, { TEMPORAL_NAMESPACE: 'no-such-namespace' });
        const reply = await call(base, 'POST', `/webhooks/project/${projectId}/deliveries/${id}/redeliver`);
        assert.equal(reply.status, 503, JSON.stringify(reply.body));
        assert.equal(reply.body.detail, 'Temporal refused the request (NOT_FOUND)');
        assert.equal((await store.findDelivery(fx.database.db, projectId, id))?.status, 'delivered', 'claim released');
      });

      it('a task queue name over the server’s length limit, eager start on the worker’s NativeConnection', async () => {
        const { projectId } = await project();
        const base = await api(true, { TEMPORAL_TASK_QUEUE: 'q'.repeat(1_001) });
        const reply = await call(base, 'POST', `/webhooks/test/project/${projectId}`);
        assert.equal(reply.status, 503, JSON.stringify(reply.body));
        assert.equal(reply.contentType, 'application/problem+json');
        assert.equal(reply.body.detail, 'Temporal refused the request (INVALID_ARGUMENT)');
        assert.doesNotMatch(JSON.stringify(reply.body), /unexpected/i);
        const logged = apiLog.lines.find((line) => line.msg === 'Temporal refused the request');
        assert.ok(logged, JSON.stringify(apiLog.lines.map((l) => l.msg)));
        assert.equal(logged.grpcStatus, 'INVALID_ARGUMENT');
        assert.equal(logged.grpcCode, 3);
        assert.match(String(logged.grpcDetails), /task ?queue/i);
      });
    });
  });

  describe('emitWebhookEvent and webhooks event emit', () => {
    async function emitOver(client: Client) {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      await fx.runWorker(
        async (taskQueue) => {
          const workflowId = await emitWebhookEvent(client, fallEvent(projectId), { taskQueue });
          const outcome = (await client.workflow.getHandle(workflowId).result()) as DeliverWebhookEventResult;
          assert.equal(outcome.status, 'delivered');
          assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
        },
        { searchAttributes: false },
      );
    }

    it('emitWebhookEvent over a Connection (grpc-js) delivers', () =>
      emitOver(new Client({ connection: fx.env.connection })));

    it('emitWebhookEvent over a NativeConnection delivers', () =>
      emitOver(new Client({ connection: fx.env.nativeConnection })));

    it('webhooks event emit delivers', async () => {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      await fx.runWorker(
        async (taskQueue) => {
          const out: string[] = [];
          const err: string[] = [];
          const io: CliIo = {
            env: { TEMPORAL_ADDRESS: fx.env.address, TEMPORAL_TASK_QUEUE: taskQueue },
            out: (line) => out.push(line),
            err: (line) => err.push(line),
          };
          const args = [projectId, 'FALL_DETECTION', '--user', USER, '--data', JSON.stringify(fallPayload)];
          assert.equal(await cli(['event', 'emit', ...args], io), 0, err.join('\n'));
          const outcome = (await fx.env.client.workflow.getHandle(out[0]!).result()) as DeliverWebhookEventResult;
          assert.equal(outcome.status, 'delivered');
          assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
        },
        { searchAttributes: false },
      );
    });
  });
});

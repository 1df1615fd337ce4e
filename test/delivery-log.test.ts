import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import type { AddressInfo } from 'node:net';
import { Worker } from '@temporalio/worker';
import pino from 'pino';
import { createApp, type AppDeps } from '../api/app';
import { main as cli } from '../cli';
import { loadConfig } from '../common/config';
import { createRedeliveryStarter } from '../api/deliveries/redelivery';
import { startApi } from '../api/server';
import { freePort } from '../dev/ports';
import { recoverAsOperator } from '../api/deliveries/deliveries';
import { createActivities, createWebhookHttpClient, type ActivityConfig } from '../activities';
import type { DeliverWebhookEventInput } from '../common/contract';
import * as store from '../db';
import type { deliverWebhookEvent } from '../workflows';
import { startDeliveryLogRetention } from '../worker/delivery-log-retention';
import { captureLogger, fallEvent, fastConfig, newProjectId } from './support/deliveries';
import { useDeliveryFixture, decodeOnlyPayloadCodec } from './support/delivery-fixture';
import { listenLocal, type LocalServer } from './support/jwks-server';
import { createTestDatabase, type TestDatabase } from './support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from './support/receiver';
import { createLocalEnvironment, uniqueTaskQueue, workflowBundle } from './support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from './support/tokens';

/** Retries stop after 1.5 s, so a receiver answering 500 makes a delivery give up quickly. */
const givingUp: ActivityConfig = { ...fastConfig, DELIVERY_GIVE_UP_AFTER_MS: 1_500 };
const ALERT_SECRET = 'alert-secret-0123456789abcdef';

interface Item {
  id: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  attemptLog?: { attempt: number; at: string; statusCode?: number; errorCode?: string; durationMs: number }[];
}

interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
  text: string;
  contentType: string;
}

/** One sample line of the Prometheus text format: name, labels, value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A small parser of the Prometheus text exposition format: fails on any line it cannot read. */
function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  const typed = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE ([a-zA-Z_:][\w:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) typed.add(type[1]!);
    if (line.startsWith('#')) continue;
    // Prometheus parses values with Go's ParseFloat, which reads NaN in any case (prom-client writes "Nan").
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (-?[\d.e+-]+|[Nn][Aa][Nn]|[+-]Inf)$/.exec(line);
    assert.ok(match, `not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    const name = match[1]!;
    assert.ok(
      [...typed].some((t) => name === t || name.startsWith(`${t}_`)),
      `${name} has no # TYPE`,
    );
    samples.push({ name, labels, value: Number(match[3]) });
  }
  return samples;
}

const sampleValue = (samples: Sample[], name: string, labels: Record<string, string>) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

describe('delivery log: list, detail, redelivery, recovery, health, retention, alerts and metrics', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  let api: LocalServer;
  let alertReceiver: TestReceiver;
  let taskQueue: string;
  let log: ReturnType<typeof captureLogger>;
  const appDeps = {} as AppDeps;

  before(async () => {
    Object.assign(appDeps, {
      db: fx.database.db,
      secretBox: fx.registrations.secretBox,
      logger: captureLogger().logger,
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.reject(new Error('not used here')),
      // Each test's worker polls its own queue: redeliveries go there.
      redelivery: (row, delayMs) =>
        createRedeliveryStarter(fx.env.client, {
          TEMPORAL_TASK_QUEUE: taskQueue,
          NODE_ENV: 'development',
          ALLOW_UNENCRYPTED_EVENTS: false,
        })(row, delayMs),
      recoverRatePerSecond: 10,
    } satisfies AppDeps);
    api = await listenLocal(createApp(appDeps).callback());
  });
  after(() => api?.close());
  beforeEach(async () => {
    taskQueue = uniqueTaskQueue('log');
    log = captureLogger();
    alertReceiver = await startTestReceiver();
    appDeps.metricsToken = undefined;
  });
  afterEach(() => alertReceiver.close());

  /** A real worker with the real activities on this test's queue, alerts going to the alert receiver. */
  async function withWorker<T>(work: () => Promise<T>, config = givingUp, alertAfterMs = 600_000): Promise<T> {
    const http = createWebhookHttpClient({
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: config.ALLOW_PRIVATE_WEBHOOK_URLS,
    });
    const worker = await Worker.create({
      connection: fx.env.nativeConnection,
      dataConverter: { payloadCodecs: [decodeOnlyPayloadCodec] },
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: createActivities({
        db: fx.database.db,
        secretBox: fx.registrations.secretBox,
        logger: log.logger,
        // The log's own rules are under test: the circuit breaker (test/breaker.test.ts) stays out of the way.
        config: { ...config, BREAKER_FAILURE_THRESHOLD: 10_000 },
        http,
        alerts: { alertAfterMs, webhook: { url: alertReceiver.url, secret: ALERT_SECRET } },
      }),
    });
    try {
      return await worker.runUntil(work());
    } finally {
      await http.close();
    }
  }

  /** Delivers one event and waits for its workflow to end (delivered, skipped or failed); returns its id. */
  async function deliver(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = `webhook-event-${randomUUID()}`;
    const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
      args: [input],
      taskQueue,
      workflowId,
    });
    await handle.result().catch(() => undefined);
    return workflowId;
  }

  async function call<T = Record<string, unknown>>(
    method: string,
    path: string,
    options: { user?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...(options.user && bearer(hsToken(options.user))), ...options.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const response = await fetch(api.url + path, { method, headers, body });
    const text = await response.text();
    const contentType = response.headers.get('content-type') ?? '';
    return {
      status: response.status,
      body: (/json/.test(contentType) ? JSON.parse(text) : {}) as T,
      text,
      contentType,
    };
  }

  async function project(...members: string[]): Promise<string> {
    const id = newProjectId();
    await store.addProject(fx.database.db, id);
    for (const member of members) await store.addMember(fx.database.db, id, member);
    return id;
  }

  const list = (projectId: string, query = '', user = 'alice') =>
    call<{ items: Item[]; nextCursor: string | null; detail?: string }>(
      'GET',
      `/webhooks/project/${projectId}/deliveries${query}`,
      {
        user,
      },
    );
  const detail = (projectId: string, id: string, user = 'alice') =>
    call<Item & { detail?: string }>('GET', `/webhooks/project/${projectId}/deliveries/${encodeURIComponent(id)}`, {
      user,
    });

  it('logs a delivered, a failed-then-delivered, a given-up and a skipped event; never a payload', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const q = await project('alice');
    const [delivered, retried, gaveUp, skipped] = await withWorker(async () => {
      const first = await deliver(fallEvent(p));
      fx.receiver.script({ status: 500 });
      const second = await deliver(fallEvent(p));
      fx.receiver.fallback = { status: 500 };
      const third = await deliver(fallEvent(p));
      // q has no webhook: the event is skipped.
      const fourth = await deliver(fallEvent(q));
      return [first, second, third, fourth];
    });

    const page = await list(p);
    assert.equal(page.status, 200);
    assert.deepEqual(
      page.body.items.map((item) => [item.id, item.status]),
      [
        [gaveUp, 'failed'],
        [retried, 'delivered'],
        [delivered, 'delivered'],
      ],
    );
    assert.equal(page.body.nextCursor, null);
    for (const item of page.body.items)
      assert.deepEqual(Object.keys(item).sort(), [
        'attempts',
        'createdAt',
        'id',
        'lastAttemptAt',
        'lastError',
        'lastStatusCode',
        'status',
        'type',
        'updatedAt',
      ]);
    // Each item's last attempt time is its attempt log's last, in the list as in the detail (not updatedAt, which
    // giving up moved later).
    for (const item of page.body.items) {
      const { body } = await detail(p, item.id);
      assert.equal(item.lastAttemptAt, body.attemptLog!.at(-1)!.at, item.id);
      assert.equal(body.lastAttemptAt, item.lastAttemptAt);
    }
    assert.ok(!/Ada|Lovelace|example\.com|userUUID/.test(page.text), 'the log shows no personal data');

    const first = await detail(p, delivered);
    assert.equal(first.body.attempts, 1);
    assert.equal(first.body.lastStatusCode, 200);
    assert.equal(first.body.lastError, null);
    assert.deepEqual(
      first.body.attemptLog!.map((a) => [a.attempt, a.statusCode]),
      [[1, 200]],
    );

    const second = await detail(p, retried);
    assert.equal(second.body.status, 'delivered');
    assert.equal(second.body.attempts, 2);
    assert.deepEqual(
      second.body.attemptLog!.map((a) => [a.attempt, a.statusCode]),
      [
        [1, 500],
        [2, 200],
      ],
    );
    assert.ok(second.body.attemptLog!.every((a) => a.durationMs >= 0 && !Number.isNaN(Date.parse(a.at))));

    const third = await detail(p, gaveUp);
    assert.equal(third.body.status, 'failed');
    assert.equal(third.body.type, 'FALL_DETECTION');
    assert.ok(third.body.attempts >= 2, `attempts: ${third.body.attempts}`);
    assert.equal(third.body.attemptLog!.length, third.body.attempts);
    assert.equal(third.body.lastStatusCode, 500);
    assert.equal(third.body.lastError, 'Receiver answered HTTP 500');

    const skippedPage = await list(q);
    assert.deepEqual(
      skippedPage.body.items.map((item) => [item.id, item.status, item.attempts, item.lastError, item.lastAttemptAt]),
      [[skipped, 'skipped', 0, 'No webhook is registered for the project', null]],
    );

    const health = await call('GET', `/webhooks/project/${p}/health`, { user: 'alice' });
    assert.equal(health.status, 200);
    assert.equal(health.body.state, 'failing');
    assert.equal(health.body.consecutiveFailures, third.body.attempts);
    assert.equal(health.body.lastError, 'Receiver answered HTTP 500');
    assert.ok(Date.parse(String(health.body.lastSuccessAt)) <= Date.parse(String(health.body.lastFailureAt)));
    const unknown = await call('GET', `/webhooks/project/${q}/health`, { user: 'alice' });
    assert.deepEqual(unknown.body, {
      state: 'unknown',
      consecutiveFailures: 0,
      lastSuccessAt: null,
      lastFailureAt: null,
      lastError: null,
      breaker: { state: 'closed', openUntil: null },
      clientCertificate: null,
    });
  });

  it('health shows the registration’s circuit breaker: closed, open until its period ends, half-open, closed again', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const registrationId = (await store.findRegistration(fx.database.db, p))!.id;
    const breaker = async () =>
      (await call<{ breaker: unknown }>('GET', `/webhooks/project/${p}/health`, { user: 'alice' })).body.breaker;
    assert.deepEqual(await breaker(), { state: 'closed', openUntil: null });

    // Driven as the worker's attempts drive it, at a threshold of two failures. An open period of 0 ms is over at
    // once: the breaker opens and is half-open (the next attempt may probe).
    const failure = { message: 'Receiver answered HTTP 503', statusCode: 503 };
    const fail = (openMs: number) =>
      store.recordFailure(fx.database.db, registrationId, { failureThreshold: 2, openMs, maxOpenMs: openMs }, failure);
    await fail(0);
    assert.deepEqual(await breaker(), { state: 'closed', openUntil: null }, 'one failure, below the threshold');
    await fail(0);
    assert.deepEqual(await breaker(), { state: 'half-open', openUntil: null });
    // The probe fails: open for a minute.
    const reopened = await fail(60_000);
    assert.ok(reopened.openUntil && reopened.openUntil.getTime() > Date.now() + 50_000);
    assert.deepEqual(await breaker(), { state: 'open', openUntil: reopened.openUntil.toISOString() });
    await store.recordSuccess(fx.database.db, registrationId);
    assert.deepEqual(await breaker(), { state: 'closed', openUntil: null });
  });

  it('logs an event of a type the webhook does not subscribe to as skipped, with the spec text', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['VITAL_THRESHOLD']);
    const id = await withWorker(() => deliver(fallEvent(p)));
    assert.equal(fx.receiver.requests.length, 0);
    const page = await list(p);
    assert.deepEqual(
      page.body.items.map((item) => [item.id, item.status, item.attempts, item.lastError]),
      [[id, 'skipped', 0, `Project ${p} has not registered a webhook for event: FALL_DETECTION`]],
    );
  });

  it('logs a pending event as skipped when the webhook stops subscribing to its type before the next attempt', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 503 };
    // The retry waits 2 s: time to change the types after the first attempt, before the second.
    const slowRetry = { ...givingUp, DELIVERY_INITIAL_INTERVAL_MS: 2_000, DELIVERY_GIVE_UP_AFTER_MS: 30_000 };
    const id = await withWorker(async () => {
      const delivered = deliver(fallEvent(p));
      await fx.receiver.waitForRequests(1);
      assert.equal((await list(p)).body.items[0]?.status, 'pending');
      await store.updateRegistration(fx.database.db, p, { types: ['VITAL_THRESHOLD'] });
      return delivered;
    }, slowRetry);
    assert.equal(fx.receiver.requests.length, 1, 'no attempt after the type was unsubscribed');
    const page = await list(p);
    assert.deepEqual(
      page.body.items.map((item) => [item.id, item.status, item.attempts, item.lastError]),
      [[id, 'skipped', 1, `Project ${p} has not registered a webhook for event: FALL_DETECTION`]],
    );
    const { status } = await fx.env.client.workflow.getHandle(id).describe();
    assert.equal(status.name, 'FAILED');
  });

  /** Log rows written directly, `minutesAgo` apart, for the pure query tests. */
  async function seed(projectId: string, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const id = `webhook-event-${projectId}-${String(i).padStart(2, '0')}`;
      const type = i % 2 === 0 ? 'FALL_DETECTION' : 'VITAL_THRESHOLD';
      await store.upsertDelivery(
        fx.database.db,
        { id, projectId, type, workflowId: id },
        i % 3 === 0 ? 'failed' : 'delivered',
      );
      await fx.database
        .db('deliveries')
        .where({ id })
        .update({ created_at: new Date(Date.UTC(2026, 0, 1, 0, i)) });
      ids.push(id);
    }
    return ids.reverse();
  }

  it('pages newest first with an opaque cursor, and filters by status, type and time', async () => {
    const p = await project('alice');
    const newestFirst = await seed(p, 25);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const reply: Reply<{ items: Item[]; nextCursor: string | null }> = await list(
        p,
        `?limit=10${cursor ? `&cursor=${cursor}` : ''}`,
      );
      assert.equal(reply.status, 200);
      seen.push(...reply.body.items.map((item) => item.id));
      cursor = reply.body.nextCursor;
      pages += 1;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, newestFirst);
    assert.equal((await list(p)).body.items.length, 20, 'the default page holds 20');

    const failed = await list(p, '?status=failed&limit=100');
    assert.deepEqual(
      failed.body.items.map((item) => item.id),
      newestFirst.filter((id) => Number(id.slice(-2)) % 3 === 0),
    );
    const vital = await list(p, '?type=VITAL_THRESHOLD&status=delivered&limit=100');
    assert.ok(vital.body.items.length > 0);
    assert.ok(vital.body.items.every((item) => item.type === 'VITAL_THRESHOLD' && item.status === 'delivered'));
    const window = await list(p, '?since=2026-01-01T00:05:00Z&until=2026-01-01T00:08:00Z');
    assert.deepEqual(
      window.body.items.map((item) => item.id.slice(-2)),
      ['07', '06', '05'],
    );

    for (const [query, problem] of [
      ['?limit=0', 'limit must be an integer from 1 to 100'],
      ['?limit=101', 'limit must be an integer from 1 to 100'],
      ['?status=lost', 'status must be one of pending, held, delivered, failed, skipped'],
      ['?type=FALL', 'type must be one of FALL_DETECTION, VITAL_THRESHOLD, TEST'],
      ['?since=yesterday', 'since must be an ISO 8601 date-time with a time zone, such as 2026-01-01T00:00:00Z'],
      ['?cursor=bm90LWEtY3Vyc29y', 'cursor is not one this API returned'],
    ] as const) {
      const reply = await list(p, query);
      assert.equal(reply.status, 400, query);
      assert.match(reply.contentType, /^application\/problem\+json/);
      assert.equal(reply.body.detail, `The query is invalid: ${problem}`);
    }
  });

  it('pages without skipping or repeating deliveries created in the same millisecond or microsecond', async () => {
    const p = await project('alice');
    // Microseconds as PostgreSQL keeps them: a JS Date (milliseconds) cannot tell most of these apart.
    const times = [
      '2026-01-01T00:00:00.123999Z',
      '2026-01-01T00:00:00.123500Z',
      '2026-01-01T00:00:00.123500Z',
      '2026-01-01T00:00:00.123500Z',
      '2026-01-01T00:00:00.123001Z',
      '2026-01-01T00:00:00.123000Z',
      '2026-01-01T00:00:00.123000Z',
      '2026-01-01T00:00:00.122999Z',
    ];
    const newestFirst: string[] = [];
    for (const [i, time] of times.entries()) {
      // Ids descend with the time, so each id is where the (created_at, id) order puts it.
      const id = `same-ms-${p}-${String(9 - i)}`;
      await store.upsertDelivery(
        fx.database.db,
        { id, projectId: p, type: 'FALL_DETECTION', workflowId: id },
        'failed',
      );
      await fx.database
        .db('deliveries')
        .where({ id })
        .update({ created_at: fx.database.db.raw('?::timestamptz', [time]) });
      newestFirst.push(id);
    }
    for (const limit of [1, 2, 3]) {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const reply: Reply<{ items: Item[]; nextCursor: string | null }> = await list(
          p,
          `?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`,
        );
        assert.equal(reply.status, 200);
        seen.push(...reply.body.items.map((item) => item.id));
        cursor = reply.body.nextCursor;
      } while (cursor && seen.length <= times.length);
      assert.deepEqual(seen, newestFirst, `pages of ${limit}`);
    }
  });

  it('an SSRF refusal is logged and shown as the category of address, never the address it resolved to', async () => {
    const p = await project('alice');
    // A name, not a literal: the resolved address (127.0.0.1 or ::1) appears only if the refusal leaks it.
    await fx.registrations.register(p, `http://localhost:${fx.receiver.port}/hook`, ['FALL_DETECTION']);
    const id = await withWorker(() => deliver(fallEvent(p)), { ...givingUp, ALLOW_PRIVATE_WEBHOOK_URLS: false });
    assert.equal(fx.receiver.requests.length, 0, 'nothing was sent');

    const refusal =
      'Refused to deliver: the webhook URL leads to a loopback address, which webhook receivers may not use ' +
      '(set ALLOW_PRIVATE_WEBHOOK_URLS=true for local development)';
    const logged = await detail(p, id);
    assert.equal(logged.body.status, 'failed');
    assert.equal(logged.body.lastError, refusal);
    assert.deepEqual(
      logged.body.attemptLog!.map((a) => a.errorCode),
      ['ERR_WEBHOOK_TARGET_FORBIDDEN'],
    );
    const health = await call('GET', `/webhooks/project/${p}/health`, { user: 'alice' });
    assert.equal(health.body.state, 'failing');
    assert.equal(health.body.lastError, refusal);
    const stored = JSON.stringify([
      await fx.database.db('deliveries').where({ project_id: p }),
      await fx.database.db('delivery_attempts').where({ delivery_id: id }),
      await fx.database.db('endpoint_health').where({ project_id: p }),
    ]);
    for (const text of [logged.text, health.text, (await list(p)).text, stored])
      assert.doesNotMatch(text, /127\.0\.0\.1|::1\b|::ffff/, text);
  });

  it('BOLA: a member of another project gets 403 on every route and never sees another project’s ids', async () => {
    const a = await project('alice');
    const b = await project('bob');
    const [aId] = await seed(a, 2);
    const routes: [string, string, unknown?][] = [
      ['GET', `/webhooks/project/${a}/deliveries`],
      ['GET', `/webhooks/project/${a}/deliveries/${aId}`],
      ['POST', `/webhooks/project/${a}/deliveries/${aId}/redeliver`],
      ['POST', `/webhooks/project/${a}/deliveries/recover`, { since: '2026-01-01T00:00:00Z' }],
      ['GET', `/webhooks/project/${a}/health`],
    ];
    for (const [method, path, body] of routes) {
      const forbidden = await call(method, path, { user: 'bob', body });
      assert.equal(forbidden.status, 403, `${method} ${path}`);
      assert.equal(forbidden.body.detail, 'The caller is not a member of this project');
      assert.ok(!forbidden.text.includes(aId!), 'a 403 names no delivery');
      const unknown = await call(method, path.replace(a, 'no-such-project'), { user: 'bob', body });
      assert.equal(unknown.status, 404, `${method} ${path}`);
      assert.equal(unknown.body.detail, 'No project with id no-such-project was found');
      assert.equal((await call(method, path, { body })).status, 401);
    }
    // Through bob's own project, alice's delivery does not exist.
    const viaB = await detail(b, aId!, 'bob');
    assert.equal(viaB.status, 404);
    assert.equal(viaB.body.detail, `No delivery with id ${aId} was found`);
    const redeliverViaB = await call('POST', `/webhooks/project/${b}/deliveries/${aId}/redeliver`, { user: 'bob' });
    assert.equal(redeliverViaB.status, 404);
    assert.equal(redeliverViaB.body.detail, `No delivery with id ${aId} was found`);
    const recoverViaB = await call('POST', `/webhooks/project/${b}/deliveries/recover`, {
      user: 'bob',
      body: { since: '2020-01-01T00:00:00Z' },
    });
    assert.deepEqual(recoverViaB.body, { count: 0 });
    assert.deepEqual((await list(b, '', 'bob')).body.items, []);
    assert.equal((await store.findDelivery(fx.database.db, a, aId!))?.status, 'delivered', 'untouched');
  });

  it('redelivers with the same X-Webhook-Id and a valid fresh signature; 409 while pending or skipped', async () => {
    const p = await project('alice');
    const secret = await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const q = await project('alice');
    await withWorker(async () => {
      const id = await deliver(fallEvent(p));
      const skipped = await deliver(fallEvent(q));
      // The receiver holds the redelivery's answer, so it is still pending for the second request.
      fx.receiver.script({ status: 200, delayMs: 600 });
      const started = await call('POST', `/webhooks/project/${p}/deliveries/${id}/redeliver`, { user: 'alice' });
      assert.equal(started.status, 202);
      assert.equal(started.body.redeliveryOf, id);
      assert.match(String(started.body.id), /^webhook-redelivery-/);
      const again = await call('POST', `/webhooks/project/${p}/deliveries/${id}/redeliver`, { user: 'alice' });
      assert.equal(again.status, 409);
      assert.match(String(again.body.detail), new RegExp(`^Delivery ${id} is pending`));
      await fx.env.client.workflow.getHandle(String(started.body.id)).result();

      const [original, redelivery] = fx.receiver.requests;
      assert.equal(fx.receiver.requests.length, 2);
      assert.equal(redelivery!.headers['x-webhook-id'], id);
      assert.equal(original!.headers['x-webhook-id'], id);
      assert.deepEqual(redelivery!.rawBody, original!.rawBody);
      assert.ok(independentSignatureValid(secret, redelivery!), 'the redelivery is signed with the current secret');
      assert.ok(Number(redelivery!.headers['x-timestamp']) >= Number(original!.headers['x-timestamp']));

      const logged = await detail(p, id);
      assert.equal(logged.body.status, 'delivered');
      assert.equal(logged.body.attempts, 2);
      assert.equal(logged.body.attemptLog!.length, 2);

      const notSent = await call('POST', `/webhooks/project/${q}/deliveries/${skipped}/redeliver`, { user: 'alice' });
      assert.equal(notSent.status, 409);
      assert.match(String(notSent.body.detail), /was skipped/);
      const none = await call('POST', `/webhooks/project/${p}/deliveries/nope/redeliver`, { user: 'alice' });
      assert.equal(none.status, 404);
      assert.equal(none.body.detail, 'No delivery with id nope was found');
    }, fastConfig);
  });

  it('recover redelivers exactly the failed deliveries of the window, spaced by the rate', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    await withWorker(async () => {
      const delivered = await deliver(fallEvent(p));
      fx.receiver.fallback = { status: 500 };
      const [old, failedA, failedB] = await Promise.all([1, 2, 3].map(() => deliver(fallEvent(p))));
      const since = new Date();
      await fx.database
        .db('deliveries')
        .where({ id: old })
        .update({ created_at: new Date(Date.now() - 3_600_000) });
      // A failed delivery whose run Temporal no longer holds (past retention): skipped, the others still start.
      const gone = `webhook-event-gone-${randomUUID()}`;
      await store.upsertDelivery(
        fx.database.db,
        { id: gone, projectId: p, type: 'FALL_DETECTION', workflowId: gone },
        'failed',
      );
      await fx.database
        .db('deliveries')
        .whereIn('id', [failedA!, failedB!, gone])
        .update({ created_at: new Date(since.getTime() + 1_000) });
      fx.receiver.fallback = { status: 200 };
      const before = fx.receiver.requests.length;

      const bad = await call('POST', `/webhooks/project/${p}/deliveries/recover`, { user: 'alice', body: {} });
      assert.equal(bad.status, 400);
      const recovered = await call('POST', `/webhooks/project/${p}/deliveries/recover`, {
        user: 'alice',
        body: { since: since.toISOString() },
      });
      assert.equal(recovered.status, 202);
      assert.deepEqual(recovered.body, { count: 2 });

      const requests = (await fx.receiver.waitForRequests(before + 2)).slice(before);
      assert.deepEqual(requests.map((r) => r.headers['x-webhook-id']).sort(), [failedA, failedB].sort());
      // Recovery claimed them: a second recovery finds nothing left in the window (as an operator's: a member's
      // waits until the first one's redeliveries are due, test/test-endpoint-limits.test.ts).
      assert.deepEqual(await recoverAsOperator(appDeps, p, { since: since.toISOString() }), { count: 0 });
      // Spaced by 1/RECOVER_RATE_PER_SECOND (10/s here): Temporal holds the second run's start 100 ms longer.
      const runs = await listRedeliveries(p);
      assert.equal(runs.length, 2);
      const delays = await Promise.all(
        runs.map(async (id) => {
          const handle = fx.env.client.workflow.getHandle(id);
          await handle.result();
          const started = (await handle.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
          const backoff = started?.firstWorkflowTaskBackoff;
          return Number(backoff?.seconds ?? 0) * 1000 + Math.round((backoff?.nanos ?? 0) / 1e6);
        }),
      );
      assert.deepEqual(
        delays.sort((x, y) => x - y),
        [0, 100],
      );
      assert.equal((await store.findDelivery(fx.database.db, p, old!))?.status, 'failed');
      assert.equal((await store.findDelivery(fx.database.db, p, gone))?.status, 'failed', 'released, not lost');
      assert.equal((await store.findDelivery(fx.database.db, p, delivered))?.attempts, 1);
      for (const id of [failedA!, failedB!])
        assert.equal((await store.findDelivery(fx.database.db, p, id))?.status, 'delivered');
    });
  });

  it('startApi wires RECOVER_RATE_PER_SECOND: a recovery through the started API is spaced by it', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: fx.database.url,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: fx.registrations.key,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        RECOVER_RATE_PER_SECOND: '4',
      },
      { database: true, auth: true },
    );
    const started = await startApi(config, pino({ level: 'silent' }), {
      db: fx.database.db,
      temporal: fx.env.client,
      sendTestEvent: () => Promise.reject(new Error('not used here')),
    });
    try {
      await withWorker(async () => {
        fx.receiver.fallback = { status: 500 };
        await Promise.all([1, 2].map(() => deliver(fallEvent(p))));
        fx.receiver.fallback = { status: 200 };
        const before = fx.receiver.requests.length;
        const port = (started.server.address() as AddressInfo).port;
        const recovered = await fetch(`http://127.0.0.1:${port}/webhooks/project/${p}/deliveries/recover`, {
          method: 'POST',
          headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
          body: JSON.stringify({ since: '2000-01-01T00:00:00Z' }),
        });
        assert.equal(recovered.status, 202, await recovered.text());
        await fx.receiver.waitForRequests(before + 2);
        const delays = await Promise.all(
          (await listRedeliveries(p)).map(async (id) => {
            const handle = fx.env.client.workflow.getHandle(id);
            await handle.result();
            const backoff = (await handle.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes
              ?.firstWorkflowTaskBackoff;
            return Number(backoff?.seconds ?? 0) * 1000 + Math.round((backoff?.nanos ?? 0) / 1e6);
          }),
        );
        // 4 a second: the second start is held 250 ms (the code's fallback, 10 a second, would hold it 100 ms).
        assert.deepEqual(
          delays.sort((x, y) => x - y),
          [0, 250],
        );
      });
    } finally {
      await started.close();
    }
  });

  /** The redelivery workflows of a project, from the delivery rows' latest runs. */
  async function listRedeliveries(projectId: string): Promise<string[]> {
    const rows = await fx.database
      .db('deliveries')
      .where({ project_id: projectId })
      .select<{ workflow_id: string }[]>('workflow_id');
    return rows.map((r) => r.workflow_id).filter((id) => id.startsWith('webhook-redelivery-'));
  }

  it('purges log entries past DELIVERY_LOG_RETENTION_DAYS with their attempts, and keeps the rest', async () => {
    const p = await project('alice');
    const [fresh, old] = await seed(p, 2);
    const key = { id: old!, projectId: p, type: 'FALL_DETECTION', workflowId: old! };
    await store.recordDeliveryAttempt(fx.database.db, key, {
      runAttempt: 1,
      statusCode: 500,
      durationMs: 3,
      delivered: false,
    });
    await fx.database
      .db('deliveries')
      .where({ id: old })
      .update({ updated_at: new Date(Date.now() - 31 * 86_400_000) });
    const purgeLog = captureLogger();
    const stop = startDeliveryLogRetention(fx.database.db, 30, purgeLog.logger);
    try {
      // The first purge runs at start.
      for (let i = 0; i < 100 && (await store.findDelivery(fx.database.db, p, old!)); i += 1)
        await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      stop();
    }
    assert.equal(await store.findDelivery(fx.database.db, p, old!), undefined);
    assert.deepEqual(await store.listDeliveryAttempts(fx.database.db, old!), []);
    assert.ok(await store.findDelivery(fx.database.db, p, fresh!));
    assert.equal(await store.purgeDeliveries(fx.database.db, 30), 0);
  });

  it('raises one signed alert per failure episode; a delivery in between ends the episode', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    await withWorker(async () => {
      fx.receiver.fallback = { status: 500 };
      const first = await deliver(fallEvent(p));
      await deliver(fallEvent(p));
      // The alert's POST runs outside the attempt: it may land just after the delivery ends.
      await alertReceiver.waitForRequests(1);
      assert.equal(alertReceiver.requests.length, 1, 'two give-ups, one episode: one alert');
      const [alert] = alertReceiver.requests;
      assert.ok(independentSignatureValid(ALERT_SECRET, alert!), 'signed like a delivery');
      const body = JSON.parse(alert!.rawBody.toString('utf8')) as Record<string, unknown>;
      assert.equal(body.alert, 'delivery-gave-up');
      assert.equal(body.projectId, p);
      assert.equal(body.webhookType, 'FALL_DETECTION');
      assert.deepEqual(body.deliveryIds, [first]);
      assert.ok(Number(body.consecutiveFailures) >= 2);
      assert.ok(!/Ada|Lovelace|example\.com|3f2b8c1e/.test(alert!.rawBody.toString('utf8')), 'no personal data');
      const lines = log.lines.filter((l) => String(l.msg).startsWith('operator alert:'));
      assert.equal(lines.length, 1);
      assert.equal(lines[0]!.level, 50);

      fx.receiver.fallback = { status: 200 };
      await deliver(fallEvent(p));
      assert.equal((await call('GET', `/webhooks/project/${p}/health`, { user: 'alice' })).body.state, 'healthy');
      fx.receiver.fallback = { status: 500 };
      const third = await deliver(fallEvent(p));
      await alertReceiver.waitForRequests(2);
      assert.equal(alertReceiver.requests.length, 2, 'a new episode: a new alert');
      assert.deepEqual(
        (JSON.parse(alertReceiver.requests[1]!.rawBody.toString()) as { deliveryIds: string[] }).deliveryIds,
        [third],
      );
    });
  });

  it('alerts once when an endpoint has failed for ALERT_AFTER_MS, before the delivery gives up', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 500 };
    // Long enough a window for attempts after ALERT_AFTER_MS: the hand-over from the first attempt waits on a timer.
    await withWorker(() => deliver(fallEvent(p)), { ...givingUp, DELIVERY_GIVE_UP_AFTER_MS: 4_000 }, 1_000);
    await alertReceiver.waitForRequests(1);
    assert.equal(alertReceiver.requests.length, 1);
    const body = JSON.parse(alertReceiver.requests[0]!.rawBody.toString()) as Record<string, unknown>;
    assert.equal(body.alert, 'endpoint-failing');
    assert.ok(Date.parse(String(body.raisedAt)) - Date.parse(String(body.failingSince)) >= 1_000);
  });

  it('CLI: deliveries list, redeliver and recover, for operators', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const lines: string[] = [];
    const errors: string[] = [];
    const io = {
      env: {
        DATABASE_URL: fx.database.url,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        NODE_ENV: 'development',
      },
      out: (line: string) => void lines.push(line),
      err: (line: string) => void errors.push(line),
    };
    await withWorker(async () => {
      const delivered = await deliver(fallEvent(p));
      fx.receiver.fallback = { status: 500 };
      const failed = await deliver(fallEvent(p));
      fx.receiver.fallback = { status: 200 };

      assert.equal(await cli(['deliveries', 'list', p, '--status', 'failed'], io), 0, errors.join('\n'));
      assert.deepEqual(
        lines.map((line) => line.split('\t').slice(0, 3)),
        [[failed, 'failed', 'FALL_DETECTION']],
      );
      lines.length = 0;
      assert.equal(await cli(['deliveries', 'list', p, '--status', 'lost'], io), 2);
      assert.match(errors.join('\n'), /status must be one of pending, held, delivered, failed, skipped/);

      assert.equal(await cli(['deliveries', 'redeliver', p, delivered], io), 0, errors.join('\n'));
      const redelivery = lines.pop()!;
      assert.match(redelivery, /^webhook-redelivery-/);
      await fx.env.client.workflow.getHandle(redelivery).result();
      assert.equal(fx.receiver.requests.at(-1)!.headers['x-webhook-id'], delivered);
      assert.equal(await cli(['deliveries', 'redeliver', p, 'nope'], io), 1);
      assert.match(errors.at(-1)!, /No delivery with id nope was found/);

      assert.equal(await cli(['deliveries', 'recover', p], io), 2, 'without --since');
      const before = fx.receiver.requests.length;
      assert.equal(await cli(['deliveries', 'recover', p, '--since', '2000-01-01T00:00:00Z'], io), 0);
      assert.equal(lines.pop(), `1 failed deliveries of project ${p} redelivering`);
      const [again] = (await fx.receiver.waitForRequests(before + 1)).slice(before);
      assert.equal(again!.headers['x-webhook-id'], failed);

      // Each command that acted left one row, as the OS user; the refusals (unknown id, no --since) none.
      const trail = (await store.listAuditEvents(fx.database.db, { projectId: p, limit: 10 })).reverse();
      assert.deepEqual(
        trail.map((row) => [row.action, row.actor.kind, row.actor.subject, row.deliveryId, row.changes]),
        [
          ['delivery.redeliver', 'cli', userInfo().username, delivered, undefined],
          ['deliveries.recover', 'cli', userInfo().username, undefined, { since: '2000-01-01T00:00:00Z', count: 1 }],
        ],
      );
    });
  });

  it('config: ALERT_WEBHOOK_URL needs ALERT_WEBHOOK_SECRET; defaults for retention, alerts and recovery', () => {
    const config = loadConfig({});
    assert.equal(config.DELIVERY_LOG_RETENTION_DAYS, 30);
    assert.equal(config.ALERT_AFTER_MS, 900_000);
    assert.equal(config.RECOVER_RATE_PER_SECOND, 10);
    assert.equal(config.WORKER_METRICS_PORT, undefined);
    assert.throws(
      () => loadConfig({ ALERT_WEBHOOK_URL: 'https://alerts.example/hook' }),
      /ALERT_WEBHOOK_SECRET is required with ALERT_WEBHOOK_URL/,
    );
    assert.throws(() => loadConfig({ DELIVERY_LOG_RETENTION_DAYS: '0' }), /DELIVERY_LOG_RETENTION_DAYS/);
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN/);
  });

  it('/metrics: Prometheus text with request counts by route and status and delivery counters; METRICS_TOKEN', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const route = { method: 'GET', route: '/webhooks/project/:projectId/deliveries', status: '200' };
    const delivered = { type: 'FALL_DETECTION', outcome: 'delivered' };
    const scrape = async () => {
      const reply = await call('GET', '/metrics');
      assert.equal(reply.status, 200);
      assert.match(reply.contentType, /^text\/plain/);
      return parsePrometheus(reply.text);
    };
    const before = await scrape();
    await list(p);
    await list(p);
    await withWorker(() => deliver(fallEvent(p)));
    const after = await scrape();
    assert.equal(
      sampleValue(after, 'http_requests_total', route) - sampleValue(before, 'http_requests_total', route),
      2,
    );
    assert.equal(
      sampleValue(after, 'http_request_duration_seconds_count', route) -
        sampleValue(before, 'http_request_duration_seconds_count', route),
      2,
    );
    assert.equal(
      sampleValue(after, 'webhook_deliveries_total', delivered) -
        sampleValue(before, 'webhook_deliveries_total', delivered),
      1,
    );
    assert.equal(
      sampleValue(after, 'webhook_delivery_latency_seconds_count', { type: 'FALL_DETECTION' }) -
        sampleValue(before, 'webhook_delivery_latency_seconds_count', { type: 'FALL_DETECTION' }),
      1,
    );
    assert.ok(!after.some((s) => s.labels.route?.includes(p)), 'routes are templates, never raw paths');

    appDeps.metricsToken = 'metrics-token-0123456789';
    const refused = await call('GET', '/metrics');
    assert.equal(refused.status, 401);
    assert.match(refused.contentType, /^application\/problem\+json/);
    assert.equal(
      (await call('GET', '/metrics', { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status,
      401,
    );
    const allowed = await call('GET', '/metrics', { headers: { authorization: 'Bearer metrics-token-0123456789' } });
    assert.equal(allowed.status, 200);
    assert.ok(parsePrometheus(allowed.text).length > 0);
  });
});

describe('delivery log with Temporal down: redeliver and recover answer 503 with Retry-After', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(() => t?.destroy());

  it('a real API whose Temporal address is a closed port starts nothing, says so, and leaves the deliveries failed', async () => {
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: t.url,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
        TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
        TEMPORAL_CONNECT_TIMEOUT_MS: '1000',
      },
      { database: true, auth: true },
    );
    const api = await startApi(config, pino({ level: 'silent' }));
    try {
      const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
      const p = newProjectId();
      await store.addProject(t.db, p);
      await store.addMember(t.db, p, 'alice');
      const key = { id: `evt-${randomUUID()}`, projectId: p, type: 'FALL_DETECTION', workflowId: 'webhook-event-x' };
      await store.upsertDelivery(t.db, key, 'failed', 'Receiver answered HTTP 500');
      const post = (path: string, body?: unknown) =>
        fetch(`${base}/webhooks/project/${p}${path}`, {
          method: 'POST',
          headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      for (const reply of [
        await post('/deliveries/recover', { since: '2000-01-01T00:00:00Z' }),
        await post(`/deliveries/${key.id}/redeliver`),
      ]) {
        assert.equal(reply.status, 503, reply.url);
        assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.equal(reply.headers.get('retry-after'), '5');
        assert.equal(
          ((await reply.json()) as { detail: string }).detail,
          'Temporal is not answering; try again in 5 seconds',
        );
        assert.equal((await store.findDelivery(t.db, p, key.id))?.status, 'failed', 'the claim was released');
      }
    } finally {
      await api.close();
    }
  });
});

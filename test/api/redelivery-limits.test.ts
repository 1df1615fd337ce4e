import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import { createApp } from '../../api/app';
import { DEFAULT_REDELIVERY_LIMITS } from '../../api/http/send-limits';
import { loadConfig } from '../../common/config';
import type { TestDeliveryOutcome } from '../../api/webhooks/test-event';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

/**
 * The limits of the redeliver and recover routes on the real database and HTTP; Temporal is replaced at its edge
 * (the starter records what it would start, the watcher ends a TEST redelivery when the test says), so the limits
 * are under the test's control. test/api/limits-processes.test.ts runs them against real Temporal and two API processes.
 */
describe('redelivery limits: TEST redeliveries under the test limits, redeliver and recover rates per project', () => {
  let t: TestDatabase;
  let api: LocalServer;
  const secretBox = createSecretBox(randomBytes(32));
  /** The limits' clock: frozen, and moved by the tests (each test has a project of its own). */
  let now: Date;
  const advance = (ms: number) => (now = new Date(now.getTime() + ms));
  let started: { id: string; delayMs: number; workflowId: string }[] = [];
  /** When set, Temporal stops answering after this many starts (gRPC UNAVAILABLE, as the client reports it). */
  let temporalAnswers: number | undefined;
  /** The TEST redeliveries being watched, by workflow id: calling one ends its attempt. */
  const watched = new Map<string, () => void>();
  let tests = 0;

  before(async () => {
    t = await createTestDatabase();
    const app = createApp({
      db: t.db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => {
        tests += 1;
        return Promise.resolve<TestDeliveryOutcome>({
          delivered: true,
          statusCode: 200,
          durationMs: 1,
          workflowId: 'w',
        });
      },
      testEventLimits: { perMinute: 3, waitMs: 15_000 },
      redeliveryLimits: { redeliverPerMinute: 3, recoverPerMinute: 2 },
      recoverRatePerSecond: 10,
      limitsClock: () => now,
      redelivery: (row, delayMs) => {
        if (temporalAnswers !== undefined && started.length >= temporalAnswers)
          return Promise.reject(
            Object.assign(new Error('14 UNAVAILABLE: No connection established'), {
              code: 14,
              details: 'No connection established',
              metadata: {},
            }),
          );
        const workflowId = `webhook-redelivery-${randomUUID()}`;
        started.push({ id: row.id, delayMs, workflowId });
        return Promise.resolve(workflowId);
      },
      watchWorkflowEnd: (workflowId) => new Promise((resolve) => watched.set(workflowId, resolve)),
    });
    api = await listenLocal(app.callback());
  });
  after(async () => {
    await api?.close();
    await t?.destroy();
  });
  beforeEach(() => {
    now = new Date();
    started = [];
    temporalAnswers = undefined;
    tests = 0;
  });
  afterEach(() => {
    for (const end of watched.values()) end();
    watched.clear();
  });

  async function project(): Promise<string> {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    await store.createRegistration(t.db, secretBox, {
      projectId,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    return projectId;
  }

  /** A logged delivery in `status` (redeliver and recover take delivered and failed ones). */
  async function delivery(projectId: string, type: string, status: store.DeliveryStatus): Promise<string> {
    const id = `webhook-event-${randomUUID()}`;
    await store.upsertDelivery(t.db, { id, projectId, type, workflowId: id }, status);
    return id;
  }

  const post = (path: string, body?: unknown) =>
    fetch(`${api.url}${path}`, {
      method: 'POST',
      headers: { ...bearer(hsToken('alice')), ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const redeliver = (p: string, id: string) => post(`/webhooks/project/${p}/deliveries/${id}/redeliver`);
  const recover = (p: string) => post(`/webhooks/project/${p}/deliveries/recover`, { since: '2000-01-01T00:00:00Z' });

  async function assertLimited(reply: Response, retryAfter: string, detail: string): Promise<void> {
    assert.equal(reply.status, 429, await reply.clone().text());
    assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    assert.equal(reply.headers.get('retry-after'), retryAfter);
    const problem = (await reply.json()) as { status: number; title: string; detail: string };
    assert.deepEqual([problem.status, problem.title, problem.detail], [429, 'Too Many Requests', detail]);
  }

  const testInFlight = (p: string) => `A test event for project ${p} is already in flight: one at a time per project`;
  const testsPerMinute = (p: string) => `At most 3 test events a minute per project: project ${p} reached the limit`;

  /** The delivery as the redelivery's end leaves it, and the watcher told: the attempt has ended. */
  async function endRedelivery(p: string, id: string): Promise<void> {
    const run = started.find((s) => s.id === id && watched.has(s.workflowId));
    assert.ok(run, `a watched redelivery of ${id}`);
    await store.upsertDelivery(t.db, { id, projectId: p, type: 'TEST', workflowId: run.workflowId }, 'delivered');
    watched.get(run.workflowId)?.();
    watched.delete(run.workflowId);
    // The release runs after the watcher resolves: wait until the slot is free in the database.
    while ((await t.db('webhook_send_limits').where({ project_id: p, kind: 'test' }).first())?.lease_holder)
      await new Promise((resolve) => setTimeout(resolve, 5));
  }

  it('25 redelivers of a TEST delivery in a row: TEST_EVENTS_PER_MINUTE are started, then 429', async () => {
    const p = await project();
    const id = await delivery(p, 'TEST', 'delivered');
    const statuses: number[] = [];
    for (let i = 0; i < 25; i += 1) {
      const reply = await redeliver(p, id);
      statuses.push(reply.status);
      if (reply.status === 202) await endRedelivery(p, id);
      else await assertLimited(reply, '60', testsPerMinute(p));
    }
    assert.deepEqual(statuses, [...Array<number>(3).fill(202), ...Array<number>(22).fill(429)]);
    assert.equal(started.length, 3);
    // The test endpoint shares the budget.
    await assertLimited(await post(`/webhooks/test/project/${p}`), '60', testsPerMinute(p));
    assert.equal(tests, 0);
  });

  it('a TEST redelivery holds the TEST slot until its attempt ends; the test endpoint waits for it too', async () => {
    const p = await project();
    const [a, b] = [await delivery(p, 'TEST', 'delivered'), await delivery(p, 'TEST', 'failed')];
    assert.equal((await redeliver(p, a)).status, 202);
    await assertLimited(await redeliver(p, b), '16', testInFlight(p));
    await assertLimited(await post(`/webhooks/test/project/${p}`), '16', testInFlight(p));
    await endRedelivery(p, a);
    // A redelivery that cannot start (pending: 409) frees the slot at once; it counts in the minute.
    const pending = await delivery(p, 'TEST', 'pending');
    assert.equal((await redeliver(p, pending)).status, 409);
    assert.equal((await redeliver(p, b)).status, 202);
    await endRedelivery(p, b);
    await assertLimited(await post(`/webhooks/test/project/${p}`), '60', testsPerMinute(p));
    assert.equal(tests, 0);
  });

  it('a TEST redelivery whose end is never seen frees the slot when its lease ends', async () => {
    const p = await project();
    const [a, b] = [await delivery(p, 'TEST', 'delivered'), await delivery(p, 'TEST', 'delivered')];
    assert.equal((await redeliver(p, a)).status, 202);
    advance(15_999);
    await assertLimited(await redeliver(p, b), '1', testInFlight(p));
    advance(1);
    assert.equal((await redeliver(p, b)).status, 202);
  });

  it('redeliver calls: REDELIVER_CALLS_PER_MINUTE per project in a sliding minute, then 429', async () => {
    const p = await project();
    const ids = [];
    for (let i = 0; i < 5; i += 1) ids.push(await delivery(p, 'FALL_DETECTION', 'failed'));
    for (const id of ids.slice(0, 3)) assert.equal((await redeliver(p, id)).status, 202);
    const perMinute = `At most 3 redeliveries a minute per project: project ${p} reached the limit`;
    await assertLimited(await redeliver(p, ids[3]!), '60', perMinute);
    advance(59_999);
    await assertLimited(await redeliver(p, ids[3]!), '1', perMinute);
    advance(1);
    assert.equal((await redeliver(p, ids[3]!)).status, 202);
    // Another project has its own budget; the 404 of an unknown delivery is not counted.
    const other = await project();
    assert.equal((await redeliver(other, 'webhook-event-none')).status, 404);
    for (let i = 0; i < 3; i += 1)
      assert.equal((await redeliver(other, await delivery(other, 'FALL_DETECTION', 'delivered'))).status, 202);
    assert.deepEqual(
      started.slice(0, 4).map((s) => s.id),
      ids.slice(0, 4),
    );
    assert.equal(started.length, 7);
  });

  it('concurrent recover calls: one runs, the others get 429 until its last redelivery is due', async () => {
    const p = await project();
    for (let i = 0; i < 5; i += 1) await delivery(p, 'FALL_DETECTION', 'failed');
    const failedTest = await delivery(p, 'TEST', 'failed');
    const replies = await Promise.all(Array.from({ length: 6 }, () => recover(p)));
    const accepted = replies.filter((r) => r.status === 202);
    assert.equal(accepted.length, 1, `statuses ${replies.map((r) => r.status).join(', ')}`);
    assert.deepEqual(await accepted[0]!.json(), { count: 5 });
    // Spaced to RECOVER_RATE_PER_SECOND (10/s) from one schedule; the failed TEST delivery is left out.
    assert.deepEqual(
      started.map((s) => s.delayMs),
      [0, 100, 200, 300, 400],
    );
    assert.ok(!started.some((s) => s.id === failedTest));
    const running = `A recovery of project ${p} is still starting its redeliveries: one at a time per project`;
    // Refused while it starts them (its call's lease, 300 s) or once it has (until they are due: 1 s).
    for (const reply of replies.filter((r) => r.status !== 202))
      await assertLimited(reply, reply.headers.get('retry-after') === '1' ? '1' : '300', running);

    // Its slot is held until its five redeliveries are due (500 ms), then the next recovery may start.
    for (let i = 0; i < 2; i += 1) await delivery(p, 'FALL_DETECTION', 'failed');
    advance(499);
    await assertLimited(await recover(p), '1', running);
    advance(1);
    const next = await recover(p);
    assert.equal(next.status, 202);
    assert.deepEqual(await next.json(), { count: 2 });
    advance(200);
    // RECOVER_CALLS_PER_MINUTE (2): the third call within the minute.
    await assertLimited(
      await recover(p),
      '60',
      `At most 2 recover calls a minute per project: project ${p} reached the limit`,
    );
  });

  it('Temporal stopping part-way: 503 with the count started, which stay started; the rest stay failed', async () => {
    const p = await project();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) ids.push(await delivery(p, 'FALL_DETECTION', 'failed'));
    temporalAnswers = 2;
    const reply = await recover(p);
    assert.equal(reply.status, 503);
    assert.equal(reply.headers.get('retry-after'), '5');
    const problem = (await reply.json()) as { detail: string; count: number };
    assert.deepEqual(problem, {
      ...problem,
      count: 2,
      detail:
        "Temporal stopped answering after 2 of the recovery's redeliveries were started; " +
        'recover again in 5 seconds to start the rest',
    });
    const statuses = await Promise.all(ids.map(async (id) => (await store.findDelivery(t.db, p, id))?.status));
    assert.deepEqual(statuses.filter((s) => s === 'pending').length, 2, statuses.join(', '));
    assert.deepEqual(statuses.filter((s) => s === 'failed').length, 3, statuses.join(', '));

    // The slot is held until the two started are due (200 ms at 10/s), as after a whole recovery.
    const running = `A recovery of project ${p} is still starting its redeliveries: one at a time per project`;
    advance(199);
    await assertLimited(await recover(p), '1', running);
    advance(1);
    temporalAnswers = undefined;
    const rest = await recover(p);
    assert.equal(rest.status, 202);
    assert.deepEqual(await rest.json(), { count: 3 });
    assert.deepEqual(new Set(started.map((s) => s.id)), new Set(ids));
  });

  it('config: REDELIVER_CALLS_PER_MINUTE (60) and RECOVER_CALLS_PER_MINUTE (5), whole numbers from 1', () => {
    const config = loadConfig({});
    assert.equal(config.REDELIVER_CALLS_PER_MINUTE, 60);
    assert.equal(config.RECOVER_CALLS_PER_MINUTE, 5);
    assert.deepEqual(DEFAULT_REDELIVERY_LIMITS, { redeliverPerMinute: 60, recoverPerMinute: 5 });
    assert.equal(loadConfig({ REDELIVER_CALLS_PER_MINUTE: '1' }).REDELIVER_CALLS_PER_MINUTE, 1);
    assert.throws(() => loadConfig({ REDELIVER_CALLS_PER_MINUTE: '0' }), /REDELIVER_CALLS_PER_MINUTE/);
    assert.throws(() => loadConfig({ RECOVER_CALLS_PER_MINUTE: 'many' }), /RECOVER_CALLS_PER_MINUTE/);
  });
});

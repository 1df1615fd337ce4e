// The test endpoint's one-in-flight slot is given back when the send fails, not only when it delivers: otherwise one
// unexpected error locks the project out of its test button. The API in process on a real PostgreSQL.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import pino from 'pino';
import { Writable } from 'node:stream';
import { createApp } from '../../api/app';
import { createSendLimiter } from '../../api/http/send-limits';
import type { TestDeliveryOutcome } from '../../api/webhooks/test-event';
import { createSecretBox } from '../../common/crypto/secrets';
import { addMember, addProject, createDb, createRegistration, upsertDelivery } from '../../db';
import { eventually } from '../support/eventually';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

describe('test endpoint: the in-flight slot after a failed send', () => {
  let t: TestDatabase;
  let server: Server;
  let url: string;
  const secretBox = createSecretBox(randomBytes(32));
  /** What the next sends do, in order. */
  const outcomes: (() => Promise<TestDeliveryOutcome>)[] = [];

  before(async () => {
    t = await createTestDatabase();
    const app = createApp({
      db: t.db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => outcomes.shift()!(),
      testEventLimits: { perMinute: 10, waitMs: 15_000 },
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await t?.destroy();
  });

  it('a send that throws answers 500 and frees the slot: the next test of the project goes through', async () => {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await addProject(t.db, projectId);
    await addMember(t.db, projectId, 'alice');
    await createRegistration(t.db, secretBox, {
      projectId,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    const test = () =>
      fetch(`${url}/webhooks/test/project/${projectId}`, { method: 'POST', headers: bearer(hsToken('alice')) });
    outcomes.push(
      () => Promise.reject(new Error('Temporal client closed')),
      () => Promise.resolve({ delivered: true, statusCode: 200, durationMs: 1, workflowId: 'wf-after' }),
    );
    const failed = await test();
    assert.equal(failed.status, 500, await failed.text());
    const next = await test();
    assert.equal(next.status, 200, await next.text());
    assert.equal(outcomes.length, 0, 'both sends were made');
  });

  it('a release that cannot reach the database does not fail the send: it is logged, and the lease frees the slot', async () => {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await addProject(t.db, projectId);
    const warnings: { level: number; msg: string; projectId: string; kind: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        warnings.push(JSON.parse(chunk.toString()) as (typeof warnings)[number]);
        done();
      },
    });
    let now = new Date();
    const limits = { test: { perMinute: 10, waitMs: 15_000 }, clock: () => now };
    const lost = createDb(t.url);
    const slot = await createSendLimiter(lost, pino({ level: 'warn' }, sink), limits)('test', projectId);
    await lost.destroy(); // the database is out of reach for this process from now on
    await slot.release();
    await slot.keepFor(60_000);
    assert.deepEqual(
      warnings.map((w) => [w.level, w.msg, w.projectId, w.kind]),
      [
        [40, 'send limit slot not updated: its lease frees it', projectId, 'test'],
        [40, 'send limit slot not updated: its lease frees it', projectId, 'test'],
      ],
    );
    const limiter = createSendLimiter(t.db, pino({ level: 'silent' }), limits);
    await assert.rejects(limiter('test', projectId), { status: 429 });
    // The lease: TEST_DELIVERY_WAIT_MS and a second's margin for the release to reach the database.
    now = new Date(now.getTime() + 15_999);
    await assert.rejects(limiter('test', projectId), { status: 429, headers: { 'Retry-After': '1' } });
    now = new Date(now.getTime() + 1);
    await (await limiter('test', projectId)).release();
    // A recovery with nothing left to start keeps its slot for no time: the next may run at once.
    await (await limiter('recover', projectId)).keepFor(0);
    await (await limiter('recover', projectId)).release();
  });
});

describe('send slots last as long as the work, not a lease timer: a TEST until its attempt ends, a recovery renewed with each start', () => {
  let t: TestDatabase;
  let server: Server;
  let url: string;
  const secretBox = createSecretBox(randomBytes(32));
  /** The limits' clock, moved by the tests. */
  let now = new Date();
  const advance = (ms: number) => (now = new Date(now.getTime() + ms));
  /** TEST workflows still running, by id: resolving one ends its attempt. */
  const running = new Map<string, () => void>();
  let nextOutcome: TestDeliveryOutcome;
  /** What a redelivery start does (a recovery's starts). */
  let onStart: () => Promise<void> = () => Promise.resolve();

  before(async () => {
    t = await createTestDatabase();
    const app = createApp({
      db: t.db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.resolve(nextOutcome),
      // The answer comes after 1 s at most; the attempt may take 5 s (WEBHOOK_TIMEOUT_MS).
      testEventLimits: { perMinute: 10, waitMs: 1_000, attemptMs: 5_000 },
      limitsClock: () => now,
      watchWorkflowEnd: (workflowId) => new Promise((resolve) => running.set(workflowId, resolve)),
      redelivery: async () => {
        await onStart();
        return `webhook-redelivery-${randomUUID()}`;
      },
      recoverRatePerSecond: 1_000,
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const end of running.values()) end();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await t?.destroy();
  });

  async function project(): Promise<string> {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await addProject(t.db, projectId);
    await addMember(t.db, projectId, 'alice');
    await createRegistration(t.db, secretBox, {
      projectId,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    return projectId;
  }
  const post = (path: string, body?: unknown) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { ...bearer(hsToken('alice')), ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('a test answered without its outcome holds the slot until its attempt ends, past the answer’s wait', async () => {
    const projectId = await project();
    now = new Date();
    const workflowId = `webhook-test-${randomUUID()}`;
    nextOutcome = {
      delivered: false,
      category: 'no-outcome',
      reason: 'No delivery outcome within 1000 ms',
      workflowId,
    };
    assert.equal((await post(`/webhooks/test/project/${projectId}`)).status, 502);
    // Past the answer's wait and its old lease (1 s + 1 s), within the attempt's 5 s: still in flight.
    advance(2_500);
    const during = await post(`/webhooks/test/project/${projectId}`);
    assert.equal(during.status, 429, 'the attempt still runs');
    // The attempt ends: the slot is free at once, with no time passing.
    running.get(workflowId)!();
    nextOutcome = { delivered: true, statusCode: 200, durationMs: 1, workflowId: 'wf-next' };
    await eventually('the slot freed', async () => (await post(`/webhooks/test/project/${projectId}`)).status === 200);
  });

  it('a recovery renews its slot with each start: a slow one never runs beside a second recovery', async () => {
    const projectId = await project();
    now = new Date();
    for (let i = 0; i < 3; i += 1) {
      const id = `webhook-event-${randomUUID()}`;
      await upsertDelivery(t.db, { id, projectId, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    }
    // Each start takes 200 s of the limits' clock: the recovery outlives RECOVER_CALL_LEASE_MS (300 s) from its start.
    const concurrent: number[] = [];
    let starts = 0;
    onStart = async () => {
      starts += 1;
      advance(200_000);
      if (starts === 2)
        concurrent.push((await post(`/webhooks/project/${projectId}/deliveries/recover`, since)).status);
    };
    const since = { since: '2000-01-01T00:00:00Z' };
    try {
      const first = await post(`/webhooks/project/${projectId}/deliveries/recover`, since);
      const body = await first.text();
      assert.equal(first.status, 202, body);
      assert.deepEqual(JSON.parse(body), { count: 3 });
    } finally {
      onStart = () => Promise.resolve();
    }
    assert.deepEqual(concurrent, [429], 'a second recovery while the first still starts is refused');
  });
});

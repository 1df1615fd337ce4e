import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createApp } from '../../api/app';
import { lazyTemporalClient } from '../../api/http/lazy-temporal';
import { createTestEventSender, type SendTestEvent, type TestDeliveryOutcome } from '../../api/webhooks/test-event';
import { loadConfig } from '../../common/config';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

const MINUTE = 60_000;
/** The TEST slot's lease: TEST_DELIVERY_WAIT_MS (15 s here) and a second for the release to reach the database. */
const TEST_LEASE = 16_000;

describe('test endpoint limits: one in flight and TEST_EVENTS_PER_MINUTE per project, held in PostgreSQL', () => {
  let t: TestDatabase;
  let api: LocalServer;
  const secretBox = createSecretBox(randomBytes(32));
  /** The limits' clock: frozen, and moved by the tests (each test has projects of its own). */
  let now: Date;
  const advance = (ms: number) => (now = new Date(now.getTime() + ms));
  /** Each call to the sender waits until the test releases it, so "in flight" is under the test's control. */
  let release: (() => void)[] = [];
  let sent: string[] = [];
  const delivered: TestDeliveryOutcome = { delivered: true, statusCode: 200, durationMs: 1, workflowId: 'wf' };
  const heldSender: SendTestEvent = (projectId) => {
    sent.push(projectId);
    return new Promise<TestDeliveryOutcome>((resolve) => release.push(() => resolve(delivered)));
  };

  const appWith = (sendTestEvent: SendTestEvent) =>
    createApp({
      db: t.db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent,
      testEventLimits: { perMinute: 3, waitMs: 15_000 },
      limitsClock: () => now,
    });

  before(async () => {
    t = await createTestDatabase();
    api = await listenLocal(appWith(heldSender).callback());
  });
  after(async () => {
    await api?.close();
    await t?.destroy();
  });
  beforeEach(() => {
    release = [];
    sent = [];
    now = new Date();
  });
  // A test that failed half-way leaves no request hanging.
  afterEach(() => {
    for (const done of release) done();
  });

  async function projectWithWebhook(): Promise<string> {
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

  const test = (projectId: string, base = api.url) =>
    fetch(`${base}/webhooks/test/project/${projectId}`, { method: 'POST', headers: bearer(hsToken('alice')) });

  /** Waits until the sender was called `count` times in all. */
  async function sendersCalled(count: number): Promise<void> {
    while (release.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /** One test whose send (if it is sent) the sender answers at once: its status. */
  async function testAnswered(projectId: string): Promise<number> {
    const calls = release.length;
    let answered = false;
    const reply = test(projectId).finally(() => (answered = true));
    while (!answered && release.length === calls) await new Promise((resolve) => setTimeout(resolve, 5));
    release[calls]?.();
    return (await reply).status;
  }

  async function assertLimited(reply: Response, retryAfter: string, detail: string): Promise<void> {
    assert.equal(reply.status, 429, await reply.clone().text());
    assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    assert.equal(reply.headers.get('retry-after'), retryAfter);
    const problem = (await reply.json()) as { status: number; title: string; detail: string };
    assert.equal(problem.status, 429);
    assert.equal(problem.title, 'Too Many Requests');
    assert.equal(problem.detail, detail);
  }

  const inFlight = (p: string) => `A test event for project ${p} is already in flight: one at a time per project`;
  const perMinute = (p: string) => `At most 3 test events a minute per project: project ${p} reached the limit`;

  it('answers 429 problem+json with Retry-After while a test of the project is in flight; others are not held', async () => {
    const [p, other] = [await projectWithWebhook(), await projectWithWebhook()];
    const first = test(p);
    await sendersCalled(1);

    await assertLimited(await test(p), String(TEST_LEASE / 1000), inFlight(p));

    // Another project is not limited by this one's test.
    const otherTest = test(other);
    await sendersCalled(2);
    for (const done of release) done();
    assert.equal((await first).status, 200);
    assert.equal((await otherTest).status, 200);
    assert.deepEqual(sent, [p, other]);

    // Once the first answered, the project may test again.
    assert.equal(await testAnswered(p), 200);
  });

  it('answers 429 with the seconds until a slot frees once the project sent TEST_EVENTS_PER_MINUTE', async () => {
    const p = await projectWithWebhook();
    for (let i = 0; i < 3; i += 1) assert.equal(await testAnswered(p), 200);
    await assertLimited(await test(p), '60', perMinute(p));
    advance(30_000);
    await assertLimited(await test(p), '30', perMinute(p));
    assert.equal(sent.length, 3, 'the refused tests were not sent');
  });

  it('slides the window: a project that used its tests may test again once the oldest is a minute old, not before', async () => {
    const p = await projectWithWebhook();
    const start = now.getTime();
    for (const at of [0, 10_000, 20_000]) {
      now = new Date(start + at);
      assert.equal(await testAnswered(p), 200);
    }
    now = new Date(start + MINUTE - 1);
    await assertLimited(await test(p), '1', perMinute(p));
    now = new Date(start + MINUTE);
    assert.equal(await testAnswered(p), 200, 'the first test left the window');
    // Now the tests of 10 s, 20 s and 60 s are in it: the next slot frees when the one of 10 s leaves.
    await assertLimited(await test(p), '10', perMinute(p));
    now = new Date(start + MINUTE + 10_000);
    assert.equal(await testAnswered(p), 200);
    now = new Date(start + MINUTE + 20_000);
    assert.equal(await testAnswered(p), 200);
    await assertLimited(await test(p), '40', perMinute(p));
    assert.equal(sent.length, 6);
  });

  it('a send that fails frees the slot: the next test is accepted, and failed sends count in the minute', async () => {
    // The real sender, on a Temporal that refuses connections: the workflow start fails, 503.
    const closed = await new Promise<Server>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => resolve(server));
    });
    const address = `127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const config = loadConfig({
      NODE_ENV: 'development',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_CONNECT_TIMEOUT_MS: '1000',
    });
    const temporal = lazyTemporalClient(config);
    const down = await listenLocal(appWith(createTestEventSender(() => temporal.get(), config)).callback());
    try {
      const p = await projectWithWebhook();
      for (let i = 0; i < 3; i += 1) {
        const reply = await test(p, down.url);
        assert.equal(reply.status, 503, `test ${i + 1}: ${await reply.text()}`);
      }
      await assertLimited(await test(p, down.url), '60', perMinute(p));
    } finally {
      await down.close();
      await temporal.close();
    }

    // A send whose receiver refused (not delivered, 502) frees the slot too.
    const refused = await listenLocal(
      appWith(() =>
        Promise.resolve({ delivered: false, reason: 'refused', category: 'refused', workflowId: 'wf' }),
      ).callback(),
    );
    try {
      const p = await projectWithWebhook();
      for (let i = 0; i < 3; i += 1) assert.equal((await test(p, refused.url)).status, 502, 'not 429: slot released');
    } finally {
      await refused.close();
    }
  });

  it('a slot whose holder never releases it (its API process died) frees itself when its lease ends', async () => {
    const p = await projectWithWebhook();
    const stuck = test(p);
    await sendersCalled(1);
    advance(TEST_LEASE - 1);
    await assertLimited(await test(p), '1', inFlight(p));
    advance(1);
    const next = test(p);
    await sendersCalled(2);
    // The first send ending late does not free the slot the second one now holds.
    release[0]?.();
    assert.equal((await stuck).status, 200);
    await assertLimited(await test(p), String(TEST_LEASE / 1000), inFlight(p));
    release[1]?.();
    assert.equal((await next).status, 200);
  });

  it('checks membership and registration before the limit: 403 and 404 are not turned into 429', async () => {
    const p = await projectWithWebhook();
    const reply = await fetch(`${api.url}/webhooks/test/project/${p}`, {
      method: 'POST',
      headers: bearer(hsToken('mallory')),
    });
    assert.equal(reply.status, 403);
    const bare = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, bare);
    await store.addMember(t.db, bare, 'alice');
    for (let i = 0; i < 5; i += 1) assert.equal((await test(bare)).status, 404);
    assert.equal(sent.length, 0);
  });

  it("on the database's clock (as in production): a slot kept for a recovery's schedule, then given back", async () => {
    const p = await projectWithWebhook();
    const other = await projectWithWebhook();
    const rule = { perWindow: 5, windowMs: MINUTE, leaseMs: 300_000 };
    const first = await store.admitSend(t.db, p, 'recover', rule);
    assert.ok(first.admitted);
    const elsewhere = await store.admitSend(t.db, other, 'recover', rule);
    assert.ok(elsewhere.admitted, "another project's recovery is not held by this one");
    // The recovery's redeliveries are due in 2 minutes: the slot is held until then, not its 5 minute lease.
    await store.extendSendSlot(t.db, p, 'recover', first.holder, 120_000);
    const held = await store.admitSend(t.db, p, 'recover', rule);
    assert.ok(!held.admitted && held.limit === 'in-flight', JSON.stringify(held));
    assert.ok(held.retryAfterMs > 110_000 && held.retryAfterMs <= 120_000, JSON.stringify(held));
    // A holder whose lease passed to another send neither extends nor frees it.
    await store.releaseSendSlot(t.db, p, 'recover', elsewhere.holder);
    await store.extendSendSlot(t.db, p, 'recover', elsewhere.holder, 0);
    assert.equal((await store.admitSend(t.db, p, 'recover', rule)).admitted, false);
    await store.releaseSendSlot(t.db, p, 'recover', first.holder);
    assert.equal((await store.admitSend(t.db, p, 'recover', rule)).admitted, true, 'released: the next may run');
    const stillHeld = await store.admitSend(t.db, other, 'recover', rule);
    assert.ok(!stillHeld.admitted && stillHeld.limit === 'in-flight', "the other project's slot is its own");
  });

  it('the database decides atomically: concurrent admissions never exceed the window or the one slot', async () => {
    const p = await projectWithWebhook();
    const at = new Date();
    const rate = await Promise.all(
      Array.from({ length: 20 }, () => store.admitSend(t.db, p, 'redeliver', { perWindow: 5, windowMs: MINUTE }, at)),
    );
    assert.equal(rate.filter((a) => a.admitted).length, 5);
    const slot = await Promise.all(
      Array.from({ length: 20 }, () =>
        store.admitSend(t.db, p, 'test', { perWindow: 100, windowMs: MINUTE, leaseMs: 1_000 }, at),
      ),
    );
    assert.equal(slot.filter((a) => a.admitted).length, 1);
    assert.ok(slot.every((a) => a.admitted || (a.limit === 'in-flight' && a.retryAfterMs === 1_000)));
  });
});

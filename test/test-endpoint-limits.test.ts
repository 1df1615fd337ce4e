import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createApp } from '../api/app';
import type { TestDeliveryOutcome } from '../api/test-event';
import { createSecretBox } from '../common/secrets';
import * as store from '../db';
import { createTestDatabase, type TestDatabase } from './support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from './support/tokens';

describe('test endpoint limits: one in flight and TEST_EVENTS_PER_MINUTE per project, else 429', () => {
  let t: TestDatabase;
  let server: Server;
  let url: string;
  const secretBox = createSecretBox(randomBytes(32));
  /** Each call to the sender waits until the test releases it, so "in flight" is under the test's control. */
  let release: (() => void)[] = [];
  let sent: string[] = [];

  before(async () => {
    t = await createTestDatabase();
    const app = createApp({
      db: t.db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: (projectId) => {
        sent.push(projectId);
        return new Promise<TestDeliveryOutcome>((resolve) =>
          release.push(() => resolve({ delivered: true, statusCode: 200, durationMs: 1, workflowId: 'wf' })),
        );
      },
      testEventLimits: { perMinute: 3, waitMs: 15_000 },
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
  beforeEach(() => {
    release = [];
    sent = [];
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

  const test = (projectId: string) =>
    fetch(`${url}/webhooks/test/project/${projectId}`, { method: 'POST', headers: bearer(hsToken('alice')) });

  /** Waits until the sender was called `count` times in all. */
  async function sendersCalled(count: number): Promise<void> {
    while (release.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  it('answers 429 problem+json with Retry-After while a test of the project is in flight; others are not held', async () => {
    const [p, other] = [await projectWithWebhook(), await projectWithWebhook()];
    const first = test(p);
    await sendersCalled(1);

    const second = await test(p);
    assert.equal(second.status, 429);
    assert.equal(second.headers.get('content-type'), 'application/problem+json');
    assert.equal(second.headers.get('retry-after'), '15');
    const problem = (await second.json()) as { status: number; title: string; detail: string };
    assert.equal(problem.status, 429);
    assert.equal(problem.title, 'Too Many Requests');
    assert.equal(problem.detail, `A test event for project ${p} is already in flight: one at a time per project`);

    // Another project is not limited by this one's test.
    const otherTest = test(other);
    await sendersCalled(2);
    for (const done of release) done();
    assert.equal((await first).status, 200);
    assert.equal((await otherTest).status, 200);
    assert.deepEqual(sent, [p, other]);

    // Once the first answered, the project may test again.
    const again = test(p);
    await sendersCalled(3);
    release[2]?.();
    assert.equal((await again).status, 200);
  });

  it('answers 429 with the seconds until a slot frees once the project sent TEST_EVENTS_PER_MINUTE', async () => {
    const p = await projectWithWebhook();
    for (let i = 0; i < 3; i += 1) {
      const reply = test(p);
      await sendersCalled(i + 1);
      release[i]?.();
      assert.equal((await reply).status, 200);
    }
    const limited = await test(p);
    assert.equal(limited.status, 429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    const problem = (await limited.json()) as { detail: string };
    assert.equal(problem.detail, `At most 3 test events a minute per project: project ${p} reached the limit`);
    assert.equal(sent.length, 3, 'the refused test was not sent');
  });

  it('checks membership and registration before the limit: 403 and 404 are not turned into 429', async () => {
    const p = await projectWithWebhook();
    const reply = await fetch(`${url}/webhooks/test/project/${p}`, {
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
});

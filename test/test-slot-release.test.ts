// The test endpoint's one-in-flight slot is given back when the send fails, not only when it delivers: otherwise one
// unexpected error locks the project out of its test button. The API in process on a real PostgreSQL.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import pino from 'pino';
import { Writable } from 'node:stream';
import { createApp } from '../api/app';
import { createSendLimiter } from '../api/test-limits';
import type { TestDeliveryOutcome } from '../api/test-event';
import { createSecretBox } from '../common/secrets';
import { addMember, addProject, createDb, createRegistration } from '../db';
import { createTestDatabase, type TestDatabase } from './support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from './support/tokens';

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

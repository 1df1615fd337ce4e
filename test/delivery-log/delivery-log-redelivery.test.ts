// Redelivery and recovery of logged deliveries through a real worker on the Temporal dev server: one delivery again
// under its X-Webhook-Id with a fresh signature, the failed deliveries of a window spaced by RECOVER_RATE_PER_SECOND
// (as startApi wires it), the operators' `webhooks deliveries` commands, and a 503 with Retry-After when Temporal is
// down.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { main as cli } from '../../cli';
import { loadConfig } from '../../common/config';
import { startApi } from '../../api/server';
import { freePort } from '../../dev/ports';
import { recoverAsOperator } from '../../api/deliveries/deliveries';
import * as store from '../../db';
import { fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryLogSuite } from './fixture';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { independentSignatureValid } from '../support/receiver';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

describe('delivery log: redelivery and recovery, through the API and the CLI', function () {
  this.timeout(60_000);
  const suite = useDeliveryLogSuite();
  const { fx, appDeps, withWorker, deliver, call, project, detail } = suite;

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
    /** Moves these deliveries' creation time, their attempts' partition key with it. */
    const moveCreatedAt = async (ids: string[], at: Date) => {
      await fx.database.db('deliveries').whereIn('id', ids).update({ created_at: at });
      await fx.database.db('delivery_attempts').whereIn('delivery_id', ids).update({ delivery_created_at: at });
    };
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    await withWorker(async () => {
      const delivered = await deliver(fallEvent(p));
      fx.receiver.fallback = { status: 500 };
      const [old, failedA, failedB] = await Promise.all([1, 2, 3].map(() => deliver(fallEvent(p))));
      const since = new Date();
      await moveCreatedAt([old!], new Date(Date.now() - 3_600_000));
      // A failed delivery whose run Temporal no longer holds (past retention): skipped, the others still start.
      const gone = `webhook-event-gone-${randomUUID()}`;
      await store.upsertDelivery(
        fx.database.db,
        { id: gone, projectId: p, type: 'FALL_DETECTION', workflowId: gone },
        'failed',
      );
      await moveCreatedAt([failedA!, failedB!, gone], new Date(since.getTime() + 1_000));
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
      // waits until the first one's redeliveries are due, test/api/test-endpoint-limits.test.ts).
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
        TEMPORAL_TASK_QUEUE: suite.taskQueue,
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

  it('CLI: deliveries list, redeliver and recover, for operators', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const lines: string[] = [];
    const errors: string[] = [];
    const io = {
      env: {
        DATABASE_URL: fx.database.url,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: suite.taskQueue,
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

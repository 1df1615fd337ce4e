import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { NativeConnection } from '@temporalio/worker';
import type { ActivityConfig } from '../../activities';
import { createTestEventSender } from '../../api/webhooks/test-event';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { independentSignatureValid, type ReceivedRequest } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { apiCaller, kindsOf, startEvents, vitalEvent } from './fixture';

/** The fewest milliseconds between an arrival and the one `rate` arrivals later: under 1000, a second held more. */
function tightestWindow(requests: readonly ReceivedRequest[], rate: number): number {
  const times = requests.map((request) => request.receivedAt).sort((a, b) => a - b);
  let tightest = Infinity;
  for (let i = 0; i + rate < times.length; i += 1) tightest = Math.min(tightest, times[i + rate]! - times[i]!);
  return tightest;
}

/**
 * A receiver in a process of its own, recording each request's arrival on its own idle event loop: the test's process
 * runs both workers, and its loop, busy with them, would stamp a request late. Its requests are read over HTTP.
 */
async function startReceiverProcess() {
  const program = `
    const requests = [];
    const server = require('node:http').createServer((request, response) => {
      if (request.method === 'GET') return response.end(JSON.stringify(requests));
      const chunks = [];
      request.on('data', (chunk) => chunks.push(chunk));
      request.on('end', () => {
        requests.push({ receivedAt: Date.now(), method: request.method, path: request.url, headers: request.headers,
          rawBody: Buffer.concat(chunks).toString('base64') });
        response.end('ok');
      });
    });
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
  const child = spawn(process.execPath, ['-e', program], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  const origin = `http://127.0.0.1:${line.toString().trim()}`;
  return {
    url: `${origin}/hooks/receive`,
    async requests(): Promise<ReceivedRequest[]> {
      const recorded = (await (await fetch(origin)).json()) as (Omit<ReceivedRequest, 'rawBody'> & {
        rawBody: string;
      })[];
      return recorded.map((request) => ({ ...request, rawBody: Buffer.from(request.rawBody, 'base64') }));
    },
    close: () => void child.kill(),
  };
}

describe('rate limit per endpoint (Temporal dev server, two workers, real receiver, the API in process)', function () {
  this.timeout(300_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  /** The task queue of the worker a test runs: where the API's test endpoint starts its TEST delivery. */
  let testQueue = '';
  const api = useLocalApi(fx, () => ({
    sendTestEvent: (projectId) =>
      createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: testQueue, TEST_DELIVERY_WAIT_MS: 20_000 })(
        projectId,
      ),
  }));
  const call = apiCaller(api);
  // A receiver timeout that a loaded 2-core machine does not reach for a receiver answering at once.
  const rateConfig: ActivityConfig = { ...fastConfig, WEBHOOK_TIMEOUT_MS: 5_000 };

  const member = async () => {
    const projectId = newProjectId();
    await store.addProject(fx.database.db, projectId);
    await store.addMember(fx.database.db, projectId, 'alice');
    return projectId;
  };

  /** Two workers on one task queue, each with its connection and its resumer, as two worker processes run them. */
  const onTwoWorkers = async <T>(work: (taskQueue: string) => Promise<T>, config: ActivityConfig) => {
    const connection = await NativeConnection.connect({ address: fx.env.address });
    try {
      return await fx.runWorker((taskQueue) => fx.runWorker(() => work(taskQueue), { taskQueue, config, connection }), {
        config,
      });
    } finally {
      await connection.close();
    }
  };

  it('register and PATCH set and clear rateLimit, audited; a bad value is a 400 naming it that stores nothing', async () => {
    const projectId = await member();
    const url = fx.receiver.url;
    const types = ['FALL_DETECTION', 'VITAL_THRESHOLD'];
    for (const rateLimit of [
      { perSecond: 0 },
      { perSecond: 1.5 },
      { perSecond: 1001 },
      5,
      {},
      { perSecond: 5, burst: 2 },
    ]) {
      const refused = await call('POST', '/webhooks/register', { projectId, url, types, rateLimit });
      assert.equal(refused.status, 400, JSON.stringify(rateLimit));
      assert.match(JSON.stringify(refused.body.errors), /\/rateLimit/, JSON.stringify(refused.body));
    }
    assert.equal((await call('GET', `/webhooks/project/${projectId}`)).status, 404, 'nothing stored');

    const registered = await call('POST', '/webhooks/register', { projectId, url, types, rateLimit: { perSecond: 5 } });
    assert.equal(registered.status, 201);
    assert.deepEqual(registered.body.rateLimit, { perSecond: 5 });
    assert.deepEqual((await call('GET', `/webhooks/project/${projectId}`)).body.rateLimit, { perSecond: 5 });

    const bad = await call('PATCH', '/webhooks', { projectId, rateLimit: { perSecond: -1 } });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.body.errors), /\/rateLimit/);
    const changed = await call('PATCH', '/webhooks', { projectId, rateLimit: { perSecond: 7 } });
    assert.deepEqual([changed.status, changed.body.rateLimit], [200, { perSecond: 7 }]);
    const same = await call('PATCH', '/webhooks', { projectId, rateLimit: { perSecond: 7 } });
    assert.equal(same.body.updatedAt, changed.body.updatedAt, 'the same limit writes nothing');
    const cleared = await call('PATCH', '/webhooks', { projectId, rateLimit: null });
    assert.deepEqual([cleared.status, cleared.body.rateLimit], [200, null]);
    const health = await call('GET', `/webhooks/project/${projectId}/health`);
    assert.equal(health.body.rateLimit, null);

    const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
      action: string;
      changes?: Record<string, unknown>;
    }[];
    const rateChanges = trail
      .filter((row) => row.changes?.rateLimit !== undefined)
      .map((row) => [row.action, row.changes!.rateLimit])
      .reverse();
    assert.deepEqual(rateChanges, [
      ['webhook.register', { after: { perSecond: 5 } }],
      ['webhook.update', { before: { perSecond: 5 }, after: { perSecond: 7 } }],
      ['webhook.update', { before: { perSecond: 7 }, after: null }],
    ]);
  });

  it('200 events to an endpoint limited to 5/s arrive at no more than 5/s across two workers, falls first, all delivered once', async () => {
    const rate = 5;
    const projectId = await member();
    const receiver = await startReceiverProcess();
    after(() => receiver.close());
    const secret = await fx.registrations.register(projectId, receiver.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    const limited = await call('PATCH', '/webhooks', { projectId, rateLimit: { perSecond: rate } });
    assert.equal(limited.status, 200);

    const { results, handles, waitingSeen } = await onTwoWorkers(async (taskQueue) => {
      // 160 vitals queued, then 40 falls: arrival order alone would send the falls last.
      const handles = [
        ...(await startEvents(
          fx,
          taskQueue,
          Array.from({ length: 160 }, () => vitalEvent(projectId)),
        )),
        ...(await startEvents(
          fx,
          taskQueue,
          Array.from({ length: 40 }, () => fallEvent(projectId)),
        )),
      ];
      let waitingSeen = 0;
      const watching = (async () => {
        while ((await receiver.requests()).length < 200) {
          const health = await call('GET', `/webhooks/project/${projectId}/health`);
          const rateLimit = health.body.rateLimit as { perSecond: number; waiting: number };
          assert.equal(rateLimit.perSecond, rate);
          waitingSeen = Math.max(waitingSeen, rateLimit.waiting);
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      })();
      const results = await Promise.all(handles.map((handle) => handle.result()));
      await watching;
      return { results, handles, waitingSeen };
    }, rateConfig);
    assert.ok(
      results.every((result) => result.status === 'delivered' && result.attempts === 1),
      'all delivered, none failed or retried for the rate: ' +
        JSON.stringify(results.filter((result) => result.status !== 'delivered' || result.attempts !== 1)),
    );
    const requests = await receiver.requests();
    receiver.close();
    assert.equal(requests.length, 200, 'each event once');
    const ids = requests.map((request) => String(request.headers['webhook-id']));
    assert.deepEqual([...ids].sort(), handles.map((handle) => handle.workflowId).sort());
    assert.ok(requests.every((request) => independentSignatureValid(secret, request)));
    const tightest = tightestWindow(requests, rate);
    assert.ok(tightest >= 1_000, `${rate + 1} arrivals within ${tightest} ms: more than ${rate} in one second`);
    const span = requests.at(-1)!.receivedAt - requests[0]!.receivedAt;
    assert.ok(span >= ((200 - rate) / rate) * 1_000, `paced: ${span} ms`);

    // Falls queued after 160 vitals overtake those still waiting: only vitals already given a slot come between.
    const kinds = kindsOf(requests);
    const first = kinds.indexOf('F');
    const last = kinds.lastIndexOf('F');
    assert.ok(last - first + 1 - 40 <= 2 * rate, `vitals among the falls: ${kinds}`);
    assert.ok(kinds.length - 1 - last >= 120, `vitals still queued after the falls: ${kinds}`);

    assert.ok(waitingSeen >= 50, `the health view counted the queue: at most ${waitingSeen} seen waiting`);
    const registration = await store.findRegistration(fx.database.db, projectId);
    assert.deepEqual(await fx.database.db('webhook_breaker_waiters').where({ registration_id: registration!.id }), []);
    const health = await call('GET', `/webhooks/project/${projectId}/health`);
    assert.deepEqual([health.body.state, health.body.consecutiveFailures], ['healthy', 0], 'no failure counted');
    assert.deepEqual(health.body.rateLimit, { perSecond: rate, waiting: 0 });
  });

  it('a TEST event that finds no slot within a second is answered at once (502 naming the rate limit), neither queued nor sent', async () => {
    const projectId = await member();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    assert.equal((await call('PATCH', '/webhooks', { projectId, rateLimit: { perSecond: 1 } })).status, 200);
    const registration = (await store.findRegistration(fx.database.db, projectId))!;
    /** The registration's next free slot `inMs` from now, as deliveries ahead of it would have left it. */
    const nextSlotIn = (inMs: number) =>
      fx.database.db.raw(
        `INSERT INTO webhook_rate_limits (registration_id, next_at)
         VALUES (?, clock_timestamp() + ? * interval '1 millisecond')
         ON CONFLICT (registration_id) DO UPDATE SET next_at = EXCLUDED.next_at`,
        [registration.id, inMs],
      );
    const nextAt = async () =>
      (
        await fx.database
          .db('webhook_rate_limits')
          .where({ registration_id: registration.id })
          .first<{ next_at: Date }>()
      ).next_at;

    const { refused, refusedInMs, slotBefore, slotAfter, soon, soonInMs } = await fx.runWorker(
      async (taskQueue) => {
        testQueue = taskQueue;
        await nextSlotIn(10_000);
        const slotBefore = await nextAt();
        let started = Date.now();
        const refused = await call('POST', `/webhooks/test/project/${projectId}`);
        const refusedInMs = Date.now() - started;
        const slotAfter = await nextAt();
        // A slot within the second: taken and waited for, then sent.
        await nextSlotIn(600);
        started = Date.now();
        const soon = await call('POST', `/webhooks/test/project/${projectId}`);
        return { refused, refusedInMs, slotBefore, slotAfter, soon, soonInMs: Date.now() - started };
      },
      { config: rateConfig },
    );

    assert.equal(refused.status, 502, JSON.stringify(refused.body));
    assert.match(
      String(refused.body.detail),
      /The receiver did not acknowledge the TEST event: .* failed after 0 attempt\(s\): The webhook's rate limit is reached: TEST event not sent, try again in \d+ ms/,
    );
    assert.ok(refusedInMs < 5_000, `answered at once, not after the next slot (10 s): ${refusedInMs} ms`);
    assert.deepEqual(slotAfter, slotBefore, 'no slot taken');
    assert.deepEqual(
      await fx.database.db('webhook_breaker_waiters').where({ registration_id: registration.id }),
      [],
      'not queued',
    );
    assert.equal(soon.status, 200, JSON.stringify(soon.body));
    assert.ok(soonInMs >= 500, `waited for its slot: ${soonInMs} ms`);
    assert.equal(fx.receiver.requests.length, 1, 'only the TEST that had a slot was sent');
    assert.equal(JSON.parse(fx.receiver.requests[0]!.rawBody.toString()).test !== undefined, true);
    const health = await call('GET', `/webhooks/project/${projectId}/health`);
    assert.deepEqual(health.body.rateLimit, { perSecond: 1, waiting: 0 });
    assert.deepEqual([health.body.state, health.body.consecutiveFailures], ['healthy', 0], 'no failure counted');
  });

  it('a registration without a limit is unaffected: not paced, and its attempts never ask for a slot', async () => {
    const projectId = await member();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    const rateQueries: string[] = [];
    const onQuery = (query: { sql: string }) => {
      if (/webhook_rate_limits/.test(query.sql) && !/webhook_circuit_breakers/.test(query.sql))
        rateQueries.push(query.sql);
    };
    fx.database.db.on('query', onQuery);
    try {
      const results = await onTwoWorkers(async (taskQueue) => {
        const handles = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
              args: [i % 3 === 0 ? fallEvent(projectId) : vitalEvent(projectId)],
              taskQueue,
              workflowId: `webhook-event-${randomUUID()}`,
            }),
          ),
        );
        return Promise.all(handles.map((handle) => handle.result()));
      }, rateConfig);
      assert.ok(results.every((result) => result.status === 'delivered' && result.attempts === 1));
    } finally {
      fx.database.db.removeListener('query', onQuery);
    }
    assert.equal(fx.receiver.requests.length, 30);
    assert.ok(tightestWindow(fx.receiver.requests, 5) < 1_000, 'more than 5 in one second: not paced');
    assert.deepEqual(rateQueries, [], 'no query of the rate table');
    const registration = await store.findRegistration(fx.database.db, projectId);
    assert.equal(
      await fx.database.db('webhook_rate_limits').where({ registration_id: registration!.id }).first(),
      undefined,
    );
    const health = await call('GET', `/webhooks/project/${projectId}/health`);
    assert.equal(health.body.rateLimit, null);
  });
});

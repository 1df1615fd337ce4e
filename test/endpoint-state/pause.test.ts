import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ActivityConfig } from '../../activities';
import * as store from '../../db';
import { startPauseExpiry } from '../../worker/pause-expiry';
import type { deliverWebhookEvent } from '../../workflows';
import { captureLogger, fallEvent, fastConfig } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { bearer } from '../support/tokens';
import {
  apiCaller,
  deliveriesOf,
  kindsOf,
  listedWaiters,
  memberProject,
  sleep,
  startEvents,
  vitalEvent,
} from './fixture';

describe('pause that holds (Temporal dev server, real receiver, the API in process)', function () {
  this.timeout(180_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx);
  const call = apiCaller(api);

  /** A give-up window of 3 s (retries every 100-200 ms), woken 4 a second per registration once resumed. */
  const pauseConfig: ActivityConfig = {
    ...fastConfig,
    DELIVERY_GIVE_UP_AFTER_MS: 3_000,
    BREAKER_RESUME_RATE_PER_SECOND: 4,
  };

  it('holds 20 mixed events past the give-up window without an attempt, then delivers each once, falls first', async () => {
    const { projectId, secret } = await memberProject(fx);
    const paused = await call('POST', `/webhooks/project/${projectId}/pause`);
    assert.equal(paused.status, 200);
    assert.ok(Date.parse(String(paused.body.pausedUntil)) - Date.now() > 71 * 3_600_000, 'PAUSE_MAX_HOURS (72)');

    const { results, handles, heldLog, resumedAt } = await fx.runWorker(
      async (taskQueue) => {
        // Interleaved, vitals first: arrival order alone would not put the falls first.
        const events = Array.from({ length: 20 }, (_, i) => (i % 5 < 3 ? vitalEvent(projectId) : fallEvent(projectId)));
        const handles = await startEvents(fx, taskQueue, events);
        const heldLog = await eventually('all 20 held in the delivery log', async () => {
          const items = await deliveriesOf(call, projectId);
          return items.length === 20 && items.every((item) => item.status === 'held') && items;
        });
        // Past the 3 s give-up window, several retry intervals over: nothing sent, nothing failed.
        await sleep(5_000);
        assert.equal(fx.receiver.requests.length, 0, 'nothing sent while paused');
        for (const handle of handles) assert.equal((await handle.describe()).status.name, 'RUNNING');
        const resumedAt = Date.now();
        const resumed = await call('POST', `/webhooks/project/${projectId}/resume`);
        assert.equal(resumed.status, 200);
        assert.deepEqual([resumed.body.pausedAt, resumed.body.pausedUntil], [null, null]);
        const results = await Promise.all(handles.map((handle) => handle.result()));
        return { results, handles, heldLog, resumedAt };
      },
      { config: pauseConfig },
    );

    assert.equal(heldLog.length, 20);
    assert.ok(
      results.every((result) => result.status === 'delivered' && result.attempts === 1),
      JSON.stringify(results),
    );
    const requests = fx.receiver.requests;
    assert.equal(requests.length, 20, 'every event once');
    assert.ok(requests.every((request) => request.receivedAt >= resumedAt));
    assert.ok(requests.every((request) => independentSignatureValid(secret, request)));
    const ids = requests.map((request) => String(request.headers['x-webhook-id']));
    assert.deepEqual([...ids].sort(), handles.map((handle) => handle.workflowId).sort());
    // The 8 falls first (two rounds of 4), then the 12 vitals.
    const kinds = requests.map((request) => ('reasons' in JSON.parse(request.rawBody.toString()) ? 'F' : 'V'));
    assert.equal(kinds.join(''), 'FFFFFFFFVVVVVVVVVVVV');
    // Paced at the breaker's resume rate: 20 at 4 a second take at least four more rounds after the first.
    const span = requests.at(-1)!.receivedAt - requests[0]!.receivedAt;
    assert.ok(span >= 4 * 900, `paced: ${span} ms from first to last`);
    const log = await deliveriesOf(call, projectId);
    assert.ok(log.every((item) => item.status === 'delivered' && item.attempts === 1));

    const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
      action: string;
      actor: { subject?: string };
      changes?: Record<string, unknown>;
    }[];
    const actions = trail.map((row) => row.action);
    assert.ok(actions.includes('webhook.pause') && actions.includes('webhook.resume'), actions.join());
    const resumeRow = trail.find((row) => row.action === 'webhook.resume')!;
    assert.equal(resumeRow.actor.subject, 'alice');
    assert.equal(resumeRow.changes?.heldDeliveries, 20);
  });

  it('one round of held events, 3 vitals listed before 2 falls: every fall reaches the receiver before any vital', async () => {
    const { projectId, secret } = await memberProject(fx);
    await store.pauseRegistration(fx.database.db, projectId, 3_600_000);
    const results = await fx.runWorker(
      async (taskQueue) => {
        const handles = await startEvents(fx, taskQueue, [
          vitalEvent(projectId),
          vitalEvent(projectId),
          vitalEvent(projectId),
          fallEvent(projectId),
          fallEvent(projectId),
        ]);
        await eventually('all 5 listed as held', async () => (await listedWaiters(fx, projectId)).length === 5);
        assert.equal(fx.receiver.requests.length, 0, 'nothing sent while paused');
        await store.resumeRegistration(fx.database.db, projectId);
        return Promise.all(handles.map((handle) => handle.result()));
      },
      // All five fit in one round of wakes at this rate.
      { config: { ...pauseConfig, BREAKER_RESUME_RATE_PER_SECOND: 20 } },
    );
    assert.ok(
      results.every((result) => result.status === 'delivered' && result.attempts === 1),
      JSON.stringify(results),
    );
    assert.equal(kindsOf(fx.receiver.requests), 'FFVVV');
    assert.ok(fx.receiver.requests.every((request) => independentSignatureValid(secret, request)));
    assert.deepEqual(await listedWaiters(fx, projectId), [], 'no waiter left behind');
  });

  it('held deliveries of a webhook deleted and registered again go to the new one at once, falls first', async () => {
    const { projectId, secret: oldSecret } = await memberProject(fx);
    const paused = await call('POST', `/webhooks/project/${projectId}/pause`);
    assert.ok(Date.parse(String(paused.body.pausedUntil)) - Date.now() > 71 * 3_600_000, 'held up to 72 h');
    const { results, newSecret, registeredAt } = await fx.runWorker(
      async (taskQueue) => {
        const handles = await startEvents(fx, taskQueue, [vitalEvent(projectId), fallEvent(projectId)]);
        await eventually('both held', async () => {
          const items = await deliveriesOf(call, projectId);
          return items.length === 2 && items.every((item) => item.status === 'held');
        });
        assert.equal((await call('DELETE', `/webhooks/project/${projectId}`)).status, 204);
        const registeredAt = Date.now();
        const registered = await call('POST', '/webhooks/register', {
          projectId,
          url: fx.receiver.url,
          types: ['FALL_DETECTION', 'VITAL_THRESHOLD'],
        });
        assert.equal(registered.status, 201);
        assert.deepEqual([registered.body.pausedAt, registered.body.pausedUntil], [null, null], 'the pause went');
        // Within seconds, not when the old pause would have ended.
        await fx.receiver.waitForRequests(2, 30_000);
        return {
          results: await Promise.all(handles.map((handle) => handle.result())),
          newSecret: String(registered.body.secret),
          registeredAt,
        };
      },
      { config: pauseConfig },
    );
    assert.deepEqual(
      results.map((result) => [result.status, result.attempts]),
      [
        ['delivered', 1],
        ['delivered', 1],
      ],
    );
    assert.equal(kindsOf(fx.receiver.requests), 'FV');
    const requests = fx.receiver.requests;
    assert.ok(requests.every((request) => request.receivedAt >= registeredAt));
    assert.ok(
      requests.every((request) => independentSignatureValid(newSecret, request)),
      'the new secret signs',
    );
    assert.ok(!requests.some((request) => independentSignatureValid(oldSecret, request)));
    assert.deepEqual(await listedWaiters(fx, projectId), []);
    const log = await deliveriesOf(call, projectId);
    assert.ok(
      log.every((item) => item.status === 'delivered'),
      JSON.stringify(log),
    );
  });

  it('the give-up window stands still while paused: a held event whose first attempt fails after resume is retried', async () => {
    const { projectId } = await memberProject(fx, ['FALL_DETECTION']);
    await store.pauseRegistration(fx.database.db, projectId, 3_600_000);
    fx.receiver.script({ status: 500 }, { status: 500 });
    const result = await fx.runWorker(
      async (taskQueue) => {
        const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
          args: [fallEvent(projectId)],
          taskQueue,
          workflowId: `webhook-event-${randomUUID()}`,
        });
        await eventually('held', async () => (await deliveriesOf(call, projectId))[0]?.status === 'held');
        // Longer than the whole 3 s window: counted, it would be over before the first attempt.
        await sleep(4_000);
        await store.resumeRegistration(fx.database.db, projectId);
        return handle.result();
      },
      { config: pauseConfig },
    );
    assert.deepEqual([result.status, result.attempts], ['delivered', 3]);
  });

  it('a pause ends by itself: held events go out unasked, and the operators read it in the log and the trail', async () => {
    const { projectId } = await memberProject(fx, ['FALL_DETECTION']);
    // As a pause of PAUSE_MAX_HOURS would, only shorter than the API allows (and long enough for a busy machine to start
    // a worker and both deliveries inside it).
    await store.pauseRegistration(fx.database.db, projectId, 8_000);
    const log = captureLogger();
    const stopExpiry = startPauseExpiry(fx.database.db, log.logger, 200);
    try {
      const results = await fx.runWorker(
        async (taskQueue) => {
          const handles = await Promise.all(
            [1, 2].map(() =>
              fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
                args: [fallEvent(projectId)],
                taskQueue,
                workflowId: `webhook-event-${randomUUID()}`,
              }),
            ),
          );
          await eventually('both held', async () => {
            const deliveries = await deliveriesOf(call, projectId);
            return deliveries.length === 2 && deliveries.every((d) => d.status === 'held');
          });
          assert.equal(fx.receiver.requests.length, 0);
          return Promise.all(handles.map((handle) => handle.result()));
        },
        { config: pauseConfig },
      );
      assert.deepEqual(
        results.map((result) => result.status),
        ['delivered', 'delivered'],
      );
      assert.equal(fx.receiver.requests.length, 2);
      await eventually('the pause swept', () =>
        log.lines.some((line) => String(line.msg).startsWith('webhook pause ended by itself')),
      );
      const got = await call('GET', `/webhooks/project/${projectId}`);
      assert.equal(got.body.pausedUntil, null);
      const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as { action: string }[];
      assert.ok(trail.some((row) => row.action === 'webhook.pause.expire'));
    } finally {
      stopExpiry();
    }
  });

  it('pause and resume are idempotent, audited once each, for members and manage links only; a TEST is refused', async () => {
    const { projectId } = await memberProject(fx);
    const path = (action: string) => `/webhooks/project/${projectId}/${action}`;
    const first = await call('POST', path('pause'), { hours: 1 });
    assert.equal(first.status, 200);
    const again = await call('POST', path('pause'), { hours: 5 });
    assert.equal(again.body.pausedUntil, first.body.pausedUntil, 'a pause under way is left as it is');
    assert.equal((await call('POST', path('pause'), undefined, 'mallory')).status, 403);
    const tooLong = await call('POST', path('pause'), { hours: 73 });
    assert.equal(tooLong.status, 400);
    assert.match(String(tooLong.body.detail), /hours must be at most PAUSE_MAX_HOURS \(72\)/);
    const test = await call('POST', `/webhooks/test/project/${projectId}`);
    assert.equal(test.status, 409);

    // A read-only portal link sees the pause and cannot end it; a manage link can.
    const link = async (capabilities: string[]) =>
      String((await call('POST', path('portal-sessions'), { capabilities })).body.token);
    const viaLink = async (token: string, method: string, route: string) =>
      (await fetch(`${api.url}${route}`, { method, headers: bearer(token) })).status;
    const reader = await link(['read']);
    const manager = await link(['read', 'manage']);
    assert.equal(await viaLink(reader, 'POST', path('resume')), 403);
    assert.equal(await viaLink(manager, 'POST', path('resume')), 200);
    assert.equal((await call('POST', path('resume'))).status, 200);
    const got = await call('GET', `/webhooks/project/${projectId}`);
    assert.deepEqual([got.body.pausedAt, got.body.pausedUntil], [null, null]);

    const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
      action: string;
      actor: { kind: string };
    }[];
    const pauseRows = trail.filter((row) => row.action.startsWith('webhook.pause') || row.action === 'webhook.resume');
    assert.deepEqual(pauseRows.map((row) => `${row.action} ${row.actor.kind}`).sort(), [
      'webhook.pause member',
      'webhook.resume portal-link',
    ]);
  });
});

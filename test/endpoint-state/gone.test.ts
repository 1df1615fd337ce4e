// A receiver's 410 Gone holds its registration's deliveries until a member resumes; 429, 502, 503 and 504 slow the whole
// endpoint down. The Temporal dev server, a real receiver on 127.0.0.1 checking signatures, real PostgreSQL, the API in
// process, the worker's notice sweep and a real receiver of the contacts' signed notices.
import assert from 'node:assert/strict';
import type { ActivityConfig } from '../../activities';
import { createWebhookHttpClient } from '../../activities';
import { createNotifier } from '../../activities/notices';
import * as store from '../../db';
import { startPauseExpiry } from '../../worker/pause-expiry';
import { captureLogger, fallEvent, fastConfig } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
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

describe('a receiver that is gone (410) or asks to slow down (429, 502, 504): the endpoint, not one delivery', function () {
  this.timeout(180_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx);
  const call = apiCaller(api);

  describe('410 Gone', () => {
    let contacts: TestReceiver;
    let stopSweep: () => void;
    let closeNotices: () => Promise<void>;
    before(async () => {
      contacts = await startTestReceiver();
      const http = createWebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true });
      const notifier = createNotifier({
        db: fx.database.db,
        secretBox: fx.registrations.secretBox,
        logger: captureLogger().logger,
        http,
      });
      stopSweep = startPauseExpiry(fx.database.db, captureLogger().logger, 100, notifier.notify);
      closeNotices = () => http.close();
    });
    after(async () => {
      stopSweep?.();
      await closeNotices?.();
      await contacts?.close();
    });

    /** The notices the contacts' URL got for the project, as sent. */
    const toldOf = (projectId: string) =>
      contacts.requests
        .map((request) => ({ request, body: JSON.parse(request.rawBody.toString()) as Record<string, unknown> }))
        .filter(({ body }) => body.projectId === projectId);

    it('ends that delivery’s retries, holds it and the later ones unsent past the give-up window, tells the contacts; a resume delivers all, signed, falls first', async () => {
      const { projectId, secret } = await memberProject(fx);
      await store.setNotificationContacts(fx.database.db, projectId, { url: contacts.url, emails: [] });
      fx.receiver.script({ status: 410 });
      // A give-up window of 3 s with retries every 100-200 ms: a 410 retried or failed would show within it.
      const config: ActivityConfig = {
        ...fastConfig,
        DELIVERY_GIVE_UP_AFTER_MS: 3_000,
        BREAKER_RESUME_RATE_PER_SECOND: 20,
      };

      const outcome = await fx.runWorker(
        async (taskQueue) => {
          const [gone] = await startEvents(fx, taskQueue, [fallEvent(projectId)]);
          await fx.receiver.waitForRequests(1);
          const held = await eventually('the registration held by the 410', async () => {
            const got = await call('GET', `/webhooks/project/${projectId}`);
            return got.body.pauseReason === 'gone' && got.body;
          });
          // Later events of the registration: held, never sent.
          const later = await startEvents(fx, taskQueue, [
            vitalEvent(projectId),
            vitalEvent(projectId),
            fallEvent(projectId),
          ]);
          const handles = [gone!, ...later];
          await eventually('all 4 held in the delivery log', async () => {
            const items = await deliveriesOf(call, projectId);
            return items.length === 4 && items.every((item) => item.status === 'held');
          });
          await sleep(4_000);
          assert.equal(fx.receiver.requests.length, 1, 'the 410 ended the retries, and nothing else was sent');
          for (const handle of handles) assert.equal((await handle.describe()).status.name, 'RUNNING', 'none failed');
          const notice = await eventually('the contacts told', () => toldOf(projectId)[0]);
          const health = (await call('GET', `/webhooks/project/${projectId}/health`)).body;
          const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
            action: string;
            actor: { kind: string };
            changes?: Record<string, unknown>;
          }[];
          const resumedAt = Date.now();
          const resumed = await call('POST', `/webhooks/project/${projectId}/resume`);
          const results = await Promise.all(handles.map((handle) => handle.result()));
          return { held, health, notice, trail, resumed, resumedAt, results, handles };
        },
        { config },
      );

      const { held, health, notice, trail, resumed, resumedAt, results, handles } = outcome;
      // The registration says why and since when; the hold has no end of its own.
      assert.equal(typeof held.pausedAt, 'string');
      assert.equal(held.pausedUntil, null);
      assert.ok(Date.parse(String(held.pausedAt)) >= fx.receiver.requests[0]!.receivedAt - 1_000);
      assert.deepEqual(health.held, {
        reason: 'gone',
        since: held.pausedAt,
        until: null,
        summary: `held: the receiver answered 410 Gone at ${String(held.pausedAt)}; nothing is sent until a member resumes`,
      });
      assert.equal(health.breaker && (health.breaker as { state: string }).state, 'closed', 'the breaker untouched');
      // The contacts' notice: signed with the webhook's secret, naming the status and the time.
      assert.equal(notice.request.headers['x-webhook-notice'], 'receiver-gone');
      assert.ok(independentSignatureValid(secret, notice.request), 'signed like a delivery');
      assert.deepEqual([notice.body.statusCode, notice.body.pausedAt], [410, held.pausedAt]);
      // The automatic hold in the audit trail: the service's own action.
      const goneRow = trail.find((row) => row.action === 'webhook.gone');
      assert.ok(goneRow, trail.map((row) => row.action).join());
      assert.equal(goneRow.actor.kind, 'system');
      assert.deepEqual(goneRow.changes, { pauseReason: 'gone', statusCode: 410, pausedAt: held.pausedAt });
      assert.ok(!trail.some((row) => row.action === 'breaker.open'), 'a 410 does not open the breaker');

      // The resume clears the hold and delivers every held event, the 410'd one included, once each, signed.
      assert.equal(resumed.status, 200);
      assert.deepEqual([resumed.body.pausedAt, resumed.body.pausedUntil, resumed.body.pauseReason], [null, null, null]);
      assert.deepEqual(
        results.map((result) => [result.status, 'attempts' in result && result.attempts]),
        [
          ['delivered', 2],
          ['delivered', 1],
          ['delivered', 1],
          ['delivered', 1],
        ],
      );
      const after = fx.receiver.requests.slice(1);
      assert.equal(after.length, 4, 'each held event once');
      assert.ok(after.every((request) => request.receivedAt >= resumedAt));
      assert.ok(fx.receiver.requests.every((request) => independentSignatureValid(secret, request)));
      assert.deepEqual(
        after.map((request) => String(request.headers['webhook-id'])).sort(),
        handles.map((handle) => handle.workflowId).sort(),
      );
      assert.equal(kindsOf(after), 'FFVV', 'falls first');
      assert.equal((await store.findRegistration(fx.database.db, projectId))?.pauseReason, null);
      const ended = await eventually('the end told', () => toldOf(projectId)[1]);
      assert.deepEqual(
        [ended.body.notice, ended.body.endedBy, ended.body.pauseReason, ended.body.heldDeliveries],
        ['pause-ended', 'member alice', 'gone', 4],
      );
      const resumeRow = (
        (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
          action: string;
          changes?: Record<string, unknown>;
        }[]
      ).find((row) => row.action === 'webhook.resume');
      assert.deepEqual(resumeRow?.changes, {
        pausedAt: held.pausedAt,
        pausedUntil: null,
        pauseReason: 'gone',
        heldDeliveries: 4,
      });
    });

    it('a member’s pause does not replace the hold, and it has no end for the sweep to reach', async () => {
      const { projectId } = await memberProject(fx);
      const registrationId = (await store.findRegistration(fx.database.db, projectId))!.id;
      const hold = await store.holdForGone(fx.database.db, registrationId, 410);
      assert.equal(hold?.started, true);
      assert.equal((await store.holdForGone(fx.database.db, registrationId, 410))?.started, false, 'once');
      const paused = await call('POST', `/webhooks/project/${projectId}/pause`, { hours: 1 });
      assert.equal(paused.status, 200);
      assert.deepEqual([paused.body.pauseReason, paused.body.pausedUntil], ['gone', null]);
      assert.deepEqual(
        await store.endExpiredPauses(fx.database.db).then((e) => e.filter((p) => p.projectId === projectId)),
        [],
      );
      const row = await store.findRegistration(fx.database.db, projectId);
      assert.ok(store.isPaused(row!, Date.now() + 10 * 365 * 86_400_000), 'held however long');
      const audit = await fx.database.db('audit_events').where({ project_id: projectId }).select('action');
      assert.deepEqual(
        audit.map((r: { action: string }) => r.action),
        ['webhook.gone'],
        'one hold, no pause',
      );
    });
  });

  /**
   * The receiver answers the first delivery (a fall) `status` with `headers`; five more (3 vitals, then 2 falls) start
   * once the endpoint is slowed: none reaches the receiver before `slowMs` after that answer, then all are delivered,
   * the falls first.
   */
  async function slowedEndpoint(
    status: number,
    headers: Record<string, string>,
    slowMs: number,
    config: ActivityConfig,
  ) {
    const { projectId, secret } = await memberProject(fx);
    fx.receiver.script({ status, headers });
    const results = await fx.runWorker(
      async (taskQueue) => {
        const [first] = await startEvents(fx, taskQueue, [fallEvent(projectId)]);
        const [answered] = await fx.receiver.waitForRequests(1);
        const slowed = await eventually('the endpoint slowed down', async () => {
          const got = await call('GET', `/webhooks/project/${projectId}`);
          return typeof got.body.slowedUntil === 'string' && got.body.slowedUntil;
        });
        const slowedFor = Date.parse(slowed) - answered!.receivedAt;
        assert.ok(slowedFor >= slowMs && slowedFor < slowMs + 2_000, `slowed for ${slowedFor} ms`);
        // All at once: each must make its first attempt while the endpoint is slowed down.
        const others = (
          await Promise.all(
            [vitalEvent, vitalEvent, vitalEvent, fallEvent, fallEvent].map((event) =>
              startEvents(fx, taskQueue, [event(projectId)]),
            ),
          )
        ).flat();
        await eventually('the other 5 deferred, waiting for the resumer', async () => {
          const listed = (await listedWaiters(fx, projectId)).length;
          if (listed < 5 && Date.now() > Date.parse(slowed))
            throw new Error(`only ${listed} of 5 listed before the slow-down ended: the machine is too slow for 3 s`);
          return listed === 5;
        });
        return Promise.all([first!, ...others].map((handle) => handle.result()));
      },
      { config },
    );
    assert.ok(
      results.every((result) => result.status === 'delivered'),
      JSON.stringify(results),
    );
    const [answered, ...rest] = fx.receiver.requests;
    assert.equal(rest.length, 6, 'each once');
    const early = rest.filter((request) => request.receivedAt < answered!.receivedAt + slowMs);
    assert.deepEqual(
      early.map((request) => request.receivedAt - answered!.receivedAt),
      [],
      'none before the slow-down ends',
    );
    assert.equal(kindsOf(rest), 'FFFVVV', 'falls first');
    assert.ok(fx.receiver.requests.every((request) => independentSignatureValid(secret, request)));
    const registrationId = (await store.findRegistration(fx.database.db, projectId))!.id;
    const breaker = await store.findBreaker(fx.database.db, registrationId);
    assert.equal(breaker?.consecutiveOpens ?? 0, 0, 'the breaker never opened');
    assert.deepEqual(await listedWaiters(fx, projectId), [], 'no waiter left behind');
  }

  /** Retry-After honoured up to 10 s; retries otherwise every 100 ms; all woken falls in one round. */
  const slowConfig: ActivityConfig = {
    ...fastConfig,
    DELIVERY_MAX_INTERVAL_MS: 10_000,
    BREAKER_RESUME_RATE_PER_SECOND: 20,
  };

  it('429 with Retry-After: 3: the endpoint’s other deliveries wait those 3 s, then all go, falls first', async () => {
    await slowedEndpoint(429, { 'retry-after': '3' }, 3_000, slowConfig);
  });

  it('502 with Retry-After: 2 slows the endpoint down likewise', async () => {
    await slowedEndpoint(502, { 'retry-after': '2' }, 2_000, slowConfig);
  });

  it('504 without Retry-After slows it for the schedule’s next interval (2 s here)', async () => {
    await slowedEndpoint(504, {}, 2_000, {
      ...slowConfig,
      DELIVERY_INITIAL_INTERVAL_MS: 2_000,
      DELIVERY_BACKOFF_COEFFICIENT: 1,
    });
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityConfig } from '../activities';
import { createEndpointSlots } from '../activities/breaker';
import { loadConfig } from '../common/config';
import { FailureType, type DeliveryFailedDetails } from '../common/contract';
import {
  addBreakerWaiter,
  admitAttempt,
  findBreaker,
  forgetWokenWaiters,
  recordFailure,
  recordSuccess,
  takeWaitersToWake,
  type BreakerThresholds,
  type WakeLimits,
} from '../db';
import type { deliverWebhookEvent } from '../workflows';
import { fallEvent, fastConfig, newProjectId } from './support/deliveries';
import { useDeliveryFixture } from './support/delivery-fixture';
import { independentSignatureValid } from './support/receiver';
import { createLocalEnvironment } from './support/temporal';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The least time between two rounds of wakes of one registration's waiters. */
const ROUND_MS = 950;

describe('circuit breaker per registration', function () {
  this.timeout(90_000);
  // One dev server and database for both parts.
  const fx = useDeliveryFixture(createLocalEnvironment);

  describe('its state in Postgres', () => {
    const thresholds: BreakerThresholds = { failureThreshold: 3, openMs: 1_000, maxOpenMs: 3_000, probeLeaseMs: 5_000 };
    const http500 = { message: 'Receiver answered HTTP 500', statusCode: 500 };

    async function registrationId(): Promise<string> {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      const row = await fx.database
        .db('webhook_registrations')
        .where({ project_id: projectId })
        .first<{ id: string }>();
      return row.id;
    }

    /** Makes the open period end now, as if BREAKER_OPEN_MS had passed. */
    const endOpenPeriod = (id: string) =>
      fx.database
        .db('webhook_circuit_breakers')
        .where({ registration_id: id })
        .update({ open_until: fx.database.db.fn.now() });

    /** The waiters a resumer's round takes now, of this registration only (other tests' waiters are taken too). */
    const takeOf = async (id: string, limits: WakeLimits) =>
      (await takeWaitersToWake(fx.database.db, limits)).filter((w) => w.registrationId === id);

    it('opens at BREAKER_FAILURE_THRESHOLD consecutive failures, not before, and refuses attempts while open', async () => {
      const id = await registrationId();
      assert.deepEqual(await admitAttempt(fx.database.db, id, 5_000), { state: 'closed', failures: 0 });
      await recordFailure(fx.database.db, id, thresholds, http500);
      const second = await recordFailure(fx.database.db, id, thresholds, http500);
      assert.equal(second.consecutiveFailures, 2);
      assert.equal(second.openUntil, null);
      assert.deepEqual(await admitAttempt(fx.database.db, id, 5_000), { state: 'closed', failures: 2 });

      const third = await recordFailure(fx.database.db, id, thresholds, http500);
      assert.ok(third.openUntil, 'open after the third failure');
      const admission = await admitAttempt(fx.database.db, id, 5_000);
      assert.equal(admission.state, 'open');
      assert.ok(
        admission.state === 'open' && admission.waitMs > 500 && admission.waitMs <= 1_000,
        JSON.stringify(admission),
      );
      assert.deepEqual(admission.state === 'open' && admission.lastFailure, http500);
    });

    it('waiters: none woken while open, one to probe once half-open (once per lease), the oldest at the rate once closed', async () => {
      const id = await registrationId();
      const db = fx.database.db;
      const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 5_000, wakeLeaseMs: 60_000 });
      for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
      for (let i = 1; i <= 5; i++) {
        await addBreakerWaiter(db, id, `webhook-event-waiter-${i}`, i);
        await sleep(5);
      }
      assert.deepEqual(await take(), [], 'open: nobody is woken');
      await endOpenPeriod(id);
      const probe = await take();
      assert.deepEqual(
        probe.map((w) => [w.workflowId, w.waitToken]),
        [['webhook-event-waiter-1', 1]],
        'half-open: the oldest, to probe',
      );
      await sleep(ROUND_MS);
      assert.deepEqual(await take(), [], 'not a second probe within the lease');
      await forgetWokenWaiters(db, probe);
      await recordSuccess(db, id);
      const first = await take();
      assert.deepEqual(
        first.map((w) => w.workflowId),
        ['webhook-event-waiter-2', 'webhook-event-waiter-3'],
        'closed: the oldest, at the rate',
      );
      // Two resumers (two workers) asking at once share one round.
      assert.deepEqual(await Promise.all([take(), take()]), [[], []], 'one round per second, across resumers');
      await sleep(ROUND_MS);
      const [a, b] = await Promise.all([take(), take()]);
      assert.equal(a.length + b.length, 2, 'the next round: two more, to one resumer or the other');
      await sleep(ROUND_MS);
      assert.equal((await take()).length, 0, 'every waiter woken once');
    });

    it('waiters stay listed until their signal went through: taken again after the lease, never after a new wait', async () => {
      const id = await registrationId();
      const db = fx.database.db;
      const limits = { perSecond: 10, probeLeaseMs: 5_000, wakeLeaseMs: 1_500 };
      const take = () => takeOf(id, limits);
      await recordFailure(db, id, thresholds, http500); // closed, one failure: a row to hold the rounds
      await addBreakerWaiter(db, id, 'webhook-event-signalled', 1);
      await addBreakerWaiter(db, id, 'webhook-event-lost', 1);
      await addBreakerWaiter(db, id, 'webhook-event-waits-again', 1);
      const taken = await take();
      assert.equal(taken.length, 3);
      // One signal went through; one resumer died before the other's; the third delivery waits again meanwhile.
      await addBreakerWaiter(db, id, 'webhook-event-waits-again', 2);
      await forgetWokenWaiters(
        db,
        taken.filter((w) => w.workflowId !== 'webhook-event-lost'),
      );
      await sleep(ROUND_MS);
      const again = await take();
      assert.deepEqual(
        again.map((w) => [w.workflowId, w.waitToken]).sort(),
        [['webhook-event-waits-again', 2]],
        'within the lease: only the new wait',
      );
      await forgetWokenWaiters(db, again);
      await sleep(limits.wakeLeaseMs);
      assert.deepEqual(
        (await take()).map((w) => [w.workflowId, w.waitToken]),
        [['webhook-event-lost', 1]],
        'after the lease: the one whose signal never went through',
      );
    });

    it('a probe round whose only waiter is locked (listing itself again) is not spent: the next round wakes it', async () => {
      const id = await registrationId();
      const db = fx.database.db;
      const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 });
      for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
      await addBreakerWaiter(db, id, 'webhook-event-relisting', 1);
      await endOpenPeriod(id);
      await db.transaction(async (trx) => {
        await trx('webhook_breaker_waiters').where({ registration_id: id }).forUpdate();
        assert.deepEqual(await take(), [], 'its row is locked: nobody to wake this round');
      });
      await sleep(ROUND_MS);
      assert.deepEqual(
        (await take()).map((w) => w.workflowId),
        ['webhook-event-relisting'],
        'the next round wakes it to probe, not a probe lease later',
      );
    });

    it("a delivery waiting for the endpoint's attempts in flight: woken once they have ended, if the breaker lets it through", async () => {
      const db = fx.database.db;
      const limits = { perSecond: 10, probeLeaseMs: 5_000, wakeLeaseMs: 60_000 };
      const [healthy, failing] = [await registrationId(), await registrationId()];
      const take = (id: string) => takeOf(id, limits);
      await addBreakerWaiter(db, healthy, 'webhook-event-busy-1', 1, 400);
      await addBreakerWaiter(db, failing, 'webhook-event-busy-2', 1, 400);
      assert.deepEqual(await take(healthy), [], 'not before the attempts in flight have ended');
      // The attempts in flight to the second endpoint fail meanwhile: its breaker opens.
      for (let i = 0; i < 3; i++) await recordFailure(db, failing, thresholds, http500);
      await sleep(Math.max(ROUND_MS, 500));
      assert.deepEqual(
        (await take(healthy)).map((w) => w.workflowId),
        ['webhook-event-busy-1'],
        'then woken (its breaker never failed)',
      );
      assert.deepEqual(await take(failing), [], 'the breaker opened meanwhile: it waits on for the probe');
    });

    it('a success in between resets the count: only consecutive failures open it', async () => {
      const id = await registrationId();
      await recordFailure(fx.database.db, id, thresholds, http500);
      await recordFailure(fx.database.db, id, thresholds, http500);
      await recordSuccess(fx.database.db, id);
      const after = await recordFailure(fx.database.db, id, thresholds, http500);
      assert.equal(after.consecutiveFailures, 1);
      assert.equal(after.openUntil, null);
    });

    it('half-open: exactly one of many concurrent attempts gets the probe; the others wait for its lease', async () => {
      const id = await registrationId();
      for (let i = 0; i < 3; i += 1) await recordFailure(fx.database.db, id, thresholds, http500);
      await endOpenPeriod(id);
      const admissions = await Promise.all(Array.from({ length: 20 }, () => admitAttempt(fx.database.db, id, 5_000)));
      assert.equal(admissions.filter((a) => a.state === 'probe').length, 1);
      for (const other of admissions.filter((a) => a.state !== 'probe')) {
        assert.equal(other.state, 'open');
        assert.ok(other.state === 'open' && other.waitMs > 4_000 && other.waitMs <= 5_000, JSON.stringify(other));
      }
    });

    it('a failed probe reopens for twice as long, capped at BREAKER_MAX_OPEN_MS; a successful one closes it', async () => {
      const id = await registrationId();
      const openFor = async () => {
        const row = await fx.database
          .db('webhook_circuit_breakers')
          .where({ registration_id: id })
          .first<{ ms: string }>(fx.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
        return Math.round(Number(row.ms));
      };
      for (let i = 0; i < 3; i += 1) await recordFailure(fx.database.db, id, thresholds, http500);
      assert.equal(await openFor(), 1_000);
      for (const expected of [2_000, 3_000, 3_000]) {
        await endOpenPeriod(id);
        assert.equal((await admitAttempt(fx.database.db, id, 5_000)).state, 'probe');
        await recordFailure(fx.database.db, id, thresholds, http500);
        assert.equal(await openFor(), expected);
      }
      await endOpenPeriod(id);
      assert.equal((await admitAttempt(fx.database.db, id, 5_000)).state, 'probe');
      await recordSuccess(fx.database.db, id);
      const closed = await findBreaker(fx.database.db, id);
      assert.deepEqual(
        { failures: closed?.consecutiveFailures, openUntil: closed?.openUntil, opens: closed?.consecutiveOpens },
        { failures: 0, openUntil: null, opens: 0 },
      );
      assert.deepEqual(await admitAttempt(fx.database.db, id, 5_000), { state: 'closed', failures: 0 });
    });

    it("a receiver's Retry-After lengthens the open period, never shortens it", async () => {
      const id = await registrationId();
      await recordFailure(fx.database.db, id, thresholds, http500, 0);
      await recordFailure(fx.database.db, id, thresholds, http500, 0);
      const opened = await recordFailure(fx.database.db, id, thresholds, http500, 2_500);
      const row = await fx.database
        .db('webhook_circuit_breakers')
        .where({ registration_id: id })
        .first<{ ms: string }>(fx.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
      assert.ok(opened.openUntil);
      assert.equal(Math.round(Number(row.ms)), 2_500);
    });
  });

  describe('end to end (Temporal dev server, real receiver on 127.0.0.1)', () => {
    const breakerConfig: ActivityConfig = {
      ...fastConfig,
      BREAKER_FAILURE_THRESHOLD: 3,
      BREAKER_OPEN_MS: 2_000,
      BREAKER_MAX_OPEN_MS: 4_000,
      BREAKER_RESUME_SPREAD_MS: 500,
    };

    const start = (taskQueue: string, projectId: string, workflowId = `webhook-event-${randomUUID()}`) =>
      fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId,
      });

    async function breakerOf(projectId: string) {
      const row = await fx.database
        .db('webhook_registrations')
        .where({ project_id: projectId })
        .first<{ id: string }>();
      return findBreaker(fx.database.db, row.id);
    }

    it('opens after consecutive failures, lists the waiting events without requests, wakes one probe, closes and delivers every event once', async () => {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      fx.receiver.fallback = { status: 503 };
      const events = 6;
      const results = await fx.runWorker(
        async (taskQueue) => {
          const handles = await Promise.all(Array.from({ length: events }, () => start(taskQueue, projectId)));
          let breaker = await breakerOf(projectId);
          while (!breaker?.openUntil) {
            await sleep(20);
            breaker = await breakerOf(projectId);
          }
          const openedAt = Date.now();
          await sleep(300);
          const failedBeforeOpen = fx.receiver.requests.length;
          await sleep(1_000);
          // Open: the pending events wait, listed for the resumer; none reaches the receiver.
          assert.equal(fx.receiver.requests.length, failedBeforeOpen, 'no attempt while the breaker is open');
          const waiting = await fx.database.db('webhook_breaker_waiters').count<{ count: string }[]>('* as count');
          assert.ok(Number(waiting[0]!.count) >= 1, 'the waiting events are listed');
          fx.receiver.fallback = { status: 200 };
          const settled = await Promise.all(handles.map((handle) => handle.result()));
          return { settled, openedAt, failedBeforeOpen, handles };
        },
        { config: breakerConfig },
      );

      const { settled, openedAt, failedBeforeOpen, handles } = results;
      assert.ok(settled.every((result) => result.status === 'delivered'));
      // Without the breaker each event would retry every 100-200 ms for the whole open period.
      assert.ok(failedBeforeOpen <= 2 * events, `${failedBeforeOpen} failed attempts before the breaker opened`);
      const delivered = fx.receiver.requests.slice(failedBeforeOpen);
      const firstAfterOpen = delivered[0];
      assert.ok(
        firstAfterOpen && firstAfterOpen.receivedAt - openedAt >= 1_500,
        'the probe came after the open period',
      );
      // One 2xx per event, each under its own X-Webhook-Id, each signed.
      const ids = delivered.map((request) => request.headers['x-webhook-id']);
      assert.deepEqual([...ids].sort(), handles.map((handle) => handle.workflowId).sort());
      assert.ok(delivered.every((request) => independentSignatureValid(secret, request)));
      const breaker = await breakerOf(projectId);
      assert.equal(breaker?.consecutiveFailures, 0);
      assert.equal(breaker?.openUntil, null);

      // The waits were durable (a timer in the history), and the resumer's signal ended them, long before the timer.
      // The attempt after a wait is a local activity in the task the signal starts: no activity task after it.
      let signalled = 0;
      for (const handle of handles) {
        const history = (await handle.fetchHistory()).events ?? [];
        const signal = history.findIndex((event) => event.workflowExecutionSignaledEventAttributes);
        if (signal < 0) continue;
        signalled += 1;
        const after = history.slice(signal);
        assert.ok(
          !after.some((event) => event.activityTaskScheduledEventAttributes),
          'no activity task after the wait',
        );
        assert.ok(
          after.some((event) => event.markerRecordedEventAttributes),
          'the attempt after the wait is a local activity',
        );
      }
      assert.ok(signalled >= 1, 'woken by the resumer');
      assert.equal(
        await fx.database
          .db('webhook_breaker_waiters')
          .whereIn(
            'registration_id',
            fx.database.db('webhook_registrations').select('id').where({ project_id: projectId }),
          )
          .count<{ count: string }[]>('* as count')
          .then((r) => Number(r[0]!.count)),
        0,
        'no waiter left',
      );
    });

    it('gives up at the window while open, naming the receiver’s last status; the attempts stay few', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      fx.receiver.fallback = { status: 500 };
      const giveUpAfterMs = 6_000;
      const config: ActivityConfig = {
        ...breakerConfig,
        BREAKER_OPEN_MS: 1_000,
        DELIVERY_GIVE_UP_AFTER_MS: giveUpAfterMs,
      };
      const { error, handle } = await fx.runWorker(
        async (taskQueue) => {
          const handle = await start(taskQueue, projectId);
          return {
            handle,
            error: await handle.result().then(
              () => assert.fail('should fail'),
              (e: unknown) => e,
            ),
          };
        },
        { config },
      );
      assert.ok(error instanceof WorkflowFailedError);
      assert.ok(error.cause instanceof ApplicationFailure);
      assert.equal(error.cause.type, FailureType.DeliveryFailed);
      const details = error.cause.details?.[0] as DeliveryFailedDetails;
      const seen = `details ${JSON.stringify(details)}, ${fx.receiver.requests.length} requests`;
      assert.equal(details.statusCode, 500, seen);
      assert.equal(details.lastError, 'Receiver answered HTTP 500', seen);
      // An attempt in flight when the window closes reaches the receiver, but its outcome never reaches the workflow.
      const requests = fx.receiver.requests.length;
      assert.ok(requests === details.attempts || requests === details.attempts + 1, seen);
      // The policy alone would make about 6000 / 200 = 30 attempts in the window.
      assert.ok(details.attempts <= 10, `${details.attempts} attempts`);
      const { startTime, closeTime } = await handle.describe();
      assert.ok(closeTime && closeTime.getTime() - startTime.getTime() >= giveUpAfterMs - 200, 'not before the window');
    });

    it('holds at most ENDPOINT_MAX_CONCURRENT_ATTEMPTS attempts in flight to one receiver, and delivers all', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      const answerAfterMs = 600;
      fx.receiver.fallback = { status: 200, delayMs: answerAfterMs };
      const events = 6;
      const settled = await fx.runWorker(
        async (taskQueue) => {
          const handles = await Promise.all(Array.from({ length: events }, () => start(taskQueue, projectId)));
          return Promise.all(handles.map((handle) => handle.result()));
        },
        { config: { ...breakerConfig, ENDPOINT_MAX_CONCURRENT_ATTEMPTS: 2 } },
      );
      assert.ok(settled.every((result) => result.status === 'delivered'));
      const arrivals = fx.receiver.requests.map((request) => request.receivedAt);
      assert.equal(arrivals.length, events, 'one request per event');
      // Each request is answered answerAfterMs after it arrived: count the overlaps at every arrival.
      const overlapping = arrivals.map(
        (at) => arrivals.filter((other) => other <= at && other + answerAfterMs > at).length,
      );
      assert.ok(Math.max(...overlapping) <= 2, `up to ${Math.max(...overlapping)} requests in flight at once`);
    });

    it("an attempt refused for the endpoint's attempts in flight waits for the resumer's signal, not a stream of retries", async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      fx.receiver.fallback = { status: 200, delayMs: 500 };
      const events = 3;
      const handles = await fx.runWorker(
        async (taskQueue) => {
          const started = await Promise.all(Array.from({ length: events }, () => start(taskQueue, projectId)));
          await Promise.all(started.map((handle) => handle.result()));
          return started;
        },
        { config: { ...breakerConfig, ENDPOINT_MAX_CONCURRENT_ATTEMPTS: 1, ENDPOINT_QUEUE_WAIT_MS: 0 } },
      );
      assert.deepEqual(
        fx.receiver.requests.map((request) => request.headers['x-webhook-id']).sort(),
        handles.map((handle) => handle.workflowId).sort(),
        'one request per event',
      );
      let woken = 0;
      for (const handle of handles) {
        const history = (await handle.fetchHistory()).events ?? [];
        if (!history.some((event) => event.workflowExecutionSignaledEventAttributes)) continue;
        woken += 1;
        assert.ok(!history.some((event) => event.activityTaskScheduledEventAttributes), 'no activity task');
        assert.ok(!history.some((event) => event.timerFiredEventAttributes), 'the wait ended by the signal');
      }
      assert.ok(woken >= 1, 'the refused events were listed and woken by the resumer');
    });

    for (const retryAfter of ['0', '-1', '1.5', 'abc', 'Wed, 21 Oct 2015 07:28:00 GMT']) {
      it(`Retry-After: ${retryAfter} does not shorten the open period`, async () => {
        const projectId = newProjectId();
        await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
        const failing = { status: 503, headers: { 'Retry-After': retryAfter } };
        fx.receiver.script(failing, failing, failing);
        const result = await fx.runWorker(async (taskQueue) => (await start(taskQueue, projectId)).result(), {
          config: breakerConfig,
        });
        assert.equal(result.status, 'delivered');
        assert.equal(result.attempts, 4);
        const [, , opening, probe] = fx.receiver.requests.map((request) => request.receivedAt);
        assert.ok(opening !== undefined && probe !== undefined);
        assert.ok(probe - opening >= 1_900, `the probe came ${probe - opening} ms after the breaker opened`);
      });
    }
  });
});

describe('endpoint slots (pure): at most N attempts in flight per endpoint, the rest queue briefly', () => {
  it('grants up to the limit at once, queues the next in order, and gives up on a queued one after its wait', async () => {
    const slots = createEndpointSlots(2);
    const first = await slots.acquire('a', 1_000);
    const second = await slots.acquire('a', 1_000);
    assert.ok(first && second);
    // Another endpoint has slots of its own.
    const other = await slots.acquire('b', 0);
    assert.ok(other);
    const order: string[] = [];
    const third = slots.acquire('a', 1_000).then((release) => (order.push('third'), release));
    const fourth = slots.acquire('a', 1_000).then((release) => (order.push('fourth'), release));
    const late = slots.acquire('a', 50);
    assert.equal(await late, undefined, 'no slot within 50 ms: deferred');
    first();
    const thirdRelease = await third;
    assert.ok(thirdRelease);
    second();
    assert.ok(await fourth);
    assert.deepEqual(order, ['third', 'fourth']);
  });

  it("refuses at once, without queueing, while none of the endpoint's attempts has finished for a whole wait", async () => {
    let clock = 0;
    const slots = createEndpointSlots(1, () => clock);
    const hanging = await slots.acquire('a', 1_000);
    assert.ok(hanging);
    clock = 1_000;
    // Nothing finished for 1 s: answered now (a real wait would have taken the full second).
    const refused = await Promise.race([slots.acquire('a', 1_000), sleep(200).then(() => 'queued')]);
    assert.equal(refused, undefined);
    // Progress (a release) makes the next one queue again, and the queued one gets the freed slot.
    hanging();
    const held = await slots.acquire('a', 1_000);
    assert.ok(held);
    clock = 1_500;
    const queued = slots.acquire('a', 1_000);
    held();
    assert.ok(await queued);
  });
});

describe('isolation settings (config)', () => {
  it('defaults: breaker at 5 failures, open 30 s doubling to 1 min, 10 attempts per endpoint queued 1 s, waits resumed at 20/s, 10 tests a minute', () => {
    const config = loadConfig({});
    assert.deepEqual(
      {
        threshold: config.BREAKER_FAILURE_THRESHOLD,
        open: config.BREAKER_OPEN_MS,
        maxOpen: config.BREAKER_MAX_OPEN_MS,
        spread: config.BREAKER_RESUME_SPREAD_MS,
        perEndpoint: config.ENDPOINT_MAX_CONCURRENT_ATTEMPTS,
        queueWait: config.ENDPOINT_QUEUE_WAIT_MS,
        waitMax: config.BREAKER_WAIT_MAX_MS,
        resumeRate: config.BREAKER_RESUME_RATE_PER_SECOND,
        tests: config.TEST_EVENTS_PER_MINUTE,
      },
      {
        threshold: 5,
        open: 30_000,
        maxOpen: 60_000,
        spread: 5_000,
        perEndpoint: 10,
        queueWait: 1_000,
        waitMax: 900_000,
        resumeRate: 20,
        tests: 10,
      },
    );
  });

  it('names the variable when a setting is wrong or the open periods contradict each other', () => {
    assert.throws(() => loadConfig({ BREAKER_FAILURE_THRESHOLD: '0' }), /BREAKER_FAILURE_THRESHOLD must be >= 1/);
    assert.throws(() => loadConfig({ TEST_EVENTS_PER_MINUTE: 'many' }), /TEST_EVENTS_PER_MINUTE must be integer/);
    assert.throws(
      () => loadConfig({ BREAKER_OPEN_MS: '60000', BREAKER_MAX_OPEN_MS: '1000' }),
      /BREAKER_MAX_OPEN_MS must be at least BREAKER_OPEN_MS/,
    );
  });
});

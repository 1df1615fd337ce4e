import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { NativeConnection } from '@temporalio/worker';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { ActivityConfig } from '../../activities';
import { createEndpointSlots } from '../../activities/endpoint/breaker';
import { loadConfig } from '../../common/config';
import {
  FailureType,
  RESUME_DELIVERY_SIGNAL,
  type DeliveryFailedDetails,
  type ResumeDeliverySignal,
} from '../../common/contract';
import { addBreakerWaiter, findBreaker, listAuditEvents, recordFailure } from '../../db';
import { startBreakerResumer } from '../../worker/breaker-resumer';
import type { deliverWebhookEvent } from '../../workflows';
import { captureLogger, fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { decodeOnlyPayloadCodec, useDeliveryFixture } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

const { EventType } = temporal.api.enums.v1;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('circuit breaker per registration', function () {
  this.timeout(90_000);
  // Its state in PostgreSQL alone: test/endpoint-state/breaker-state.test.ts; driven by the attempt activity: breaker-attempts.
  const fx = useDeliveryFixture(createLocalEnvironment);

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

    const registrationOf = async (projectId: string) =>
      (await fx.database.db('webhook_registrations').where({ project_id: projectId }).first<{ id: string }>()).id;

    const breakerOf = async (projectId: string) => findBreaker(fx.database.db, await registrationOf(projectId));

    /** The deliveries listed as waiting for this registration's breaker, and the wait each is in. */
    const waitersOf = async (registrationId: string) =>
      fx.database
        .db('webhook_breaker_waiters')
        .where({ registration_id: registrationId })
        .select<{ workflow_id: string; wait_token: number }[]>('workflow_id', 'wait_token');

    /** Ends the open period now: the controlled clock of these tests (BREAKER_OPEN_MS itself is long). */
    const endOpenPeriod = (registrationId: string) =>
      fx.database
        .db('webhook_circuit_breakers')
        .where({ registration_id: registrationId })
        .update({ open_until: fx.database.db.fn.now() });

    it('opens after consecutive failures, lists the waiting events without requests, wakes one probe, closes and delivers every event once', async () => {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      const registrationId = await registrationOf(projectId);
      fx.receiver.fallback = { status: 503 };
      const events = 6;
      const results = await fx.runWorker(
        async (taskQueue) => {
          const handles = await Promise.all(Array.from({ length: events }, () => start(taskQueue, projectId)));
          // Open (for 10 min): every event ends up listed, waiting for the resumer, none with an attempt in flight.
          await eventually(
            'every event listed as waiting',
            async () => (await waitersOf(registrationId)).length === events,
          );
          const failedBeforeOpen = fx.receiver.requests.length;
          const breaker = await findBreaker(fx.database.db, registrationId);
          assert.ok(breaker?.openUntil && breaker.openUntil.getTime() > Date.now(), 'open');
          fx.receiver.fallback = { status: 200 };
          const endedAt = Date.now();
          await endOpenPeriod(registrationId);
          const settled = await Promise.all(handles.map((handle) => handle.result()));
          return { settled, endedAt, failedBeforeOpen, handles };
        },
        { config: { ...breakerConfig, BREAKER_OPEN_MS: 600_000, BREAKER_MAX_OPEN_MS: 600_000 } },
      );

      const { settled, endedAt, failedBeforeOpen, handles } = results;
      assert.ok(settled.every((result) => result.status === 'delivered'));
      // Without the breaker each event would retry every 100-200 ms for the whole open period.
      assert.ok(failedBeforeOpen <= 2 * events, `${failedBeforeOpen} failed attempts before the breaker opened`);
      const delivered = fx.receiver.requests.slice(failedBeforeOpen);
      assert.ok(
        delivered.every((request) => request.receivedAt >= endedAt),
        'no request while open: the probe came after the open period',
      );
      // One 2xx per event, each under its own X-Webhook-Id, each signed.
      const ids = delivered.map((request) => request.headers['x-webhook-id']);
      assert.deepEqual([...ids].sort(), handles.map((handle) => handle.workflowId).sort());
      assert.ok(delivered.every((request) => independentSignatureValid(secret, request)));
      const breaker = await findBreaker(fx.database.db, registrationId);
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
      assert.equal(signalled, events, 'every event woken by the resumer');
      assert.deepEqual(await waitersOf(registrationId), [], 'no waiter left');
      // The trail holds the breaker's three transitions as the service's own, and nothing of the events' attempts.
      const trail = (await listAuditEvents(fx.database.db, { projectId, limit: 100 })).reverse();
      assert.deepEqual(
        trail.map((row) => [row.action, row.actor.kind, row.registrationId]),
        ['breaker.open', 'breaker.half-open', 'breaker.close'].map((action) => [action, 'system', registrationId]),
      );
    });

    it('a 2xx between failures resets the count: two deliveries each failing twice never open the breaker', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      // Threshold 3: the second delivery's first failure would be the fourth in a row if the 2xx did not count.
      fx.receiver.script({ status: 500 }, { status: 500 }, { status: 200 }, { status: 500 }, { status: 500 });
      const log = captureLogger();
      const { first, afterFirst, second } = await fx.runWorker(
        async (taskQueue) => {
          const first = await (await start(taskQueue, projectId)).result();
          const afterFirst = await breakerOf(projectId);
          const second = await (await start(taskQueue, projectId)).result();
          return { first, afterFirst, second };
        },
        { config: { ...breakerConfig, BREAKER_OPEN_MS: 600_000, BREAKER_MAX_OPEN_MS: 600_000 }, logger: log.logger },
      );
      assert.deepEqual([first.status, first.attempts], ['delivered', 3]);
      assert.equal(afterFirst?.consecutiveFailures, 0, 'the 2xx reset the count');
      assert.deepEqual([second.status, second.attempts], ['delivered', 3]);
      assert.equal(fx.receiver.requests.length, 6);
      assert.ok(!log.lines.some((line) => String(line.msg).startsWith('circuit breaker open')), 'never opened');
    });

    it('a delivery woken by the resumer and refused again waits for the next signal; a stale signal does not end that wait', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      const registrationId = await registrationOf(projectId);
      // Open for 10 min: the resumer wakes nobody, the test's own signals stand for its wakes.
      const longOpen = { failureThreshold: 1, openMs: 600_000, maxOpenMs: 600_000 };
      await recordFailure(fx.database.db, registrationId, longOpen, {
        message: 'Receiver answered HTTP 500',
        statusCode: 500,
      });
      const { history, waiters } = await fx.runWorker(
        async (taskQueue) => {
          const handle = await start(taskQueue, projectId);
          const listedUnder = (token: number) =>
            eventually(`the delivery waiting under wait ${token}`, async () => {
              const [waiter] = await waitersOf(registrationId);
              return waiter !== undefined && waiter.wait_token >= token && waiter;
            });
          await listedUnder(1);
          // As the resumer would to probe; but another attempt took the probe meanwhile: refused again, wait 2.
          const wake: ResumeDeliverySignal = { workflowId: handle.workflowId, waitToken: 1 };
          await handle.signal(RESUME_DELIVERY_SIGNAL, wake);
          await listedUnder(2);
          // A late duplicate of the first wake (a resumer that lost its lease) must not end wait 2.
          await handle.signal(RESUME_DELIVERY_SIGNAL, wake);
          const history = await eventually('the stale signal handled', async () => {
            const events = (await handle.fetchHistory()).events ?? [];
            const signalled = (event: (typeof events)[number]) =>
              event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED;
            const signals = events.filter(signalled);
            const lastSignal = events.lastIndexOf(signals[signals.length - 1]!);
            const handled = events
              .slice(lastSignal)
              .some((event) => event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED);
            return signals.length === 2 && handled && events;
          });
          const waiters = await waitersOf(registrationId);
          await handle.terminate('test over');
          return { history, waiters };
        },
        { config: breakerConfig },
      );
      // The lookup's attempt (deferred, wait 1) and the one the first signal woke (deferred, wait 2): no more.
      const markers = history.filter((event) => event.eventType === EventType.EVENT_TYPE_MARKER_RECORDED);
      assert.equal(markers.length, 2, 'two attempts, both refused by the open breaker');
      assert.deepEqual(
        waiters.map((w) => w.wait_token),
        [2],
        'still waiting under wait 2',
      );
      assert.equal(fx.receiver.requests.length, 0);
    });

    it('the resumer keeps waiters whose signal failed, and forgets those whose workflow no longer exists', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      const registrationId = await registrationOf(projectId);
      const db = fx.database.db;
      // A delivery that ended meanwhile (its safety timer woke it, or it gave up): no workflow to signal.
      await addBreakerWaiter(db, registrationId, `webhook-event-${randomUUID()}`, 1);
      const options = {
        namespace: 'default',
        ratePerSecond: 10,
        probeLeaseMs: 5_000,
        wakeLeaseMs: 600_000,
        intervalMs: 50,
        dataConverter: { payloadCodecs: [decodeOnlyPayloadCodec(fx.database.db)] },
      };
      const failing = captureLogger();
      // Temporal unreachable: a connection closed under the resumer.
      const cut = await NativeConnection.connect({ address: fx.env.address });
      await cut.close();
      const stopFailing = startBreakerResumer(db, cut, options, failing.logger);
      try {
        await eventually('a round whose signal failed', () =>
          failing.lines.some((line) => line.msg === 'could not wake deliveries waiting for a breaker'),
        );
      } finally {
        await stopFailing();
      }
      const kept = await db('webhook_breaker_waiters').where({ registration_id: registrationId });
      assert.equal(kept.length, 1, 'the waiter whose signal failed stays listed');
      assert.ok(kept[0].woken_at, 'held by the round that took it, for the lease');

      // The lease over (the controlled clock), a resumer that reaches Temporal finds the workflow gone: forgotten.
      await db('webhook_breaker_waiters')
        .where({ registration_id: registrationId })
        .update({ woken_at: db.raw(`now() - interval '601 seconds'`) });
      await db('webhook_circuit_breakers')
        .where({ registration_id: registrationId })
        .update({ resumed_at: db.raw(`now() - interval '1 second'`) });
      const reaching = captureLogger();
      const stopReaching = startBreakerResumer(db, fx.env.nativeConnection, options, reaching.logger);
      try {
        await eventually('the dead waiter forgotten', async () => (await waitersOf(registrationId)).length === 0);
      } finally {
        await stopReaching();
      }
      assert.ok(!reaching.lines.some((line) => line.level === 40), 'no warning for a workflow that ended');
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
        // A timeout well above the receiver's answer: a stalled test process must not turn a slow 200 into a retry.
        { config: { ...breakerConfig, ENDPOINT_MAX_CONCURRENT_ATTEMPTS: 2, WEBHOOK_TIMEOUT_MS: 3_000 } },
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
      // The first attempt holds the only slot for 2 s (within its 3 s timeout): the others, started together, find
      // it taken, with seconds to spare over how far apart a loaded machine starts them.
      fx.receiver.script({ status: 200, delayMs: 2_000 });
      fx.receiver.fallback = { status: 200, delayMs: 200 };
      const events = 3;
      const handles = await fx.runWorker(
        async (taskQueue) => {
          const started = await Promise.all(Array.from({ length: events }, () => start(taskQueue, projectId)));
          await Promise.all(started.map((handle) => handle.result()));
          return started;
        },
        {
          config: {
            ...breakerConfig,
            WEBHOOK_TIMEOUT_MS: 3_000,
            ENDPOINT_MAX_CONCURRENT_ATTEMPTS: 1,
            ENDPOINT_QUEUE_WAIT_MS: 0,
          },
        },
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

  it('a release with attempts still in flight keeps counting them: the limit holds after it', async () => {
    const slots = createEndpointSlots(2);
    const first = await slots.acquire('a', 1_000);
    const second = await slots.acquire('a', 1_000);
    first!();
    const third = await slots.acquire('a', 1_000);
    assert.ok(third, 'the freed slot');
    assert.equal(await slots.acquire('a', 20), undefined, 'two in flight again: no third slot');
    second!();
    third();
    assert.ok(await slots.acquire('a', 0), 'all released: free');
  });

  it('queues by priority key: falls ahead of vitals already waiting, each key in arrival order', async () => {
    const slots = createEndpointSlots(1);
    const holding = (await slots.acquire('a', 1_000, 3))!;
    const order: string[] = [];
    const releases: (() => void)[] = [];
    const queue = (name: string, priority: number) =>
      slots.acquire('a', 5_000, priority).then((release) => {
        order.push(name);
        releases.push(release!);
      });
    const queued = [queue('vital-1', 3), queue('vital-2', 3), queue('fall-1', 1), queue('fall-2', 1)];
    holding();
    // Each holder in turn lets go: the slot passes to the next in the queue.
    for (let i = 0; i < queued.length; i += 1) {
      await new Promise(setImmediate);
      releases[i]!();
    }
    await Promise.all(queued);
    assert.deepEqual(order, ['fall-1', 'fall-2', 'vital-1', 'vital-2']);
  });

  it('a fall queues even while the endpoint looks stuck, and takes the next freed slot; others are refused at once', async () => {
    let clock = 0;
    const slots = createEndpointSlots(1, () => clock);
    const hanging = (await slots.acquire('a', 1_000, 3))!;
    clock = 1_000;
    assert.equal(await slots.acquire('a', 1_000, 3), undefined, 'a vital: refused at once');
    const fall = slots.acquire('a', 1_000, 1);
    assert.equal(await Promise.race([fall, sleep(50).then(() => 'queued')]), 'queued');
    hanging();
    assert.ok(await fall, 'the freed slot is the fall’s');
  });

  it('a queued attempt that gave up does not take the next freed slot', async () => {
    // A clock that stands still: the attempt queues (the endpoint never looks stuck) and gives up on its real timer.
    const slots = createEndpointSlots(1, () => 0);
    const holding = await slots.acquire('a', 1_000);
    assert.equal(await slots.acquire('a', 20), undefined, 'gave up after 20 ms');
    holding!();
    assert.ok(await slots.acquire('a', 0), 'the freed slot goes to the next attempt, not to the one that left');
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
    // A queue longer than the attempt deadline's margin would let Temporal retry an attempt still posting.
    assert.throws(() => loadConfig({ ENDPOINT_QUEUE_WAIT_MS: '4001' }), /ENDPOINT_QUEUE_WAIT_MS must be <= 4000/);
    assert.equal(loadConfig({ ENDPOINT_QUEUE_WAIT_MS: '4000' }).ENDPOINT_QUEUE_WAIT_MS, 4_000);
    assert.throws(
      () => loadConfig({ BREAKER_OPEN_MS: '60000', BREAKER_MAX_OPEN_MS: '1000' }),
      /BREAKER_MAX_OPEN_MS must be at least BREAKER_OPEN_MS/,
    );
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityConfig } from '../../activities';
import { GONE_RECHECK_MS, createPauseHold, heldWaitMs, pausedDeferral } from '../../activities/endpoint/pause';
import {
  DELIVERY_DEFERRED,
  FailureType,
  type DeliveryDeferredDetails,
  type SubscribableType,
  type WebhookType,
} from '../../common/contract';
import * as store from '../../db';
import {
  Registrations,
  captureLogger,
  fallPayload,
  fastConfig,
  newProjectId,
  vitalPayload,
} from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { runAttempt, useAttemptSuite } from './fixture';

const config: ActivityConfig = { ...fastConfig, BREAKER_WAIT_MAX_MS: 60_000, BREAKER_RESUME_SPREAD_MS: 2_000 };
const HOUR = 3_600_000;

describe('pause: held attempts and the pause in PostgreSQL', function () {
  this.timeout(30_000);

  describe('the held wait and its deferral', () => {
    it('waits until the pause ends and the margin beyond, never less than 1 ms', () => {
      const until = new Date(10_000);
      assert.equal(heldWaitMs(until, 4_000, 500), 6_500);
      assert.equal(heldWaitMs(until, 4_000, 0.2), 6_001, 'a fractional margin rounds up');
      assert.equal(heldWaitMs(until, 10_000, 0), 1, 'at the end: 1 ms');
      assert.equal(heldWaitMs(until, 12_000, 0), 1, 'past the end: 1 ms');
      assert.equal(heldWaitMs(until, 12_000, -50), 1, 'a negative margin counts as none');
    });

    it('is a non-retryable deferral the workflow waits on: reason paused, the attempt, the wait', () => {
      const failure = pausedDeferral(3, 1_234);
      assert.equal(failure.type, DELIVERY_DEFERRED);
      assert.equal(failure.nonRetryable, true);
      assert.equal(
        failure.message,
        'Webhook paused: delivery held, next attempt when the pause ends (at most 1234 ms)',
      );
      assert.deepEqual(failure.details, [{ reason: 'paused', waitMs: 1_234, attempt: 3 }]);
    });
  });

  describe('an attempt while paused (real PostgreSQL, real receiver)', () => {
    const suite = useAttemptSuite(config.WEBHOOK_TIMEOUT_MS);

    async function pausedProject(types: SubscribableType[] = ['FALL_DETECTION', 'VITAL_THRESHOLD']) {
      const projectId = newProjectId();
      await suite.registrations.register(projectId, suite.receiver.url, types);
      const paused = await store.pauseRegistration(suite.database.db, projectId, HOUR);
      assert.ok(paused?.started);
      return { projectId, registrationId: paused.registrationId, pausedUntil: paused.pausedUntil };
    }

    /** One attempt as the worker runs it; the failure it throws, or its outcome. */
    async function attempt(
      projectId: string,
      webhookType: WebhookType,
      options: { waitToken?: number; workflowId?: string } = {},
    ) {
      const workflowId = options.workflowId ?? `webhook-event-${randomUUID()}`;
      const outcome = await runAttempt(
        suite.attemptActivity(config),
        {
          projectId,
          webhookType,
          body: JSON.stringify(webhookType === 'VITAL_THRESHOLD' ? vitalPayload : fallPayload),
          earlierAttempts: 1,
          ...(options.waitToken !== undefined && { waitToken: options.waitToken }),
        },
        { attempt: 2, workflowId },
      );
      return { outcome, workflowId };
    }

    const waitersOf = (registrationId: string) =>
      suite.database
        .db('webhook_breaker_waiters')
        .where({ registration_id: registrationId })
        .select<{ workflow_id: string; wait_token: number; priority: number; eligible_at: Date }[]>(
          'workflow_id',
          'wait_token',
          'priority',
          'eligible_at',
        );

    it('sends nothing: lists the delivery until the pause ends, with its priority key, shows it held, and defers', async () => {
      const { projectId, registrationId, pausedUntil } = await pausedProject();
      const before = Date.now();
      const { outcome, workflowId } = await attempt(projectId, 'VITAL_THRESHOLD', { waitToken: 4 });
      assert.ok(outcome instanceof ApplicationFailure, String(outcome));
      assert.equal(outcome.type, DELIVERY_DEFERRED);
      assert.equal(outcome.nonRetryable, true);
      const details = outcome.details?.[0] as DeliveryDeferredDetails;
      assert.equal(details.reason, 'paused');
      assert.equal(details.attempt, 3, 'the attempt it would have been (1 earlier, run attempt 2): no request made');
      // The safety net: the pause's end and ½ to 1 BREAKER_WAIT_MAX_MS beyond, counted from when the attempt ran.
      const [fromStart, fromEnd] = [pausedUntil!.getTime() - before, pausedUntil!.getTime() - Date.now()];
      assert.ok(
        details.waitMs >= fromEnd + 30_000 - 1_000 && details.waitMs <= fromStart + 60_000 + 1,
        `${details.waitMs}`,
      );
      assert.equal(suite.receiver.requests.length, 0);
      const [waiter, ...others] = await waitersOf(registrationId);
      assert.deepEqual(others, []);
      assert.deepEqual([waiter!.workflow_id, waiter!.wait_token, waiter!.priority], [workflowId, 4, 3]);
      assert.equal(waiter!.eligible_at.getTime(), pausedUntil!.getTime(), 'due when the pause ends');
      const logged = await store.findDelivery(suite.database.db, projectId, workflowId);
      assert.deepEqual([logged?.status, logged?.attempts], ['held', 0]);
      assert.equal((await store.findEndpointHealth(suite.database.db, projectId))?.consecutiveFailures ?? 0, 0);
      assert.equal(await store.findBreaker(suite.database.db, registrationId), undefined, 'the breaker is not touched');
    });

    it('a fall is listed first-priority; a delivery without a wait token waits on its own timer, unlisted', async () => {
      const { projectId, registrationId, pausedUntil } = await pausedProject();
      await attempt(projectId, 'FALL_DETECTION', { waitToken: 1 });
      assert.deepEqual(
        (await waitersOf(registrationId)).map((w) => w.priority),
        [1],
      );
      const before = Date.now();
      const { outcome, workflowId } = await attempt(projectId, 'FALL_DETECTION');
      const details = (outcome as ApplicationFailure).details?.[0] as DeliveryDeferredDetails;
      const [fromStart, fromEnd] = [pausedUntil!.getTime() - before, pausedUntil!.getTime() - Date.now()];
      assert.ok(
        details.waitMs >= fromEnd - 1_000 && details.waitMs <= fromStart + 2_000 + 1,
        `spread: ${details.waitMs}`,
      );
      assert.equal((await waitersOf(registrationId)).length, 1, 'not listed');
      assert.equal((await store.findDelivery(suite.database.db, projectId, workflowId))?.status, 'held');
    });

    it('a TEST is refused for good, naming the pause; after resume the attempt is sent', async () => {
      const { projectId } = await pausedProject(['FALL_DETECTION']);
      const { outcome } = await attempt(projectId, 'TEST', { waitToken: 1 });
      assert.ok(outcome instanceof ApplicationFailure);
      assert.deepEqual(
        [outcome.type, outcome.nonRetryable, outcome.message],
        [FailureType.WebhookPaused, true, 'The webhook is paused: resume it to send a test event'],
      );
      await store.resumeRegistration(suite.database.db, projectId);
      const sent = await attempt(projectId, 'FALL_DETECTION', { waitToken: 1 });
      assert.equal((sent.outcome as { status: string }).status, 'delivered');
      assert.equal(suite.receiver.requests.length, 1);
    });

    it('held under a deleted registration: kept for the next one; an attempt finding none forgets it', async () => {
      const { projectId } = await pausedProject(['FALL_DETECTION']);
      const { workflowId } = await attempt(projectId, 'FALL_DETECTION', { waitToken: 1 });
      await suite.registrations.delete(projectId);
      const kept = () => suite.database.db('webhook_unregistered_waiters').where({ project_id: projectId });
      assert.deepEqual(
        (await kept()).map((row: { workflow_id: string }) => row.workflow_id),
        [workflowId],
      );
      // Its safety timer ends the wait: the attempt after it finds no registration.
      const { outcome } = await attempt(projectId, 'FALL_DETECTION', { waitToken: 2, workflowId });
      assert.deepEqual(outcome, { status: 'skipped', reason: 'registration-deleted', attempt: 3 });
      assert.deepEqual(await kept(), [], 'nobody is to wake it any more');
      assert.equal(suite.receiver.requests.length, 0);
    });

    it('an attempt after a wait, once ended, lets the waiters behind it go: its woken row is forgotten', async () => {
      const projectId = newProjectId();
      await suite.registrations.register(projectId, suite.receiver.url, ['FALL_DETECTION']);
      const registrationId = (await store.findRegistration(suite.database.db, projectId))!.id;
      const workflowId = `webhook-event-${randomUUID()}`;
      await store.addBreakerWaiter(suite.database.db, registrationId, workflowId, 1, 0, 1);
      await store.addBreakerWaiter(suite.database.db, registrationId, 'webhook-event-vital-behind', 1, 0, 3);
      await suite.database
        .db('webhook_breaker_waiters')
        .where({ registration_id: registrationId, workflow_id: workflowId })
        .update({ woken_at: suite.database.db.fn.now(), signalled_at: suite.database.db.fn.now() });
      suite.receiver.script({ status: 500 });
      const { outcome: failed } = await attempt(projectId, 'FALL_DETECTION', { waitToken: 2, workflowId });
      assert.equal((failed as ApplicationFailure).type, FailureType.ReceiverStatus, 'sent, and failed');
      assert.deepEqual(
        (await waitersOf(registrationId)).map((w) => w.workflow_id),
        ['webhook-event-vital-behind'],
        'a failed attempt has ended too',
      );
    });

    it('a pause past its end holds nothing, swept or not', async () => {
      const { projectId } = await pausedProject(['FALL_DETECTION']);
      await suite.database
        .db('webhook_registrations')
        .where({ project_id: projectId })
        .update({ paused_until: suite.database.db.raw(`now() - interval '1 millisecond'`) });
      const { outcome } = await attempt(projectId, 'FALL_DETECTION', { waitToken: 1 });
      assert.equal((outcome as { status: string }).status, 'delivered');
    });

    describe('the hold itself: its wait by kind of hold, its log line (createPauseHold)', () => {
      /** The deferral of `runs` holds of one delivery, what it logged, and how often it was marked held. */
      async function holds(held: { pausedUntil: Date | null; waitToken?: number; goneStatusCode?: number }, runs = 12) {
        const projectId = newProjectId();
        await suite.registrations.register(projectId, 'https://receiver.example/hook', ['FALL_DETECTION']);
        const registrationId = (await store.findRegistration(suite.database.db, projectId))!.id;
        const logs = captureLogger();
        const hold = createPauseHold({ db: suite.database.db, config });
        let marked = 0;
        const deferrals: { failure: ApplicationFailure; heldAt: number }[] = [];
        for (let run = 0; run < runs; run += 1) {
          const heldAt = Date.now();
          const failure: unknown = await hold(
            {
              registrationId,
              isTest: false,
              attempt: 4,
              workflowId: `webhook-event-${randomUUID()}`,
              priority: 3,
              log: logs.logger,
              ...held,
            },
            () => Promise.resolve(void (marked += 1)),
          ).catch((error: unknown) => error);
          assert.ok(failure instanceof ApplicationFailure, String(failure));
          deferrals.push({ failure, heldAt });
        }
        const waits = deferrals.map(({ failure }) => (failure.details?.[0] as DeliveryDeferredDetails).waitMs);
        return { deferrals, waits, logs: logs.lines, marked, registrationId };
      }

      it('a 410’s hold, which has no end: a re-read after ½ to 1 day, its message and status in the deferral', async () => {
        assert.equal(GONE_RECHECK_MS, 24 * 3_600_000);
        for (const waitToken of [undefined, 2]) {
          const { deferrals, waits, logs, marked } = await holds({ pausedUntil: null, goneStatusCode: 410, waitToken });
          assert.equal(marked, 12, 'each marked held');
          for (const wait of waits)
            assert.ok(
              wait >= GONE_RECHECK_MS / 2 && wait <= GONE_RECHECK_MS + 1,
              `${wait} ms (wait token ${waitToken})`,
            );
          assert.ok(
            waits.some((wait) => wait < GONE_RECHECK_MS * 0.9) && waits.some((wait) => wait > GONE_RECHECK_MS * 0.6),
            `spread over the half day: ${waits.join(', ')}`,
          );
          const message = 'Receiver answered HTTP 410 Gone: deliveries held until a member resumes the webhook';
          const { failure } = deferrals[0]!;
          assert.deepEqual([failure.type, failure.nonRetryable, failure.message], [DELIVERY_DEFERRED, true, message]);
          assert.deepEqual(failure.details?.[0], {
            reason: 'paused',
            waitMs: waits[0],
            attempt: 4,
            lastError: message,
            statusCode: 410,
          });
          const held = logs.filter((line) => line.msg === 'webhook paused: delivery held');
          assert.equal(held.length, 12);
          assert.deepEqual(
            held.map((line) => [line.level, line.pausedUntil]),
            Array.from({ length: 12 }, () => [30, 'until resumed']),
          );
        }
      });

      it('a dated pause: listed, a half to a whole BREAKER_WAIT_MAX_MS past its end; unlisted, spread over BREAKER_RESUME_SPREAD_MS', async () => {
        const pausedUntil = new Date(Date.now() + 10_000);
        const listed = await holds({ pausedUntil, waitToken: 1 });
        listed.deferrals.forEach(({ heldAt }, i) => {
          const untilEnd = pausedUntil.getTime() - heldAt;
          const wait = listed.waits[i]!;
          assert.ok(
            wait >= untilEnd - 1_000 + 30_000 && wait <= untilEnd + 60_000 + 1,
            `listed: ${wait - untilEnd} ms past`,
          );
        });
        assert.equal(
          (await suite.database.db('webhook_breaker_waiters').where({ registration_id: listed.registrationId })).length,
          12,
        );
        assert.deepEqual(
          listed.logs.filter((line) => line.msg === 'webhook paused: delivery held').map((line) => line.pausedUntil),
          Array.from({ length: 12 }, () => pausedUntil.toISOString()),
        );

        const unlisted = await holds({ pausedUntil });
        const margins = unlisted.deferrals.map(
          ({ heldAt }, i) => unlisted.waits[i]! - (pausedUntil.getTime() - heldAt),
        );
        for (const margin of margins) assert.ok(margin >= -1_000 && margin <= 2_000 + 1, `unlisted: ${margin} ms past`);
        assert.ok(
          margins.some((margin) => margin > 100),
          `spread over 2 s: ${margins.join(', ')}`,
        );
        assert.deepEqual(
          await suite.database.db('webhook_breaker_waiters').where({ registration_id: unlisted.registrationId }),
          [],
        );
        assert.equal(
          (unlisted.deferrals[0]!.failure.details?.[0] as DeliveryDeferredDetails).lastError,
          undefined,
          'no receiver’s error for a pause',
        );
      });
    });
  });

  describe('the pause in PostgreSQL', () => {
    let database: TestDatabase;
    let registrations: Registrations;
    before(async () => {
      database = await createTestDatabase();
      registrations = new Registrations(database.db);
    });
    after(() => database?.destroy());

    async function project() {
      const projectId = newProjectId();
      await registrations.register(projectId, 'https://receiver.example/hooks', ['FALL_DETECTION']);
      const row = await store.findRegistration(database.db, projectId);
      return { projectId, registrationId: row!.id };
    }
    const waiter = (registrationId: string, workflowId: string) =>
      database
        .db('webhook_breaker_waiters')
        .where({ registration_id: registrationId, workflow_id: workflowId })
        .first<
          { eligible_at: Date; wait_token: number; priority: number; woken_at: Date | null; since: Date } | undefined
        >();

    it('pauses for the given time once; a pause under way is kept; none without a registration', async () => {
      const { projectId, registrationId } = await project();
      const before = Date.now();
      const first = await store.pauseRegistration(database.db, projectId, 2 * HOUR);
      assert.ok(first?.started);
      assert.equal(first.registrationId, registrationId);
      const length = first.pausedUntil!.getTime() - first.pausedAt.getTime();
      assert.ok(Math.abs(length - 2 * HOUR) < 5, `${length}`);
      assert.ok(Math.abs(first.pausedAt.getTime() - before) < 5_000);
      const again = await store.pauseRegistration(database.db, projectId, 5 * HOUR);
      assert.deepEqual(again, { ...first, started: false });
      const row = await store.findRegistration(database.db, projectId);
      assert.deepEqual([row?.pausedAt, row?.pausedUntil], [first.pausedAt, first.pausedUntil]);
      assert.ok(store.isPaused(row!));
      assert.equal(await store.pauseRegistration(database.db, 'no-such-project', HOUR), undefined);
      // Over (past its end): a new pause starts.
      await database
        .db('webhook_registrations')
        .where({ id: registrationId })
        .update({ paused_until: database.db.raw(`now() - interval '1 second'`) });
      assert.equal(store.isPaused((await store.findRegistration(database.db, projectId))!), false);
      assert.equal((await store.pauseRegistration(database.db, projectId, HOUR))?.started, true);
    });

    it('isPaused: only while the end is ahead', () => {
      assert.equal(store.isPaused({ pausedUntil: null }, 5), false);
      assert.equal(store.isPaused({ pausedUntil: new Date(6) }, 5), true);
      assert.equal(store.isPaused({ pausedUntil: new Date(5) }, 5), false);
    });

    it('holds a delivery until the pause ends; a resume makes it due now, pending again, and counts it', async () => {
      const { projectId, registrationId } = await project();
      const paused = (await store.pauseRegistration(database.db, projectId, HOUR))!;
      await store.holdDelivery(database.db, registrationId, 'webhook-event-a', 1, 3);
      await store.holdDelivery(database.db, registrationId, 'webhook-event-a', 2, 1);
      const listed = await waiter(registrationId, 'webhook-event-a');
      assert.deepEqual([listed?.wait_token, listed?.priority], [2, 1], 'listed again under its new wait');
      assert.equal(listed?.eligible_at.getTime(), paused.pausedUntil!.getTime());
      await store.upsertDelivery(
        database.db,
        { id: 'evt-held', projectId, type: 'FALL_DETECTION', workflowId: 'w' },
        'held',
      );
      // Another registration's waiters and one already due stay as they are.
      const other = await project();
      await store.pauseRegistration(database.db, other.projectId, HOUR);
      await store.holdDelivery(database.db, other.registrationId, 'webhook-event-other', 1, 1);
      await store.addBreakerWaiter(database.db, registrationId, 'webhook-event-due', 1);
      const dueBefore = (await waiter(registrationId, 'webhook-event-due'))!.eligible_at;

      const resumed = await store.resumeRegistration(database.db, projectId);
      assert.deepEqual(resumed, {
        registrationId,
        ended: { registrationId, pausedAt: paused.pausedAt, pausedUntil: paused.pausedUntil },
        held: 1,
      });
      assert.ok((await waiter(registrationId, 'webhook-event-a'))!.eligible_at.getTime() <= Date.now() + 1_000);
      assert.equal((await waiter(registrationId, 'webhook-event-due'))!.eligible_at.getTime(), dueBefore.getTime());
      const otherWaiter = await waiter(other.registrationId, 'webhook-event-other');
      assert.ok(otherWaiter!.eligible_at.getTime() > Date.now() + HOUR / 2, 'another project stays held');
      assert.equal((await store.findDelivery(database.db, projectId, 'evt-held'))?.status, 'pending');
      const row = await store.findRegistration(database.db, projectId);
      assert.deepEqual([row?.pausedAt, row?.pausedUntil], [null, null]);
      // Not paused (any more): nothing to end; no registration: undefined.
      assert.deepEqual(await store.resumeRegistration(database.db, projectId), { registrationId, held: 0 });
      assert.equal(await store.resumeRegistration(database.db, 'no-such-project'), undefined);
      // Held after the resume: due at once.
      await store.holdDelivery(database.db, registrationId, 'webhook-event-late', 1, 1);
      assert.ok((await waiter(registrationId, 'webhook-event-late'))!.eligible_at.getTime() <= Date.now() + 1_000);
    });

    it('a deleted registration leaves its waiters to the next one of its project: due at once, pending, unpaused', async () => {
      const { projectId, registrationId } = await project();
      await store.pauseRegistration(database.db, projectId, HOUR);
      await store.holdDelivery(database.db, registrationId, 'webhook-event-held-vital', 2, 3);
      await store.holdDelivery(database.db, registrationId, 'webhook-event-held-fall', 1, 1);
      await store.addBreakerWaiter(database.db, registrationId, 'webhook-event-signalled', 1, 0, 1);
      await database
        .db('webhook_breaker_waiters')
        .where({ registration_id: registrationId, workflow_id: 'webhook-event-signalled' })
        .update({ woken_at: database.db.fn.now(), signalled_at: database.db.fn.now() });
      const sinceOf = async (workflowId: string) => (await waiter(registrationId, workflowId))!.since;
      const since = [await sinceOf('webhook-event-held-vital'), await sinceOf('webhook-event-held-fall')];
      await store.upsertDelivery(
        database.db,
        { id: `evt-${randomUUID()}`, projectId, type: 'FALL_DETECTION', workflowId: 'webhook-event-held-fall' },
        'held',
      );
      const other = await project();
      await store.pauseRegistration(database.db, other.projectId, HOUR);
      await store.holdDelivery(database.db, other.registrationId, 'webhook-event-other', 1, 1);

      assert.ok(await store.removeRegistration(database.db, projectId));
      const kept = await database
        .db('webhook_unregistered_waiters')
        .where({ project_id: projectId })
        .orderBy('workflow_id')
        .select('workflow_id', 'wait_token', 'priority', 'since');
      assert.deepEqual(
        kept,
        [
          { workflow_id: 'webhook-event-held-fall', wait_token: 1, priority: 1, since: since[1] },
          { workflow_id: 'webhook-event-held-vital', wait_token: 2, priority: 3, since: since[0] },
        ],
        'kept by project; the one already signalled is woken and not kept',
      );

      await registrations.register(projectId, 'https://receiver.example/new', ['FALL_DETECTION']);
      const again = (await store.findRegistration(database.db, projectId))!;
      assert.notEqual(again.id, registrationId);
      assert.deepEqual([again.pausedAt, again.pausedUntil], [null, null], 'the pause ended with its registration');
      const adopted = await database
        .db('webhook_breaker_waiters')
        .where({ registration_id: again.id })
        .orderBy('workflow_id')
        .select<{ workflow_id: string; wait_token: number; priority: number; since: Date; eligible_at: Date }[]>();
      assert.deepEqual(
        adopted.map((row) => [row.workflow_id, row.wait_token, row.priority, row.since]),
        [
          ['webhook-event-held-fall', 1, 1, since[1]],
          ['webhook-event-held-vital', 2, 3, since[0]],
        ],
      );
      assert.ok(
        adopted.every((row) => row.eligible_at.getTime() <= Date.now() + 1_000),
        'due at once',
      );
      assert.deepEqual(await database.db('webhook_unregistered_waiters').where({ project_id: projectId }), []);
      const [logged] = await database.db('deliveries').where({ project_id: projectId }).select('status');
      assert.equal(logged.status, 'pending');
      const otherWaiter = await waiter(other.registrationId, 'webhook-event-other');
      assert.ok(otherWaiter!.eligible_at.getTime() > Date.now() + HOUR / 2, 'another project stays held');
    });

    it('ends the pauses that ran out, once, with their held deliveries pending; a pause under way is left', async () => {
      const ran = await project();
      const running = await project();
      await store.pauseRegistration(database.db, ran.projectId, HOUR);
      await store.pauseRegistration(database.db, running.projectId, HOUR);
      await store.upsertDelivery(
        database.db,
        { id: `evt-${randomUUID()}`, projectId: ran.projectId, type: 'FALL_DETECTION', workflowId: 'w' },
        'held',
      );
      const endedAt = await database
        .db('webhook_registrations')
        .where({ id: ran.registrationId })
        .update({ paused_until: database.db.raw(`now() - interval '1 second'`) })
        .returning<{ paused_at: Date; paused_until: Date }[]>(['paused_at', 'paused_until']);
      const ended = await store.endExpiredPauses(database.db);
      assert.deepEqual(
        ended.filter((pause) => pause.registrationId === ran.registrationId),
        [
          {
            registrationId: ran.registrationId,
            projectId: ran.projectId,
            pausedAt: endedAt[0]!.paused_at,
            pausedUntil: endedAt[0]!.paused_until,
          },
        ],
      );
      assert.ok(!ended.some((pause) => pause.registrationId === running.registrationId));
      assert.deepEqual(
        (await store.endExpiredPauses(database.db)).filter((p) => p.registrationId === ran.registrationId),
        [],
      );
      const [held] = await database.db('deliveries').where({ project_id: ran.projectId }).select('status');
      assert.equal(held.status, 'pending');
      assert.equal((await store.findRegistration(database.db, ran.projectId))?.pausedUntil, null);
      assert.ok(store.isPaused((await store.findRegistration(database.db, running.projectId))!));
    });
  });
});

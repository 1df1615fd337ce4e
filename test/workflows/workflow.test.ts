import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityConfig } from '../../activities';
import { createPlanDelivery } from '../../activities/plan';
import { loadConfig } from '../../common/config';
import type { deliverWebhookEvent } from '../../workflows';
import { FailureType, type DeliveryFailedDetails, type DeliveryPlan } from '../../common/contract';
import { fallEvent, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createTimeSkippingEnvironment, sdkLogs, uniqueTaskQueue } from '../support/temporal';

/** The attempts a policy makes before giving up: an attempt starts only while its start is within the window. */
function expectedAttempts(policy: { initial: number; coefficient: number; max: number; giveUp: number }): number {
  let attempts = 1;
  let at = 0;
  let interval = policy.initial;
  for (;;) {
    at += Math.min(interval, policy.max);
    if (at >= policy.giveUp) return attempts;
    attempts += 1;
    interval *= policy.coefficient;
  }
}

describe('retry schedule (time-skipping test server)', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createTimeSkippingEnvironment);

  // The Java test server has no custom search attributes: what the worker's start-up check would report.
  const withWorker = <T>(config: ActivityConfig, fn: (taskQueue: string) => Promise<T>) =>
    fx.runWorker(fn, { config, taskQueue: uniqueTaskQueue('schedule'), searchAttributes: false });

  it('the default policy, from the environment: 1 s initial, coefficient 2, 10 min max interval, 24 h', async () => {
    const config = { ...loadConfig({}), ALLOW_PRIVATE_WEBHOOK_URLS: true };
    // The lookup runs as an activity: in the SDK's activity environment, with the workflow id it would have.
    const workflowId = `webhook-event-${randomUUID()}`;
    const plan: DeliveryPlan = await new MockActivityEnvironment({
      workflowExecution: { workflowId, runId: randomUUID() },
    }).run(createPlanDelivery({ db: fx.database.db, config }), { ...fallEvent(newProjectId()), workflowId });
    assert.deepEqual(plan.retry, {
      initialIntervalMs: 1_000,
      backoffCoefficient: 2,
      maximumIntervalMs: 600_000,
      giveUpAfterMs: 86_400_000,
    });
    assert.equal(plan.attemptTimeoutMs, 10_000);
    const tuned = loadConfig({ DELIVERY_INITIAL_INTERVAL_MS: '500', DELIVERY_GIVE_UP_AFTER_MS: '3600000' });
    assert.equal(tuned.DELIVERY_INITIAL_INTERVAL_MS, 500);
    assert.equal(tuned.DELIVERY_GIVE_UP_AFTER_MS, 3_600_000);
  });

  it('caps a huge Retry-After at the maximum interval and delivers', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const busy = { status: 503, headers: { 'retry-after': '99999999999' } };
    fx.receiver.script(busy, busy, { status: 200 });
    const config: ActivityConfig = { ...loadConfig({}), ALLOW_PRIVATE_WEBHOOK_URLS: true, WEBHOOK_TIMEOUT_MS: 1_000 };
    const workflowId = `webhook-event-${randomUUID()}`;
    // A 503 also slows the whole endpoint down until a time on the database's clock (activities/endpoint/slow-down.ts,
    // proven on the dev server in test/endpoint-state/gone.test.ts). This server skips the workflow's time but not the
    // database's, so the endpoint would stay slowed for every skipped attempt: its mark is cleared as it comes, and what
    // is measured here is the workflow's own wait, capped at the maximum interval.
    const clearing = setInterval(() => {
      void fx.database
        .db('webhook_registrations')
        .where({ project_id: projectId })
        .whereNotNull('slowed_until')
        .update({ slowed_until: null })
        .catch(() => undefined);
    }, 20);
    const result = await withWorker(config, async (taskQueue) => {
      const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId,
      });
      return handle.result();
    }).finally(() => clearInterval(clearing));
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 3);
    // Server time, which skips ahead: two waits of exactly the 10 min cap, not 3,170 years.
    const history = await fx.env.client.workflow.getHandle(workflowId).fetchHistory();
    const times = (history.events ?? []).map((e) => Number(e.eventTime?.seconds ?? 0));
    const elapsedS = Math.max(...times) - Math.min(...times);
    assert.ok(elapsedS >= 2 * 600 && elapsedS < 2 * 600 + 60, `delivered ${elapsedS} s after the start`);
  });

  it('backs off 1 s, 2 s, 4 s … up to 10 min, gives up at the window, logs an error and ends Failed', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 500 };
    const config: ActivityConfig = {
      ...loadConfig({}),
      ALLOW_PRIVATE_WEBHOOK_URLS: true,
      WEBHOOK_TIMEOUT_MS: 1_000,
      DELIVERY_GIVE_UP_AFTER_MS: 2 * 3_600_000,
      // The retry policy alone: the circuit breaker, which would space these attempts further, stays closed.
      BREAKER_FAILURE_THRESHOLD: 10_000,
    };
    const workflowId = `webhook-event-${randomUUID()}`;
    const error = await withWorker(config, async (taskQueue) => {
      const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId,
      });
      return handle.result().then(
        () => assert.fail('should fail'),
        (e: unknown) => e,
      );
    });
    const expected = expectedAttempts({ initial: 1_000, coefficient: 2, max: 600_000, giveUp: 2 * 3_600_000 });
    assert.ok(error instanceof WorkflowFailedError);
    const failure = error.cause;
    assert.ok(failure instanceof ApplicationFailure);
    assert.equal(failure.type, FailureType.DeliveryFailed);
    const details = failure.details?.[0] as DeliveryFailedDetails;
    assert.equal(details.statusCode, 500);
    assert.equal(fx.receiver.requests.length, details.attempts);
    assert.ok(Math.abs(details.attempts - expected) <= 1, `attempts ${details.attempts}, expected about ${expected}`);
    assert.match(
      failure.message,
      /^Delivery of FALL_DETECTION to project proj-\w+ failed after \d+ attempt\(s\): Receiver answered HTTP 500$/,
    );
    assert.ok(failure.cause instanceof ActivityFailure);

    // The schedule Temporal ran, visible in the history: the first attempt ran on the worker (a local activity) and
    // a 1 s timer handed over to the activity, whose policy continues the schedule at its second interval.
    const history = await fx.env.client.workflow.getHandle(workflowId).fetchHistory();
    const timer = history.events?.find((e) => e.timerStartedEventAttributes)?.timerStartedEventAttributes;
    assert.equal(Number(timer?.startToFireTimeout?.seconds), 1);
    const scheduled = history.events?.find(
      (e) => e.activityTaskScheduledEventAttributes,
    )?.activityTaskScheduledEventAttributes;
    assert.equal(Number(scheduled?.retryPolicy?.initialInterval?.seconds), 2);
    assert.equal(scheduled?.retryPolicy?.backoffCoefficient, 2);
    assert.equal(Number(scheduled?.retryPolicy?.maximumInterval?.seconds), 600);
    // The give-up window runs from the first attempt: the activity gets what is left of it after the hand-over.
    const window = Number(scheduled?.scheduleToCloseTimeout?.seconds);
    assert.ok(window > 7_190 && window < 7_200, `schedule-to-close ${window} s`);

    const logged = sdkLogs.find((entry) => entry.level === 'ERROR' && entry.meta?.workflowId === workflowId);
    assert.ok(logged, 'exhaustion is logged as an error');
    assert.equal(logged.meta?.attempts, details.attempts);
  });
});

// The fast path: the first attempt runs as a local activity in the workflow's first task, and any failure hands over
// to the durable activity on the same retry schedule. Real dev server, real receiver, real Postgres.
import assert from 'node:assert/strict';
import { temporal } from '@temporalio/proto';
import type { ActivityConfig } from '../../activities';
import { emitWebhookEvent } from '../../client/emit';
import { ProjectIdKey, WebhookTypeKey, type DeliverWebhookEventResult } from '../../common/contract';
import { findDelivery, listDeliveryAttempts } from '../../db';
import { captureLogger, fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

const { EventType } = temporal.api.enums.v1;

describe('fast path: the first attempt as a local activity (Temporal dev server, real receiver)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);

  /** Emits one fall through the published client (search attributes at start) and waits for its result. */
  async function deliverOne(projectId: string, config: ActivityConfig = fastConfig) {
    const log = captureLogger();
    return fx.runWorker(
      async (taskQueue) => {
        const workflowId = await emitWebhookEvent(fx.env.client, fallEvent(projectId), { taskQueue });
        const handle = fx.env.client.workflow.getHandle(workflowId);
        const result = (await handle.result()) as DeliverWebhookEventResult;
        const { events } = await handle.fetchHistory();
        return { workflowId, result, handle, types: (events ?? []).map((event) => event.eventType) };
      },
      { config, logger: log.logger },
    );
  }

  const count = (
    types: (temporal.api.enums.v1.EventType | null | undefined)[],
    type: temporal.api.enums.v1.EventType,
  ) => types.filter((t) => t === type).length;

  it('a receiver answering 2xx at once: one workflow task, no activity task, no upsert; signed, one id', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const { workflowId, result, handle, types } = await deliverOne(projectId);

    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 1);
    assert.equal(count(types, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), 1, 'one workflow task');
    assert.equal(count(types, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), 0, 'no activity task');
    assert.equal(count(types, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES), 0, 'given at start, no upsert');
    assert.equal(count(types, EventType.EVENT_TYPE_TIMER_STARTED), 0);
    // The lookup made the attempt itself: one local activity, a marker recorded with the one workflow task.
    assert.equal(count(types, EventType.EVENT_TYPE_MARKER_RECORDED), 1);
    assert.equal(types.length, 6, `history: ${types.join(',')}`);

    const [request] = await fx.receiver.waitForRequests(1);
    assert.equal(fx.receiver.requests.length, 1);
    assert.equal(request!.headers['x-webhook-id'], workflowId);
    assert.ok(independentSignatureValid(secret, request!));
    const { typedSearchAttributes } = await handle.describe();
    assert.equal(typedSearchAttributes.get(ProjectIdKey), projectId);
    assert.equal(typedSearchAttributes.get(WebhookTypeKey), 'FALL_DETECTION');
    // The delivery log has the attempt, numbered 1.
    const attempts = await listDeliveryAttempts(
      fx.database.db,
      (await findDelivery(fx.database.db, projectId, workflowId))!,
    );
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.statusCode]),
      [[1, 200]],
    );
  });

  it('a receiver timeout the lookup has no room for: the first attempt is a local activity of its own', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    // 30 s + 5 s of attempt deadline + the lookup's margin exceed the lookup's 30 s start-to-close timeout.
    const { workflowId, result, types } = await deliverOne(projectId, { ...fastConfig, WEBHOOK_TIMEOUT_MS: 30_000 });
    assert.equal(result.status, 'delivered');
    assert.equal(count(types, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), 1, 'one workflow task');
    assert.equal(count(types, EventType.EVENT_TYPE_MARKER_RECORDED), 2, 'the lookup, then the attempt');
    assert.equal(count(types, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), 0);
    const [request] = await fx.receiver.waitForRequests(1);
    assert.equal(request!.headers['x-webhook-id'], workflowId);
    assert.ok(independentSignatureValid(secret, request!));
  });

  it("WEBHOOK_TIMEOUT_MS near the lookup's timeout: the lookup keeps its margin, the attempt is a local activity of its own", async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    // 22 s + 5 s of attempt deadline fit the lookup's 30 s, but not with its own reads and log writes (5 s) on top:
    // a POST still running when the lookup timed out would be cut and sent again by the retried lookup.
    const { result, types } = await deliverOne(projectId, { ...fastConfig, WEBHOOK_TIMEOUT_MS: 22_000 });
    assert.equal(result.status, 'delivered');
    assert.equal(count(types, EventType.EVENT_TYPE_MARKER_RECORDED), 2, 'the lookup, then the attempt');
    assert.equal(fx.receiver.requests.length, 1);
  });

  it('falls back to the durable activity on failure: the schedule goes on, attempts numbered 1, 2, 3, one id', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script({ status: 500 }, { status: 503 }, { status: 200 });
    const schedule = { ...fastConfig, DELIVERY_INITIAL_INTERVAL_MS: 300, DELIVERY_BACKOFF_COEFFICIENT: 2 };
    const { workflowId, result, types } = await deliverOne(projectId, {
      ...schedule,
      DELIVERY_MAX_INTERVAL_MS: 2_000,
    });

    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 3);
    // The local attempt, a durable timer for the first interval, then one activity task retried by Temporal.
    assert.equal(count(types, EventType.EVENT_TYPE_TIMER_STARTED), 1);
    assert.equal(count(types, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), 1);
    const requests = fx.receiver.requests;
    assert.equal(requests.length, 3);
    for (const request of requests) {
      assert.equal(request.headers['x-webhook-id'], workflowId);
      assert.ok(independentSignatureValid(secret, request));
      assert.ok(request.rawBody.equals(requests[0]!.rawBody));
    }
    // Gaps follow the policy across the hand-over: at least 300 ms, then at least 600 ms (never restarted at 300).
    const gaps = requests.slice(1).map((request, i) => request.receivedAt - requests[i]!.receivedAt);
    assert.ok(gaps[0]! >= 300, `first gap ${gaps[0]} ms`);
    assert.ok(gaps[1]! >= 600, `second gap ${gaps[1]} ms`);
    const attempts = await listDeliveryAttempts(
      fx.database.db,
      (await findDelivery(fx.database.db, projectId, workflowId))!,
    );
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.statusCode]),
      [
        [1, 500],
        [2, 503],
        [3, 200],
      ],
    );
  });

  it("a receiver's Retry-After on the local attempt is a floor for the hand-over wait", async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script({ status: 503, headers: { 'retry-after': '1' } }, { status: 200 });
    const { result } = await deliverOne(projectId, { ...fastConfig, DELIVERY_MAX_INTERVAL_MS: 5_000 });
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 2);
    const [first, second] = fx.receiver.requests;
    assert.ok(second!.receivedAt - first!.receivedAt >= 1_000, `gap ${second!.receivedAt - first!.receivedAt} ms`);
  });

  it('a local attempt that times out is retried by the durable activity and delivered', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script({ status: 200, delayMs: 2_000 }, { status: 200 });
    const { workflowId, result } = await deliverOne(projectId);
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 2);
    const requests = await fx.receiver.waitForRequests(2);
    for (const request of requests) {
      assert.equal(request.headers['x-webhook-id'], workflowId);
      assert.ok(independentSignatureValid(secret, request));
    }
  });

  it('DELIVERY_FIRST_ATTEMPT_LOCAL=false: every attempt is an activity task, delivered the same', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const { workflowId, result, types } = await deliverOne(projectId, {
      ...fastConfig,
      DELIVERY_FIRST_ATTEMPT_LOCAL: false,
    });
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 1);
    assert.equal(count(types, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), 1);
    assert.equal(count(types, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), 2);
    const [request] = await fx.receiver.waitForRequests(1);
    assert.equal(request!.headers['x-webhook-id'], workflowId);
    assert.ok(independentSignatureValid(secret, request!));
  });
});

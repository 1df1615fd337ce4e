import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { Client } from '@temporalio/client';
import { emitWebhookEvent } from '../../client/emit';
import type { DeliverWebhookEventInput, SubscribableType } from '../../common/contract';
import { deliveryPriority, fairnessKeyOf } from '../../common/fairness';
import { TEMPORAL_DYNAMIC_CONFIG } from '../../dev/temporal-dev-server';
import { USER, fallPayload, newProjectId, vitalPayload } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';

const TYPES: SubscribableType[] = ['FALL_DETECTION', 'VITAL_THRESHOLD'];

/** Emits one event through the published client (its priority and fairness key included) with a readable id. */
function emit(client: Client, taskQueue: string, projectId: string, webhookType: SubscribableType, eventId: string) {
  const payload = webhookType === 'FALL_DETECTION' ? fallPayload : vitalPayload;
  return emitWebhookEvent(client, { projectId, webhookType, userUUID: USER, payload }, { taskQueue, eventId });
}

describe('isolation between projects and emergencies first (Temporal dev server with fairness, backlogged queue)', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  // One attempt at a time: the order attempts reach the receiver is the order the server dispatched them.
  const oneSlot = { maxConcurrentActivityTaskExecutions: 1, maxConcurrentWorkflowTaskExecutions: 2 };

  /** The X-Webhook-Id of every request, in the order the receiver got them. */
  const arrivalOrder = () => fx.receiver.requests.map((request) => String(request.headers['x-webhook-id']));

  it('runs the dev server and the compose server with fairness, the priority matcher and one partition', () => {
    assert.deepEqual(TEMPORAL_DYNAMIC_CONFIG, {
      'matching.useNewMatcher': true,
      'matching.enableFairness': true,
      'matching.numTaskqueueReadPartitions': 1,
      'matching.numTaskqueueWritePartitions': 1,
    });
    const root = join(__dirname, '..', '..');
    const file = parseYaml(readFileSync(join(root, 'temporal-dynamic-config.yaml'), 'utf8')) as Record<
      string,
      { value: unknown }[]
    >;
    assert.deepEqual(
      Object.fromEntries(Object.entries(file).map(([key, [setting]]) => [key, setting?.value])),
      TEMPORAL_DYNAMIC_CONFIG,
    );
    const compose = parseYaml(readFileSync(join(root, 'docker-compose.yml'), 'utf8')) as {
      services: { temporal: { environment: Record<string, string>; volumes: string[] } };
    };
    const { environment, volumes } = compose.services.temporal;
    assert.ok(
      volumes.includes(`./temporal-dynamic-config.yaml:/etc/temporal/${environment.DYNAMIC_CONFIG_FILE_PATH}:ro`),
    );
  });

  it('dispatches FALL_DETECTION ahead of VITAL_THRESHOLD ahead of TEST, across projects, from a backlog', async () => {
    const [a, b] = [newProjectId(), newProjectId()];
    await fx.registrations.register(a, fx.receiver.url, TYPES);
    await fx.registrations.register(b, fx.receiver.url, TYPES);
    const taskQueue = uniqueTaskQueue('priority');
    const client = fx.env.client;
    // The backlog, queued before any worker polls: tests first, then vitals, then falls.
    for (let i = 0; i < 3; i += 1) {
      const input: DeliverWebhookEventInput = {
        projectId: a,
        webhookType: 'TEST',
        userUUID: USER,
        payload: { test: 't' },
      };
      await client.workflow.start('deliverWebhookEvent', {
        args: [input],
        taskQueue,
        workflowId: `test-${i}`,
        priority: deliveryPriority(a, 'TEST'),
      });
    }
    for (let i = 0; i < 12; i += 1) await emit(client, taskQueue, a, 'VITAL_THRESHOLD', `vital-${i}`);
    for (let i = 0; i < 4; i += 1) await emit(client, taskQueue, b, 'FALL_DETECTION', `fall-${i}`);

    await fx.runWorker(() => fx.receiver.waitForRequests(19, 60_000), { taskQueue, slots: oneSlot });
    const order = arrivalOrder();
    const positions = (prefix: string) =>
      order.flatMap((id, position) =>
        id.startsWith(prefix) || id.startsWith(`webhook-event-${prefix}`) ? [position] : [],
      );
    const [falls, vitals, tests] = [positions('fall-'), positions('vital-'), positions('test-')];
    assert.equal(falls.length + vitals.length + tests.length, 19, order.join(' '));
    assert.ok(Math.max(...falls) < Math.min(...vitals), `falls first: ${order.join(' ')}`);
    assert.ok(Math.max(...vitals) < Math.min(...tests), `tests last: ${order.join(' ')}`);
  });

  it("gives each project its fair share: a project's few events are not queued behind another's backlog", async () => {
    const [busy, quiet] = [newProjectId(), newProjectId()];
    await fx.registrations.register(busy, fx.receiver.url, TYPES);
    await fx.registrations.register(quiet, fx.receiver.url, TYPES);
    const taskQueue = uniqueTaskQueue('fairness');
    const client = fx.env.client;
    const backlog = 24;
    for (let i = 0; i < backlog; i += 1) await emit(client, taskQueue, busy, 'VITAL_THRESHOLD', `busy-${i}`);
    for (let i = 0; i < 4; i += 1) await emit(client, taskQueue, quiet, 'VITAL_THRESHOLD', `quiet-${i}`);

    await fx.runWorker(() => fx.receiver.waitForRequests(backlog + 4, 60_000), { taskQueue, slots: oneSlot });
    const order = arrivalOrder();
    const quietPositions = order.flatMap((id, position) => (id.includes('quiet-') ? [position] : []));
    assert.equal(quietPositions.length, 4);
    // First come, first served would put them at 24 to 27; shared fairly they come among the first dozen.
    assert.ok(
      Math.max(...quietPositions) < 12,
      `quiet project's events at ${quietPositions.join(', ')}: ${order.join(' ')}`,
    );
  });

  it('keys fairness by project id, hashed to Temporal’s 64-byte limit when longer', () => {
    assert.equal(fairnessKeyOf('project-a'), 'project-a');
    const long = 'p'.repeat(200);
    assert.match(fairnessKeyOf(long), /^[0-9a-f]{64}$/);
    assert.notEqual(fairnessKeyOf(long), fairnessKeyOf(`${long.slice(1)}q`));
    assert.deepEqual(deliveryPriority('project-a', 'FALL_DETECTION'), { priorityKey: 1, fairnessKey: 'project-a' });
    assert.deepEqual(deliveryPriority('project-a', 'VITAL_THRESHOLD'), { priorityKey: 3, fairnessKey: 'project-a' });
    assert.deepEqual(deliveryPriority('project-a', 'TEST'), { priorityKey: 5, fairnessKey: 'project-a' });
  });
});

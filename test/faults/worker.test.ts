// Faults around the worker process and the receiver: SIGKILL mid-attempt, SIGTERM mid-attempt, a receiver down.
import assert from 'node:assert/strict';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { findBreaker, findDelivery, listDeliveryAttempts } from '../../db';
import type { TestDatabase } from '../support/postgres';
import { Registrations, newProjectId } from '../support/deliveries';
import { uniqueTaskQueue } from '../support/temporal';
import {
  assertAllDelivered,
  emitEvents,
  killWorker,
  reportFigures,
  spawnWorker,
  startFaultReceiver,
  untilDelivered,
  type FaultReceiver,
  type WorkerProcess,
} from './support';
import { startTemporalAndDatabase } from '../support/setup';

const { EventType } = temporal.api.enums.v1;

/** The receiver outage; the 2 minutes by default, shorter in CI (the retry schedule below is the same). */
const RECEIVER_OUTAGE_MS = Number(process.env.FAULT_RECEIVER_OUTAGE_MS ?? 120_000);

const until = async (condition: () => boolean, what: string, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

describe('faults: the worker process and the receiver', function () {
  this.timeout(RECEIVER_OUTAGE_MS + 240_000);
  let env: TestWorkflowEnvironment;
  let database: TestDatabase;
  let registrations: Registrations;
  let receiver: FaultReceiver;
  const workers: WorkerProcess[] = [];

  before(async () => {
    [env, database] = await startTemporalAndDatabase();
    registrations = new Registrations(database.db);
  });
  beforeEach(async () => {
    receiver = await startFaultReceiver();
  });
  afterEach(async () => {
    for (const worker of workers.splice(0)) await killWorker(worker);
    await receiver?.close();
  });
  after(async () => {
    await env?.teardown();
    await database?.destroy();
  });

  /** A project registered to this test's receiver, and a worker process factory on a queue of its own. */
  async function scenario() {
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const taskQueue = uniqueTaskQueue('faults');
    const start = () => {
      const worker = spawnWorker({
        DATABASE_URL: database.url,
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        WEBHOOK_SECRET_KEY: registrations.key,
        ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
        WEBHOOK_TIMEOUT_MS: '3000',
        DELIVERY_INITIAL_INTERVAL_MS: '200',
        DELIVERY_MAX_INTERVAL_MS: '1000',
        // Five times the SIGTERM scenario's 2 s answer: the drained attempt finishes however loaded the machine.
        WORKER_SHUTDOWN_GRACE_MS: '10000',
      });
      workers.push(worker);
      return worker;
    };
    return { projectId, secret, taskQueue, start };
  }

  it('SIGKILL of the worker during fast-path (local) attempts, then a restart: every event arrives, signed', async () => {
    const { projectId, secret, taskQueue, start } = await scenario();
    // Held until after the kill, so no answer races it: each request the worker had in flight is cut off.
    receiver.hold();
    const first = start();
    const ids = await emitEvents(env.client, projectId, 10, taskQueue);
    await until(() => receiver.inFlight() > 0, 'an attempt in flight');
    first.child.kill('SIGKILL');
    assert.equal((await first.exited).signal, 'SIGKILL');
    const killedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 300));
    receiver.release();
    assert.equal(receiver.requests.length, 0, 'every attempt in flight was cut off by the kill');
    start();
    await untilDelivered(receiver, ids);
    const figures = assertAllDelivered(receiver, ids, secret);
    reportFigures('worker SIGKILL', { ...figures, recoverMs: Date.now() - killedAt });
    // The killed worker held first attempts as local activities: their workflow tasks timed out, and the restarted
    // worker ran them again from the start of the history, under the same X-Webhook-Id.
    let timedOut = 0;
    for (const id of ids) {
      const { events } = await env.client.workflow.getHandle(id).fetchHistory();
      const types = (events ?? []).map((event) => event.eventType);
      if (types.includes(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)) timedOut += 1;
    }
    assert.ok(timedOut > 0, 'the kill interrupted a fast-path attempt');
  });

  it('SIGTERM during an attempt: the attempt finishes, the worker exits 0, nothing is lost or doubled', async () => {
    const { projectId, secret, taskQueue, start } = await scenario();
    receiver.delayMs = 2_000;
    const first = start();
    const ids = await emitEvents(env.client, projectId, 5, taskQueue);
    await until(() => receiver.inFlight() > 0, 'an attempt in flight');
    const answeredBefore = receiver.requests.length;
    first.child.kill('SIGTERM');
    const exit = await first.exited;
    assert.equal(exit.code, 0, first.output());
    assert.equal(receiver.inFlight(), 0, 'no attempt was cut off');
    assert.ok(receiver.requests.length > answeredBefore, 'the attempt in flight at SIGTERM was answered');
    const stoppedAt = Date.now();
    receiver.delayMs = 0;
    start();
    await untilDelivered(receiver, ids);
    const figures = assertAllDelivered(receiver, ids, secret);
    reportFigures('worker SIGTERM', { ...figures, recoverMs: Date.now() - stoppedAt });
  });

  it(`the receiver down for ${RECEIVER_OUTAGE_MS / 1000} s, then up: the backlog arrives`, async () => {
    const { projectId, secret, taskQueue, start } = await scenario();
    start();
    await receiver.down();
    const ids = await emitEvents(env.client, projectId, 10, taskQueue);
    await new Promise((resolve) => setTimeout(resolve, RECEIVER_OUTAGE_MS));
    // The worker kept trying while the port was closed: each event's attempts were refused and logged, and the
    // refusals opened the registration's breaker (so the backlog waits instead of hammering a dead port).
    for (const id of ids) {
      const attempts = await listDeliveryAttempts(database.db, (await findDelivery(database.db, projectId, id))!);
      assert.ok(
        attempts.length > 0 && attempts.every((attempt) => attempt.errorCode === 'ECONNREFUSED'),
        `${id}: attempts refused while down: ${JSON.stringify(attempts)}`,
      );
    }
    const { id: registrationId } = await database
      .db('webhook_registrations')
      .where({ project_id: projectId })
      .first<{ id: string }>();
    const breaker = await findBreaker(database.db, registrationId);
    assert.ok(breaker?.openUntil, `the refusals opened the breaker: ${JSON.stringify(breaker)}`);
    assert.equal(breaker.lastFailure?.message, 'Receiver unreachable: ECONNREFUSED');
    await receiver.up();
    const upAt = Date.now();
    await untilDelivered(receiver, ids);
    const figures = assertAllDelivered(receiver, ids, secret);
    reportFigures('receiver down', { ...figures, recoverMs: Date.now() - upAt });
  });
});

// The worker as production starts it: worker/main.ts in a process of its own, through startWorker (worker/start.ts),
// so what it wires is under test: the breaker resumer, the secret sweep, the delivery-log retention, the metrics
// endpoint and the graceful stop. Real dev server, real PostgreSQL, a real receiver checking signatures.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { freePort } from '../../dev/ports';
import { emitWebhookEvent, eventWorkflowId } from '../../client/emit';
import type { DeliverWebhookEventResult } from '../../common/contract';
import { recordFailure, upsertDelivery } from '../../db';
import { killWorker, spawnWorker, type WorkerProcess } from '../faults/support';
import { Registrations, fallEvent, newProjectId } from '../support/deliveries';
import { decodeOnlyPayloadCodec } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import type { TestDatabase } from '../support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { startTemporalAndDatabase } from '../support/setup';
import { uniqueTaskQueue } from '../support/temporal';

describe('the worker process, started through worker/start.ts', function () {
  this.timeout(180_000);
  let env: TestWorkflowEnvironment;
  let database: TestDatabase;
  let registrations: Registrations;
  let receiver: TestReceiver;
  let worker: WorkerProcess | undefined;

  before(async () => {
    [env, database] = await startTemporalAndDatabase();
    registrations = new Registrations(database.db);
    receiver = await startTestReceiver();
  });
  after(async () => {
    await killWorker(worker);
    await receiver?.close();
    await env?.teardown();
    await database?.destroy();
  });

  const registrationOf = async (projectId: string) =>
    (await database.db('webhook_registrations').where({ project_id: projectId }).first<{ id: string }>()).id;

  it('wakes a delivery waiting for an open breaker, sweeps expired secrets and old log entries, serves metrics, stops on SIGTERM', async () => {
    const db = database.db;
    // A registration whose rotation overlap ended: the sweep erases its previous secret.
    const rotated = newProjectId();
    await registrations.register(rotated, receiver.url, ['FALL_DETECTION']);
    await db('webhook_registrations')
      .where({ project_id: rotated })
      .update({
        previous_secret_sealed: db.ref('secret_sealed'),
        previous_secret_expires_at: db.raw(`now() - interval '1 minute'`),
      });
    // A delivery-log entry created a day past DELIVERY_LOG_RETENTION_DAYS (30): its day dropped at start.
    const old = `webhook-event-${randomUUID()}`;
    await upsertDelivery(db, { id: old, projectId: rotated, type: 'FALL_DETECTION', workflowId: old }, 'delivered');
    await db('deliveries')
      .where({ id: old })
      .update({ created_at: db.raw(`now() - interval '32 days'`) });
    // A registration whose breaker is open for 10 min: its delivery waits for the resumer, not a timer (15 min).
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const registrationId = await registrationOf(projectId);
    await recordFailure(
      db,
      registrationId,
      { failureThreshold: 1, openMs: 600_000, maxOpenMs: 600_000 },
      { message: 'Receiver answered HTTP 500', statusCode: 500 },
    );

    const metricsPort = await freePort();
    const taskQueue = uniqueTaskQueue('worker-start');
    worker = spawnWorker({
      DATABASE_URL: database.url,
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      WEBHOOK_SECRET_KEY: registrations.key,
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      SECRET_SWEEP_INTERVAL_MS: '1000',
      WORKER_METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'info',
    });
    const running = worker;

    // The worker seals its payloads with the development key ring (DATA_DIR): this client reads them.
    const client = new Client({
      connection: env.connection,
      dataConverter: { payloadCodecs: [decodeOnlyPayloadCodec(database.db)] },
    });
    const eventId = `worker-start-${randomUUID()}`;
    await emitWebhookEvent(client, fallEvent(projectId), { eventId, taskQueue });
    const workflowId = eventWorkflowId(eventId);
    await eventually(
      'the delivery listed as waiting for the breaker',
      async () => (await db('webhook_breaker_waiters').where({ registration_id: registrationId })).length === 1,
      120_000,
    );
    assert.equal(receiver.requests.length, 0, 'nothing sent while open');
    await db('webhook_circuit_breakers').where({ registration_id: registrationId }).update({ open_until: db.fn.now() });
    // The resumer probes within a second or two; its safety timer would take 7.5 to 15 minutes.
    await eventually('the probe', () => receiver.requests.length === 1, 30_000);
    const result = (await client.workflow.getHandle(workflowId).result()) as DeliverWebhookEventResult;
    assert.equal(result.status, 'delivered', running.output());
    const [request] = receiver.requests;
    assert.equal(receiver.requests.length, 1);
    assert.equal(request!.headers['x-webhook-id'], workflowId);
    assert.ok(independentSignatureValid(secret, request!));
    const history = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    assert.ok(
      history.some((event) => event.workflowExecutionSignaledEventAttributes),
      "woken by the worker's resumer, not its safety timer",
    );

    await eventually('the expired previous secret erased', async () => {
      const row = await db('webhook_registrations')
        .where({ project_id: rotated })
        .first<{ previous_secret_sealed: string | null }>('previous_secret_sealed');
      return row.previous_secret_sealed === null;
    });
    assert.equal((await db('deliveries').where({ id: old })).length, 0, 'the old log entry dropped with its day');

    const metrics = await eventually('the metrics endpoint', () =>
      fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(
        (response) => (response.ok ? response.text() : undefined),
        () => undefined,
      ),
    );
    // The activities' counters through Temporal's meter, for this worker's queue: the one delivery, delivered.
    const delivered = metrics
      .split('\n')
      .find((line) => line.startsWith('webhook_deliveries{') && line.includes(`taskQueue="${taskQueue}"`));
    assert.match(delivered ?? '', /outcome="delivered".*\} 1$/, metrics.slice(0, 2_000));
    assert.match(metrics, /temporal_/, "the SDK's own metrics");

    running.child.kill('SIGTERM');
    assert.equal((await running.exited).code, 0, running.output());
  });
});

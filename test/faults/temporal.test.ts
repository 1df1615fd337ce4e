// Faults around Temporal: the dev server (with its SQLite file) killed and restarted while events are pending, and
// the API started while Temporal is down.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { startApi, type RunningApi } from '../../api';
import { loadConfig } from '../../common/config';
import { startTemporal } from '../../dev/temporal-dev-server';
import { freePort } from '../../dev/ports';
import type { RunningPart } from '../../dev/processes';
import * as store from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { Registrations, newProjectId } from '../support/deliveries';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';
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

const silent = pino({ level: 'silent' });

describe('faults: Temporal down', function () {
  this.timeout(300_000);
  let database: TestDatabase;
  let registrations: Registrations;
  let receiver: FaultReceiver;
  let dataDir: string;
  let temporal: (RunningPart & { address: string }) | undefined;
  let grpcPort: number;
  let uiPort: number;
  const workers: WorkerProcess[] = [];
  let api: RunningApi | undefined;

  const startDevServer = async () => {
    const config = loadConfig({
      DEV_TEMPORAL_PORT: String(grpcPort),
      DEV_TEMPORAL_UI_PORT: String(uiPort),
      TEMPORAL_CLI_PATH: process.env.TEMPORAL_CLI_PATH ?? '',
    });
    temporal = await startTemporal(dataDir, config, silent);
    return temporal;
  };

  before(async () => {
    database = await createTestDatabase();
    registrations = new Registrations(database.db);
  });
  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-faults-temporal-'));
    [grpcPort, uiPort] = [await freePort(), await freePort()];
    receiver = await startFaultReceiver();
  });
  afterEach(async () => {
    await api?.close();
    api = undefined;
    for (const worker of workers.splice(0)) await killWorker(worker);
    await temporal?.stop();
    temporal = undefined;
    await receiver?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  after(async () => {
    await database?.destroy();
  });

  const worker = (taskQueue: string) => {
    const started = spawnWorker({
      DATABASE_URL: database.url,
      TEMPORAL_ADDRESS: `127.0.0.1:${grpcPort}`,
      TEMPORAL_TASK_QUEUE: taskQueue,
      WEBHOOK_SECRET_KEY: registrations.key,
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      WEBHOOK_TIMEOUT_MS: '3000',
      DELIVERY_INITIAL_INTERVAL_MS: '200',
      DELIVERY_MAX_INTERVAL_MS: '1000',
    });
    workers.push(started);
    return started;
  };

  it('the dev server killed (SIGKILL) and restarted on its SQLite file while events are pending: all arrive', async () => {
    const running = await startDevServer();
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const taskQueue = uniqueTaskQueue('faults-temporal');
    worker(taskQueue);
    const connection = await Connection.connect({ address: running.address });
    const client = new Client({ connection });
    await receiver.down(); // the events stay pending in Temporal's history
    let ids: string[];
    try {
      ids = await emitEvents(client, projectId, 10, taskQueue);
    } finally {
      await connection.close();
    }
    assert.ok(running.pid, 'the dev server runs as a child process');
    process.kill(running.pid, 'SIGKILL');
    await running.stop(); // reaps it; it is already dead
    temporal = undefined;
    const killedAt = Date.now();
    await receiver.up();
    await startDevServer();
    await untilDelivered(receiver, ids);
    const figures = assertAllDelivered(receiver, ids, secret);
    reportFigures('Temporal killed and restarted', { ...figures, recoverMs: Date.now() - killedAt });
  });

  it('the API started while Temporal is down: CRUD works, the test endpoint answers 503, then recovers', async () => {
    const projectId = newProjectId();
    await store.addProject(database.db, projectId);
    await store.addMember(database.db, projectId, 'alice');
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: database.url,
        TEMPORAL_ADDRESS: `127.0.0.1:${grpcPort}`,
        TEMPORAL_TASK_QUEUE: uniqueTaskQueue('faults-api'),
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: registrations.key,
        TEMPORAL_CONNECT_TIMEOUT_MS: '1000',
        // The worker process bundles the workflows from sources first; the test call waits for it.
        TEST_DELIVERY_WAIT_MS: '90000',
      },
      { database: true, auth: true },
    );
    api = await startApi(config, silent);
    const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
    const headers = { ...bearer(hsToken('alice')), 'content-type': 'application/json' };
    const registered = await fetch(`${base}/webhooks/register`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ projectId, url: receiver.url, types: ['FALL_DETECTION'] }),
    });
    assert.equal(registered.status, 201, await registered.clone().text());
    const got = await fetch(`${base}/webhooks/project/${projectId}`, { headers });
    assert.equal(got.status, 200);
    const testWhileDown = await fetch(`${base}/webhooks/test/project/${projectId}`, { method: 'POST', headers });
    assert.equal(testWhileDown.status, 503, await testWhileDown.clone().text());
    assert.equal(testWhileDown.headers.get('retry-after'), '5');
    assert.match(((await testWhileDown.json()) as { detail: string }).detail, /^Temporal is not answering/);
    assert.equal((await fetch(`${base}/readyz`)).status, 503);

    await startDevServer();
    const upAt = Date.now();
    worker(config.TEMPORAL_TASK_QUEUE);
    const recovered = await fetch(`${base}/webhooks/test/project/${projectId}`, { method: 'POST', headers });
    const outcome = (await recovered.json()) as { delivered: boolean; statusCode: number };
    assert.equal(recovered.status, 200, JSON.stringify(outcome));
    assert.equal(outcome.delivered, true);
    assert.equal(receiver.requests.length, 1, 'the TEST event arrived once');
    reportFigures('API started while Temporal is down', {
      emitted: 1,
      delivered: 1,
      duplicates: 0,
      lost: 0,
      recoverMs: Date.now() - upAt,
    });
  });
});

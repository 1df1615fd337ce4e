// PostgreSQL stopped mid-load, then started again: deliveries pause and resume, the API answers 503 meanwhile.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { startApi, type RunningApi } from '../../api';
import { loadConfig } from '../../common/config';
import { createDb, migrateToLatest } from '../../db';
import { startEmbeddedPostgres, type RunningPostgres } from '../../dev/postgres';
import { freePort } from '../../dev/ports';
import { Registrations, newProjectId } from '../support/deliveries';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';
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
import { startBoth } from '../support/setup';

/** The 30 s outage by default. */
const POSTGRES_OUTAGE_MS = Number(process.env.FAULT_POSTGRES_OUTAGE_MS ?? 30_000);

describe('faults: PostgreSQL down', function () {
  this.timeout(POSTGRES_OUTAGE_MS + 240_000);
  let env: TestWorkflowEnvironment;
  let postgres: RunningPostgres | undefined;
  let dataDir: string;
  let port: number;
  let receiver: FaultReceiver;
  let worker: WorkerProcess | undefined;
  let api: RunningApi | undefined;

  const startPostgres = async () => (postgres = await startEmbeddedPostgres({ dataDir, port, persistent: true }));

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-faults-pg-'));
    port = await freePort();
    [env] = await startBoth(
      createLocalEnvironment(),
      startPostgres(),
      (e) => e.teardown(),
      (p) => p.stop(),
    );
    receiver = await startFaultReceiver();
  });
  after(async () => {
    await api?.close();
    await killWorker(worker);
    await receiver?.close();
    await postgres?.stop();
    await env?.teardown();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`stopped for ${POSTGRES_OUTAGE_MS / 1000} s mid-load: the API answers 503 with Retry-After, readiness says so, every event arrives`, async () => {
    const databaseUrl = postgres!.url;
    const db = createDb(databaseUrl, { max: 2 });
    const registrations = new Registrations(db);
    const projectId = newProjectId();
    const taskQueue = uniqueTaskQueue('faults-pg');
    let secret: string;
    try {
      await migrateToLatest(db);
      secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
      await db.table('project_members').insert({ project_id: projectId, user_id: 'alice' });
    } finally {
      await db.destroy();
    }
    worker = spawnWorker({
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      WEBHOOK_SECRET_KEY: registrations.key,
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      WEBHOOK_TIMEOUT_MS: '3000',
      DELIVERY_INITIAL_INTERVAL_MS: '200',
      DELIVERY_MAX_INTERVAL_MS: '1000',
      DB_CONNECT_TIMEOUT_MS: '1000',
      DB_ACQUIRE_TIMEOUT_MS: '2000',
    });
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: databaseUrl,
        TEMPORAL_ADDRESS: env.address,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: registrations.key,
        DB_CONNECT_TIMEOUT_MS: '1000',
        DB_ACQUIRE_TIMEOUT_MS: '2000',
      },
      { database: true, auth: true },
    );
    api = await startApi(config, pino({ level: 'silent' }));
    const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
    const headers = bearer(hsToken('alice'));

    receiver.delayMs = 300;
    const first = await emitEvents(env.client, projectId, 10, taskQueue);
    await postgres!.stop();
    postgres = undefined;
    const stoppedAt = Date.now();
    const during = await emitEvents(env.client, projectId, 10, taskQueue);

    const refused = await fetch(`${base}/webhooks/project/${projectId}`, { headers });
    assert.equal(refused.status, 503, await refused.clone().text());
    assert.equal(refused.headers.get('retry-after'), '5');
    assert.equal(refused.headers.get('content-type')?.split(';')[0], 'application/problem+json');
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 503);
    assert.equal(((await ready.json()) as { checks: { postgres: string } }).checks.postgres, 'down');

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, POSTGRES_OUTAGE_MS - (Date.now() - stoppedAt))));
    const arrivedDuringOutage = new Set(receiver.requests.map((r) => r.headers['x-webhook-id']));
    assert.ok(
      during.every((id) => !arrivedDuringOutage.has(id)),
      'no event emitted during the outage was delivered without the database',
    );
    await startPostgres();
    const upAt = Date.now();
    receiver.delayMs = 0;
    const ids = [...first, ...during];
    await untilDelivered(receiver, ids);
    const figures = assertAllDelivered(receiver, ids, secret);
    assert.equal((await fetch(`${base}/webhooks/project/${projectId}`, { headers })).status, 200);
    reportFigures('PostgreSQL stopped', { ...figures, recoverMs: Date.now() - upAt });
  });
});

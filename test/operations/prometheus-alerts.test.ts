// The shipped alerting rules in a real Prometheus (Debian's), scraping a running stack: the API (startApi, its
// /metrics behind METRICS_TOKEN) and a worker process (worker/main.ts, its Temporal meter on WORKER_METRICS_PORT).
// A receiver goes down: the failing-endpoint and breaker alerts reach `firing` in Prometheus's own API; it comes back
// and they resolve. The rules are the shipped ones with their `for:` durations shortened (alertRulesForTest).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { startApi, type RunningApi } from '../../api/server';
import { emitWebhookEvent } from '../../client/emit';
import { loadConfig } from '../../common/config';
import { freePort } from '../../dev/ports';
import { killWorker, spawnWorker, type WorkerProcess } from '../faults/support';
import { alertRulesForTest, startPrometheus, type RunningPrometheus } from '../support/prometheus';
import { Registrations, fallEvent, newProjectId } from '../support/deliveries';
import { decodeOnlyPayloadCodec } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import type { TestDatabase } from '../support/postgres';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { startTemporalAndDatabase } from '../support/setup';
import { uniqueTaskQueue } from '../support/temporal';

const METRICS_TOKEN = `metrics-${randomUUID()}`;

interface PrometheusAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}

describe('alerting rules in a real Prometheus scraping the API and a worker', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  let database: TestDatabase;
  let receiver: TestReceiver;
  let worker: WorkerProcess | undefined;
  let api: RunningApi | undefined;
  let prometheus: RunningPrometheus | undefined;
  let dir: string;

  before(async () => {
    [env, database] = await startTemporalAndDatabase();
    receiver = await startTestReceiver();
    dir = mkdtempSync(join(tmpdir(), 'prometheus-alerts-'));
  });
  after(async () => {
    await prometheus?.stop();
    await killWorker(worker);
    await api?.close();
    await receiver?.close();
    await env?.teardown();
    await database?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('fires the failing-endpoint and breaker alerts for a receiver that is down, and resolves them when it is back', async () => {
    const registrations = new Registrations(database.db);
    const projectId = newProjectId();
    await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    receiver.fallback = { status: 500 };

    const taskQueue = uniqueTaskQueue('prometheus-alerts');
    const workerMetricsPort = await freePort();
    worker = spawnWorker({
      DATABASE_URL: database.url,
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      WEBHOOK_SECRET_KEY: registrations.key,
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      WORKER_METRICS_PORT: String(workerMetricsPort),
      // Retries every 200 ms; the breaker opens after 3 failures for 1 s, so it probes (and closes) within seconds.
      DELIVERY_INITIAL_INTERVAL_MS: '200',
      DELIVERY_BACKOFF_COEFFICIENT: '1',
      DELIVERY_MAX_INTERVAL_MS: '200',
      BREAKER_FAILURE_THRESHOLD: '3',
      BREAKER_OPEN_MS: '1000',
      BREAKER_MAX_OPEN_MS: '1000',
      BREAKER_RESUME_SPREAD_MS: '0',
    });
    api = await startApi(
      loadConfig(
        {
          PORT: '0',
          DATABASE_URL: database.url,
          JWT_SECRET: 'prometheus-alerts-jwt-secret-0123456789',
          WEBHOOK_SECRET_KEY: registrations.key,
          METRICS_TOKEN,
        },
        { database: true, auth: true },
      ),
      pino({ level: 'silent' }),
      { sendTestEvent: () => Promise.reject(new Error('not used')) },
    );

    prometheus = await startPrometheus({
      dir,
      api: { port: (api.server.address() as AddressInfo).port, metricsToken: METRICS_TOKEN },
      workerMetricsPort,
      rules: alertRulesForTest('1s'),
    });
    const query = async <T>(path: string): Promise<T | undefined> => {
      const reply = await prometheus!.get<T>(path);
      return reply?.status === 'success' ? reply.data : undefined;
    };
    const alerts = async () => (await query<{ alerts: PrometheusAlert[] }>('/api/v1/alerts'))?.alerts ?? [];
    const firing = async (alertname: string) =>
      (await alerts()).some(
        (a) => a.labels.alertname === alertname && a.labels.project === projectId && a.state === 'firing',
      );

    const client = new Client({
      connection: env.connection,
      dataConverter: { payloadCodecs: [decodeOnlyPayloadCodec(database.db)] },
    });
    await emitWebhookEvent(client, fallEvent(projectId), { eventId: randomUUID(), taskQueue });
    await receiver.waitForRequests(3, 30_000);

    await eventually('WebhookEndpointFailing firing', () => firing('WebhookEndpointFailing'), 30_000);
    await eventually('WebhookCircuitBreakerOpen firing', () => firing('WebhookCircuitBreakerOpen'), 30_000);

    receiver.fallback = { status: 200 };
    await eventually(
      'both alerts resolved',
      async () =>
        !(await alerts()).some(
          (a) =>
            ['WebhookEndpointFailing', 'WebhookCircuitBreakerOpen'].includes(a.labels.alertname!) &&
            a.labels.project === projectId,
        ),
      30_000,
    );

    // The series the other rules read, as Prometheus stored them from these two targets: the names the rules spell,
    // the latency in seconds buckets (le="30"), the SDK's slots and schedule-to-start.
    // The alerts resolve on the API's gauges, which the probe's success resets before its attempt ends: the worker's
    // delivered counter reaches Prometheus at a later scrape, so each series is waited for, not expected at once.
    const series = async (match: string) =>
      (await query<Record<string, string>[]>(`/api/v1/series?match[]=${encodeURIComponent(match)}`)) ?? [];
    const stored = (match: string) =>
      eventually(match, async () => (await series(match)).length > 0, 15_000).catch(() => false);
    for (const match of [
      'webhook_delivery_attempts{job="webhooks-worker",type="FALL_DETECTION",result="failed"}',
      'webhook_deliveries{job="webhooks-worker",type="FALL_DETECTION",outcome="delivered"}',
      'webhook_delivery_latency_bucket{job="webhooks-worker",type="FALL_DETECTION",le="30"}',
      'temporal_worker_task_slots_available{job="webhooks-worker",worker_type="ActivityWorker"}',
      'temporal_workflow_task_schedule_to_start_latency_bucket{job="webhooks-worker",le="1000"}',
      'http_requests_total{job="webhooks-api"}',
    ])
      assert.ok(await stored(match), `${match}\n${prometheus.output()}\n${worker.output()}`);
  });
});

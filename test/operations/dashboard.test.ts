// The shipped Grafana dashboard (deploy/grafana/) against the series a running stack exports: an API (startApi, its
// /metrics behind METRICS_TOKEN) and a worker process (worker/main.ts, its Temporal meter on WORKER_METRICS_PORT),
// after deliveries that succeed, fail, open a breaker and give up. Every series a panel names must be in one of the two
// scrapes, and every panel's query must run in a real Prometheus (Debian's) scraping the same two targets.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { parse } from 'yaml';
import { startApi, type RunningApi } from '../../api/server';
import { emitWebhookEvent } from '../../client/emit';
import { loadConfig } from '../../common/config';
import { freePort } from '../../dev/ports';
import { killWorker, spawnWorker, type WorkerProcess } from '../faults/support';
import {
  DASHBOARD_PATH,
  GRAFANA_DEPLOY_DIR,
  dashboardQueries,
  exposedSeriesNames,
  loadDashboard,
  queriesNamingUnexportedSeries,
  seriesNamesOf,
  withWindow,
  type Dashboard,
} from '../support/dashboard';
import { Registrations, USER, fallEvent, newProjectId, vitalPayload } from '../support/deliveries';
import { decodeOnlyPayloadCodec } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { startPrometheus, type PrometheusReply, type RunningPrometheus } from '../support/prometheus';
import type { TestDatabase } from '../support/postgres';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { startTemporalAndDatabase } from '../support/setup';
import { uniqueTaskQueue } from '../support/temporal';

const METRICS_TOKEN = `metrics-${randomUUID()}`;

/** The panels an operator reads first: each must show data after a few deliveries, not only parse. */
const CORE_PANELS = [
  'Deliveries per second by type and outcome',
  'Delivery latency by type, emit to 2xx',
  'Attempts per delivery by type',
  'Circuit breakers open',
  'Deliveries given up by type',
  'Free task slots by worker and kind',
  'Schedule-to-start (p95)',
];

describe('Grafana dashboard (deploy/grafana)', () => {
  const dashboard = loadDashboard();

  it('reads series names out of PromQL the way Prometheus would select them', () => {
    assert.deepEqual(
      seriesNamesOf(
        'histogram_quantile(0.99, sum by (type, le) (rate(webhook_delivery_latency_bucket{type!~"TEST|x"}[$__rate_interval])))',
      ),
      ['webhook_delivery_latency_bucket'],
    );
    assert.deepEqual(
      seriesNamesOf(
        '(sum without (instance) (increase(a_total[5m])) > 0) or count(b unless b offset 1h30m) or on (type) vector(1e3) * c:rule',
      ),
      ['a_total', 'b', 'c:rule'],
    );
    assert.deepEqual(seriesNamesOf('sum(x) by (le) / ignoring(le) group_left y'), ['x', 'y']);
    assert.deepEqual(seriesNamesOf('z unless z offset $__rate_interval or z[${__range}]'), ['z']);
    assert.throws(() => seriesNamesOf('{__name__=~"webhook_.*"}'), /not by __name__/);
  });

  it('has every panel the issue asks for, each on the datasource variable, with its queries', () => {
    const titles = dashboardQueries(dashboard).map((q) => q.panel);
    for (const title of CORE_PANELS) assert.ok(titles.includes(title), `panel ${title}`);
    const variable = dashboard.templating?.list.find((v) => v.name === 'datasource');
    assert.deepEqual([variable?.type, variable?.query], ['datasource', 'prometheus']);
    const walk = (panels: Dashboard['panels']): Dashboard['panels'] =>
      panels.flatMap((p) => [p, ...walk(p.panels ?? [])]);
    for (const panel of walk(dashboard.panels).filter((p) => p.type !== 'row')) {
      assert.deepEqual(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, panel.title);
      assert.ok(panel.targets?.length, `${panel.title} has queries`);
      assert.ok(panel.description, `${panel.title} says what it shows`);
    }
    const ids = walk(dashboard.panels).map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  });

  it('is provisioned: a Prometheus datasource and a file provider reading the dashboards folder', () => {
    const datasources = parse(
      readFileSync(join(GRAFANA_DEPLOY_DIR, 'provisioning', 'datasources', 'prometheus.yml'), 'utf8'),
    ) as { apiVersion: number; datasources: { type: string; url: string; isDefault?: boolean }[] };
    assert.equal(datasources.apiVersion, 1);
    assert.deepEqual(
      datasources.datasources.map((d) => [d.type, d.url, d.isDefault]),
      [['prometheus', 'http://prometheus:9090', true]],
    );
    const providers = parse(
      readFileSync(join(GRAFANA_DEPLOY_DIR, 'provisioning', 'dashboards', 'webhooks.yml'), 'utf8'),
    ) as { apiVersion: number; providers: { type: string; options: { path: string } }[] };
    assert.equal(providers.apiVersion, 1);
    assert.deepEqual(
      providers.providers.map((p) => [p.type, p.options.path]),
      [['file', '/etc/grafana/dashboards']],
    );
    assert.ok(DASHBOARD_PATH.startsWith(join(GRAFANA_DEPLOY_DIR, 'dashboards')));
  });
});

describe('Grafana dashboard against a running API and worker, in a real Prometheus', function () {
  this.timeout(120_000);
  const dashboard = loadDashboard();
  let env: TestWorkflowEnvironment;
  let database: TestDatabase;
  let healthy: TestReceiver;
  let failing: TestReceiver;
  let worker: WorkerProcess | undefined;
  let api: RunningApi | undefined;
  let prometheus: RunningPrometheus | undefined;
  let dir: string;
  /** Every sample name the API's /metrics and the worker's endpoint served while the deliveries ran. */
  const exported = new Set<string>();

  const query = async <T>(path: string): Promise<PrometheusReply<T>> =>
    (await prometheus!.get<T>(path)) ?? { status: 'no answer' };

  before(async () => {
    [env, database] = await startTemporalAndDatabase();
    healthy = await startTestReceiver();
    failing = await startTestReceiver();
    failing.fallback = { status: 500 };
    dir = mkdtempSync(join(tmpdir(), 'grafana-dashboard-'));

    const registrations = new Registrations(database.db);
    const healthyProject = newProjectId();
    const failingProject = newProjectId();
    await registrations.register(healthyProject, healthy.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    await registrations.register(failingProject, failing.url, ['FALL_DETECTION']);

    const taskQueue = uniqueTaskQueue('grafana-dashboard');
    const workerMetricsPort = await freePort();
    worker = spawnWorker({
      DATABASE_URL: database.url,
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      WEBHOOK_SECRET_KEY: registrations.key,
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      WORKER_METRICS_PORT: String(workerMetricsPort),
      // The failing receiver: retries every 200 ms, its breaker opens after 2 failures, and it is given up after 4 s.
      WEBHOOK_TIMEOUT_MS: '200',
      DELIVERY_INITIAL_INTERVAL_MS: '200',
      DELIVERY_BACKOFF_COEFFICIENT: '1',
      DELIVERY_MAX_INTERVAL_MS: '200',
      DELIVERY_GIVE_UP_AFTER_MS: '4000',
      BREAKER_FAILURE_THRESHOLD: '2',
      BREAKER_OPEN_MS: '500',
      BREAKER_MAX_OPEN_MS: '500',
      BREAKER_RESUME_SPREAD_MS: '0',
    });
    api = await startApi(
      loadConfig(
        {
          PORT: '0',
          DATABASE_URL: database.url,
          JWT_SECRET: 'grafana-dashboard-jwt-secret-0123456789',
          WEBHOOK_SECRET_KEY: registrations.key,
          METRICS_TOKEN,
        },
        { database: true, auth: true },
      ),
      pino({ level: 'silent' }),
      { sendTestEvent: () => Promise.reject(new Error('not used')) },
    );
    const apiMetrics = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}/metrics`;
    const workerMetrics = `http://127.0.0.1:${workerMetricsPort}/metrics`;

    prometheus = await startPrometheus({
      dir,
      api: { port: (api.server.address() as AddressInfo).port, metricsToken: METRICS_TOKEN },
      workerMetricsPort,
    });

    /** Scrapes both targets as Prometheus does and keeps every sample name; returns the two texts. */
    const scrape = async () => {
      const [fromApi, fromWorker] = await Promise.all([
        fetch(apiMetrics, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }).then((r) => r.text()),
        fetch(workerMetrics).then((r) => r.text()),
      ]);
      for (const name of [...exposedSeriesNames(fromApi), ...exposedSeriesNames(fromWorker)]) exported.add(name);
      return { fromApi, fromWorker };
    };

    // Two waves a few scrapes apart, so the counters have risen between samples (a rate over one sample is none).
    const client = new Client({
      connection: env.connection,
      dataConverter: { payloadCodecs: [decodeOnlyPayloadCodec(database.db)] },
    });
    const emit = (event: Parameters<typeof emitWebhookEvent>[1]) =>
      emitWebhookEvent(client, event, { eventId: randomUUID(), taskQueue });
    const vitalEvent = {
      projectId: healthyProject,
      webhookType: 'VITAL_THRESHOLD' as const,
      userUUID: USER,
      payload: vitalPayload,
    };
    const firstWave = [
      await emit(fallEvent(healthyProject)),
      await emit(vitalEvent),
      await emit(fallEvent(failingProject)),
    ];
    let lastApiScrape = '';
    await eventually(
      'the breaker open in /metrics',
      async () =>
        (lastApiScrape = (await scrape()).fromApi).includes(
          `webhook_circuit_breaker_open{project="${failingProject}"} 1`,
        ),
      30_000,
    ).catch((error: Error) => {
      const seen = lastApiScrape.split('\n').filter((l) => l.startsWith('webhook_'));
      throw new Error(`${error.message}: ${failing.requests.length} attempts\n${seen.join('\n')}\n${worker?.output()}`);
    });
    await Promise.all(
      firstWave.map((id) =>
        client.workflow
          .getHandle(id)
          .result()
          .catch(() => undefined),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const secondWave = [
      await emit(fallEvent(healthyProject)),
      await emit(vitalEvent),
      await emit(fallEvent(healthyProject)),
    ];
    await Promise.all(secondWave.map((id) => client.workflow.getHandle(id).result()));
    await eventually(
      'a give-up and the delivered latency in the worker’s metrics',
      async () => {
        const { fromWorker } = await scrape();
        return (
          /^webhook_deliveries\{[^}]*outcome="failed"/m.test(fromWorker) &&
          /^webhook_delivery_latency_bucket\{/m.test(fromWorker)
        );
      },
      30_000,
    );
    // Prometheus has sampled the end state at least twice.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
  });

  after(async () => {
    await prometheus?.stop();
    await killWorker(worker);
    await api?.close();
    await healthy?.close();
    await failing?.close();
    await env?.teardown();
    await database?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('names only series the API and the worker export', () => {
    const exportedList = [...exported].sort().join(', ');
    assert.deepEqual(queriesNamingUnexportedSeries(dashboard, exported), [], `the targets export: ${exportedList}`);
    const named = new Set(dashboardQueries(dashboard).flatMap((q) => seriesNamesOf(q.expr)));
    assert.ok(named.size >= 8, `the dashboard reads ${[...named].join(', ')}`);
  });

  it('would name a panel whose series does not exist', () => {
    const misspelt = structuredClone(dashboard);
    const target = misspelt.panels.flatMap((p) => [p, ...(p.panels ?? [])]).find((p) => p.targets?.length)!
      .targets![0]!;
    // A name nothing exports: `_total` would be exported by the API when other suites' in-process workers have run.
    target.expr = target.expr.replace('webhook_deliveries', 'webhook_deliveries_misspelt');
    assert.deepEqual(
      queriesNamingUnexportedSeries(misspelt, exported).map((q) => q.missing),
      [['webhook_deliveries_misspelt']],
    );
  });

  it('runs every panel query in Prometheus without an error, and the core panels show data', async () => {
    const empty: string[] = [];
    for (const { panel, refId, expr } of dashboardQueries(dashboard)) {
      const reply = await query<{ result: unknown[] }>(
        `/api/v1/query?query=${encodeURIComponent(withWindow(expr, '5m'))}`,
      );
      assert.equal(reply.status, 'success', `${panel} ${refId}: ${reply.error}\n${expr}\n${prometheus!.output()}`);
      if (CORE_PANELS.includes(panel) && !reply.data?.result.length) empty.push(`${panel} ${refId}: ${expr}`);
    }
    assert.deepEqual(empty, [], worker?.output());
  });
});

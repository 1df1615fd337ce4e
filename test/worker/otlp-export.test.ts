// Metrics and logs over OTLP, for operators without Prometheus, into a real OpenTelemetry Collector (the Jaeger v2
// binary is one, built from its Go module): the API as its own process pushes the series of its /metrics (HTTP
// requests, the per-project breaker gauge read from the database, Node's defaults), and the API's and a worker's log
// lines arrive as OTLP log records, a failed attempt's carrying the trace context of its span in Jaeger. No value of
// the event's payload reaches the collector.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { freePort } from '../../dev/ports';
import { spawnEmit, spawnProcess } from '../faults/support';
import { Registrations, newProjectId } from '../support/deliveries';
import { eventually } from '../support/eventually';
import { getTrace, printedLogRecords } from './jaeger';
import { uniqueTaskQueue } from '../support/temporal';
import { useTracingStack } from './tracing-stack';

const METRICS_TOKEN = 'otlp-export-metrics-token-0123456789';

describe('metrics and logs over OTLP into a real OpenTelemetry Collector', function () {
  this.timeout(600_000);
  const stack = useTracingStack();

  it("the API's /metrics series and every process's log lines arrive, trace context and redaction kept", async () => {
    const { jaeger, env, database, receiver } = stack;
    const registrations = new Registrations(database.db);
    const projectId = newProjectId();
    await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    receiver.fallback = { status: 500 };
    const taskQueue = uniqueTaskQueue('otlp-export');
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      OTEL_LOGS_EXPORTER: 'otlp',
      // Log records leave within 200 ms, spans too, metrics every 500 ms.
      OTEL_BLRP_SCHEDULE_DELAY: '200',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_METRIC_EXPORT_INTERVAL: '500',
    };

    const apiPort = await freePort();
    stack.track(
      spawnProcess(process.execPath, ['--require', 'tsx/cjs', join(__dirname, '..', '..', 'api', 'server.ts')], {
        ...otel,
        // Asked for by name: the API's /metrics is always served, so the shared endpoint alone does not push them.
        OTEL_METRICS_EXPORTER: 'otlp',
        NODE_ENV: 'development',
        LOG_LEVEL: 'info',
        PORT: String(apiPort),
        DATABASE_URL: database.url,
        TEMPORAL_ADDRESS: env.address,
        JWT_SECRET: 'otlp-export-jwt-secret-0123456789abcdef',
        WEBHOOK_SECRET_KEY: registrations.key,
        METRICS_TOKEN,
      }),
    );
    stack.spawnWorker(registrations.key, taskQueue, {
      ...otel,
      OTEL_METRICS_EXPORTER: 'none',
      DELIVERY_INITIAL_INTERVAL_MS: '200',
      DELIVERY_MAX_INTERVAL_MS: '200',
      BREAKER_FAILURE_THRESHOLD: '1',
      BREAKER_OPEN_MS: '60000',
      BREAKER_MAX_OPEN_MS: '60000',
    });
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    await eventually(
      'the API listening',
      () =>
        fetch(`${apiUrl}/healthz`).then(
          (r) => r.ok,
          () => false,
        ),
      60_000,
    );

    // A traced emit (the CLI, as the monitoring system) of an event with a person in it; its first attempt fails.
    const userUUID = randomUUID();
    const person = { email: `otlp.${randomUUID()}@example.com`, firstName: 'Ottoline', lastName: 'Logexporter' };
    const cli = spawnEmit(
      {
        projectId: projectId,
        type: 'FALL_DETECTION',
        userUUID: userUUID,
        data: { userUUID, reasons: ['otlp-export-test'], happenedAt: new Date().toISOString(), ...person },
      },
      {
        ...otel,
        OTEL_LOGS_EXPORTER: 'none',
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      },
    );
    assert.equal((await cli.exited).code, 0, cli.output());
    await receiver.waitForRequests(1, 60_000);
    for (let i = 0; i < 3; i += 1) await fetch(`${apiUrl}/healthz`);

    // Metrics: the same series /metrics serves, as the collector's Prometheus exporter renders what it received.
    const metrics = await eventually(
      "the API's series in the collector",
      async () => {
        const text = await fetch(jaeger.metricsUrl).then((r) => r.text());
        return /^webhook_circuit_breaker_open\{[^}]*project="[^"]+"/m.test(text) &&
          /^http_requests_total\{[^}]*route="\/healthz"/m.test(text)
          ? text
          : undefined;
      },
      60_000,
    );
    const scraped = await fetch(`${apiUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }).then(
      (r) => r.text(),
    );
    assert.match(metrics, new RegExp(`^webhook_circuit_breaker_open\\{[^}]*project="${projectId}"[^}]*\\} 1$`, 'm'));
    assert.match(metrics, /^http_requests_total\{[^}]*job="webhook-api"[^}]*\} \d+/m);
    assert.match(metrics, /^http_request_duration_seconds_bucket\{[^}]*le="0\.005"[^}]*\} \d+/m);
    assert.match(metrics, /^http_request_duration_seconds_sum\{/m);
    assert.match(metrics, /^process_cpu_seconds_total\{[^}]*job="webhook-api"/m, 'a counter keeps its name');
    assert.match(metrics, /^nodejs_heap_size_total_bytes\{[^}]*job="webhook-api"/m, 'a gauge keeps its name');
    // Every series the scrape has (but for the summary-less defaults) arrived under the same name.
    const names = (text: string) =>
      new Set(
        text
          .split('\n')
          .filter((line) => line !== '' && !line.startsWith('#'))
          .map((line) => /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0]),
      );
    const received = names(metrics);
    const missing = [...names(scraped)].filter((name) => !received.has(name));
    assert.deepEqual(missing, [], 'series of /metrics missing over OTLP');

    // Logs: the API's start and the worker's failed attempt, the latter in its attempt span's trace.
    const records = await eventually(
      'the log records in the collector',
      () => {
        const printed = printedLogRecords(jaeger.output(10_000_000));
        return printed.some((r) => r.service === 'webhook-api' && r.body === 'API listening') &&
          printed.some((r) => r.body === 'webhook delivery attempt failed: receiver status')
          ? printed
          : undefined;
      },
      60_000,
    );
    const failed = records.find((r) => r.body === 'webhook delivery attempt failed: receiver status')!;
    assert.equal(failed.service, 'webhook-worker');
    assert.equal(failed.severity, 'warn');
    assert.match(failed.traceId, /^[0-9a-f]{32}$/);
    assert.match(failed.spanId, /^[0-9a-f]{16}$/);
    const trace = await eventually('the failed attempt’s trace in Jaeger', () =>
      getTrace(jaeger.queryUrl, failed.traceId),
    );
    assert.ok(
      trace.spans.some((span) => span.spanID === failed.spanId && span.operationName === 'attempt'),
      'the record names its attempt span',
    );
    // A line that does carry the person (at the top, inside an event, inside an error), through the service's logger:
    // redacted before it leaves, as on stdout, so nothing of the person reaches the collector.
    const probe = stack.track(
      spawnProcess(process.execPath, ['--require', 'tsx/cjs', join(__dirname, '..', 'support', 'log-probe.ts')], {
        ...otel,
        NODE_ENV: 'development',
        LOG_LEVEL: 'info',
        PROBE_PERSON: JSON.stringify(person),
      }),
    );
    assert.equal((await probe.exited).code, 0, probe.output());
    assert.match(probe.output(), /log probe: a line carrying a person/, 'the probe logged its line on stdout');
    await eventually(
      'the probe’s record in the collector',
      () =>
        printedLogRecords(jaeger.output(10_000_000)).some(
          (r) => r.service === 'webhook-log-probe' && r.body === 'log probe: a line carrying a person',
        ),
      60_000,
    );
    const everything = jaeger.output(10_000_000);
    for (const value of Object.values(person)) assert.ok(!everything.includes(value), `${value} reached the collector`);
    for (const value of Object.values(person)) assert.ok(!probe.output().includes(value), `${value} reached stdout`);
  });
});

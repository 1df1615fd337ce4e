// The OTEL_* variables' standard semantics as this service reads them, and what a delivery's span may carry.
import assert from 'node:assert/strict';
import { loadConfig } from '../../common/config';
import { logTargets } from '../../common/telemetry/logger';
import { otlpMetricsExporter, otlpMetricsNamed, telemetrySettings } from '../../common/telemetry/settings';
import {
  deliverySpanAttributes,
  receiverAttributes,
  sampledTraceparent,
  workflowSpanAttributes,
} from '../../common/telemetry/span-attributes';

const ENDPOINT = 'http://127.0.0.1:4318';

describe('telemetry settings (OTEL_* variables)', () => {
  it('is off when no OTEL variable is set, with nothing to complain about', () => {
    assert.deepEqual(telemetrySettings({}), { traces: false, metrics: false, logs: false, problems: [] });
    assert.deepEqual(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), {
      traces: false,
      metrics: false,
      logs: false,
      problems: [],
    });
  });

  it('turns traces and metrics on with an OTLP endpoint, or with the otlp exporter named', () => {
    assert.deepEqual(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT }), {
      traces: true,
      metrics: true,
      logs: false,
      problems: [],
    });
    const tracesOnly = telemetrySettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${ENDPOINT}/v1/traces` });
    assert.equal(tracesOnly.traces, true);
    assert.equal(tracesOnly.metrics, false);
    const metricsOnly = telemetrySettings({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${ENDPOINT}/v1/metrics` });
    assert.equal(metricsOnly.traces, false);
    assert.equal(metricsOnly.metrics, true);
    assert.equal(telemetrySettings({ OTEL_TRACES_EXPORTER: 'otlp' }).traces, true);
    assert.equal(telemetrySettings({ OTEL_TRACES_EXPORTER: ' OTLP ' }).traces, true);
    assert.equal(telemetrySettings({ OTEL_METRICS_EXPORTER: 'otlp' }).metrics, true);
    assert.equal(telemetrySettings({ OTEL_METRICS_EXPORTER: 'otlp' }).traces, false);
  });

  it('sends logs over OTLP only when asked for by name, never for the shared endpoint alone', () => {
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT }).logs, false);
    assert.equal(telemetrySettings({ OTEL_LOGS_EXPORTER: 'otlp' }).logs, true);
    assert.equal(telemetrySettings({ OTEL_LOGS_EXPORTER: ' OTLP ' }).logs, true);
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: `${ENDPOINT}/v1/logs` }).logs, true);
    const logsOnly = telemetrySettings({ OTEL_LOGS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT });
    assert.deepEqual(logsOnly, { traces: true, metrics: true, logs: true, problems: [] });
    assert.equal(telemetrySettings({ OTEL_LOGS_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }).logs, false);
    assert.equal(
      telemetrySettings({ OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: ENDPOINT, OTEL_LOGS_EXPORTER: 'none' }).logs,
      false,
    );
    assert.equal(telemetrySettings({ OTEL_LOGS_EXPORTER: 'otlp,none' }).logs, false);
    assert.deepEqual(telemetrySettings({ OTEL_LOGS_EXPORTER: 'console' }).problems, [
      'OTEL_LOGS_EXPORTER must be otlp or none (this service exports over OTLP only)',
    ]);
    assert.deepEqual(telemetrySettings({ OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'collector:4318' }).problems, [
      'OTEL_EXPORTER_OTLP_LOGS_ENDPOINT must be an http:// or https:// URL',
    ]);
    assert.deepEqual(telemetrySettings({ OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: 'grpc' }).problems, [
      'OTEL_EXPORTER_OTLP_LOGS_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported',
    ]);
  });

  it("writes logs to stdout alone unless they leave over OTLP, then to both at the logger's level, as the service", () => {
    const otlp = { OTEL_LOGS_EXPORTER: 'otlp' };
    const stdout = { target: 'pino/file', level: 'debug', options: { destination: 1 } };
    assert.equal(logTargets('info', {}, otlp), undefined, 'a logger that names no service (tests, the CLI)');
    assert.equal(logTargets('info', { otlpService: 'webhook-api' }, {}), undefined);
    assert.equal(
      logTargets('info', { otlpService: 'webhook-api' }, { OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT }),
      undefined,
    );
    assert.deepEqual(logTargets('debug', { otlpService: 'webhook-api' }, otlp), [
      stdout,
      {
        target: 'pino-opentelemetry-transport',
        level: 'debug',
        options: { loggerName: 'webhook-delivery-service', resourceAttributes: { 'service.name': 'webhook-api' } },
      },
    ]);
    const named = logTargets('debug', { otlpService: 'webhook-api' }, { ...otlp, OTEL_SERVICE_NAME: ' api-eu ' });
    assert.deepEqual(named?.[1]?.options, {
      loggerName: 'webhook-delivery-service',
      resourceAttributes: { 'service.name': 'api-eu' },
    });
    assert.deepEqual(logTargets('warn', { pretty: true }, {}), [{ target: 'pino-pretty', level: 'warn', options: {} }]);
    assert.deepEqual(
      logTargets('warn', { pretty: true, otlpService: 'webhook-worker' }, otlp)?.map((t) => t.target),
      ['pino-pretty', 'pino-opentelemetry-transport'],
    );
  });

  it('is off whenever OTEL_SDK_DISABLED=true or the exporter is none, endpoint or not', () => {
    for (const disabled of ['true', 'TRUE', ' true '])
      assert.deepEqual(
        telemetrySettings({
          OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
          OTEL_SDK_DISABLED: disabled,
          OTEL_TRACES_EXPORTER: 'otlp',
        }),
        { traces: false, metrics: false, logs: false, problems: [] },
      );
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'false' }).traces, true);
    const noTraces = telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_TRACES_EXPORTER: 'none' });
    assert.deepEqual(noTraces, { traces: false, metrics: true, logs: false, problems: [] });
    assert.equal(
      telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_METRICS_EXPORTER: 'none' }).metrics,
      false,
    );
    assert.equal(telemetrySettings({ OTEL_TRACES_EXPORTER: 'otlp,none' }).traces, false);
  });

  it('names each variable it cannot act on', () => {
    const problems = (env: Record<string, string>) => telemetrySettings(env).problems;
    assert.deepEqual(problems({ OTEL_SDK_DISABLED: 'yes' }), ['OTEL_SDK_DISABLED must be true or false']);
    assert.deepEqual(problems({ OTEL_TRACES_EXPORTER: 'jaeger' }), [
      'OTEL_TRACES_EXPORTER must be otlp or none (this service exports over OTLP only)',
    ]);
    assert.deepEqual(problems({ OTEL_METRICS_EXPORTER: 'prometheus' }), [
      'OTEL_METRICS_EXPORTER must be otlp or none (this service exports over OTLP only)',
    ]);
    assert.deepEqual(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' }), [
      'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL',
    ]);
    assert.deepEqual(problems({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://x' }), [
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL',
    ]);
    assert.deepEqual(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), [
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported',
      'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported',
      'OTEL_EXPORTER_OTLP_LOGS_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported',
    ]);
    assert.deepEqual(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }), []);
    assert.deepEqual(problems({ OTEL_TRACES_SAMPLER: 'sometimes' }), [
      'OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, ' +
        'parentbased_always_off, parentbased_traceidratio',
    ]);
    for (const ratio of ['1.5', '-0.1', 'ten'])
      assert.deepEqual(problems({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio }), [
        'OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the share of traces sampled)',
      ]);
    for (const ratio of ['0', '0.1', '1'])
      assert.deepEqual(problems({ OTEL_TRACES_SAMPLER: 'TraceIdRatio', OTEL_TRACES_SAMPLER_ARG: ratio }), []);
    // The argument of another sampler is not a ratio.
    assert.deepEqual(problems({ OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: 'x' }), []);
  });

  it("sends the worker's metrics where the OTLP metrics variables say, every OTEL_METRIC_EXPORT_INTERVAL", () => {
    assert.deepEqual(otlpMetricsExporter({}), {
      url: 'http://localhost:4318/v1/metrics',
      headers: {},
      intervalMs: 60_000,
    });
    assert.equal(otlpMetricsExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: `${ENDPOINT}//` }).url, `${ENDPOINT}/v1/metrics`);
    assert.equal(
      otlpMetricsExporter({
        OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'https://metrics.example/otlp',
      }).url,
      'https://metrics.example/otlp',
    );
    assert.deepEqual(
      otlpMetricsExporter({
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant = t1,broken',
        OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'x-tenant=t2,=nothing',
      }).headers,
      { authorization: 'Bearer abc', 'x-tenant': 't2' },
    );
    assert.equal(otlpMetricsExporter({ OTEL_METRIC_EXPORT_INTERVAL: '500' }).intervalMs, 500);
    for (const interval of ['0', '-5', '1.5', 'soon'])
      assert.equal(otlpMetricsExporter({ OTEL_METRIC_EXPORT_INTERVAL: interval }).intervalMs, 60_000);
  });

  it('tells OTLP metrics asked for by name from those the shared endpoint implies', () => {
    assert.equal(otlpMetricsNamed({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT }), false);
    assert.equal(otlpMetricsNamed({ OTEL_METRICS_EXPORTER: 'otlp' }), true);
    assert.equal(otlpMetricsNamed({ OTEL_METRICS_EXPORTER: ' none, OTLP' }), false);
    assert.equal(otlpMetricsNamed({ OTEL_METRICS_EXPORTER: 'OTLP ' }), true);
    assert.equal(otlpMetricsNamed({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: ENDPOINT }), true);
    assert.equal(otlpMetricsNamed({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'true' }), false);
    assert.equal(otlpMetricsNamed({}), false);
  });

  it('fails the start with the others when config is loaded, and takes DELIVERY_TRACEPARENT', () => {
    assert.throws(() => loadConfig({ OTEL_TRACES_SAMPLER: 'sometimes' }), /OTEL_TRACES_SAMPLER must be one of/);
    for (const named of [
      { OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_METRICS_EXPORTER: 'otlp' },
      { OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${ENDPOINT}/v1/metrics` },
    ])
      assert.throws(
        () => loadConfig({ ...named, WORKER_METRICS_PORT: '9464' }),
        /set WORKER_METRICS_PORT or the OTLP metrics variables, not both/,
      );
    // The shared endpoint alone (for traces, say) leaves the Prometheus endpoint as it is.
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, WORKER_METRICS_PORT: '9464' }).WORKER_METRICS_PORT,
      9464,
    );
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_METRICS_EXPORTER: 'none', WORKER_METRICS_PORT: '9464' })
        .WORKER_METRICS_PORT,
      9464,
    );
    assert.equal(loadConfig({}).DELIVERY_TRACEPARENT, true);
    assert.equal(loadConfig({ DELIVERY_TRACEPARENT: 'false' }).DELIVERY_TRACEPARENT, false);
  });
});

describe('span attributes', () => {
  it('names the delivery by project, type and X-Webhook-Id only', () => {
    assert.deepEqual(deliverySpanAttributes({ projectId: 'p1', webhookType: 'FALL_DETECTION', webhookId: 'w-1' }), {
      'webhook.project_id': 'p1',
      'webhook.event_type': 'FALL_DETECTION',
      'webhook.id': 'w-1',
    });
    const withPayload = { projectId: 'p1', webhookType: 'TEST', payload: { firstName: 'Ada' } };
    assert.deepEqual(deliverySpanAttributes(withPayload), {
      'webhook.project_id': 'p1',
      'webhook.event_type': 'TEST',
    });
  });

  it('names the receiver by scheme, host and port, never its path, query or credentials', () => {
    assert.deepEqual(receiverAttributes(new URL('https://hooks.example.com/t/SECRET-PATH?token=SECRET-QUERY#frag')), {
      'http.request.method': 'POST',
      'url.scheme': 'https',
      'server.address': 'hooks.example.com',
      'server.port': 443,
    });
    assert.deepEqual(receiverAttributes(new URL('http://user:pass@127.0.0.1:8080/x')), {
      'http.request.method': 'POST',
      'url.scheme': 'http',
      'server.address': '127.0.0.1',
      'server.port': 8080,
    });
    assert.equal(receiverAttributes(new URL('http://example.com/')).port, undefined);
    assert.equal(receiverAttributes(new URL('http://example.com/'))['server.port'], 80);
    assert.equal(receiverAttributes(new URL('http://[::1]:9000/'))['server.address'], '::1');
    assert.equal(receiverAttributes(new URL('ftp://example.com/'))['server.port'], 0);
  });

  it("keeps a workflow span's ids of its WorkflowInfo, not its memo, search attributes or failures", () => {
    const info = {
      workflowId: 'webhook-event-1',
      runId: 'run-1',
      workflowType: 'deliverWebhookEvent',
      taskQueue: 'webhooks',
      namespace: 'default',
      memo: { note: 'private' },
      searchAttributes: { ProjectId: ['p1'] },
      lastFailure: new Error('Receiver answered HTTP 500'),
    };
    assert.deepEqual(workflowSpanAttributes(info), {
      temporalWorkflowId: 'webhook-event-1',
      temporalRunId: 'run-1',
      temporalWorkflowType: 'deliverWebhookEvent',
      temporalTaskQueue: 'webhooks',
      temporalNamespace: 'default',
    });
  });

  it('reads the sampled flag of a W3C traceparent, and nothing else as sampled', () => {
    const id = `00-${'a'.repeat(32)}-${'b'.repeat(16)}`;
    assert.equal(sampledTraceparent(`${id}-01`), true);
    assert.equal(sampledTraceparent(` ${id}-03 `), true);
    assert.equal(sampledTraceparent(`${id}-00`), false);
    assert.equal(sampledTraceparent(`${id}-02`), false);
    for (const bad of [undefined, 1, '', `${id}-1`, `${id}-0x`, `${id.toUpperCase()}-01`, `x${id}-01`, `${id}-01-00`])
      assert.equal(sampledTraceparent(bad), false, String(bad));
  });
});

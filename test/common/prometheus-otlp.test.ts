// The API's prom-client registries read as OpenTelemetry metric data (common/telemetry/prometheus-otlp.ts), from a real registry:
// names, kinds, label sets, and a histogram's cumulative `le` buckets turned into each bucket's own count.
import assert from 'node:assert/strict';
import { AggregationTemporality, DataPointType, InstrumentType, type MetricData } from '@opentelemetry/sdk-metrics';
import { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';
import { prometheusToOtlp } from '../../common/telemetry/prometheus-otlp';

const START: [number, number] = [1_700_000_000, 0];
const END: [number, number] = [1_700_000_060, 500];

async function converted(register: (registry: Registry) => void): Promise<MetricData[]> {
  const registry = new Registry();
  register(registry);
  return prometheusToOtlp(await registry.getMetricsAsJSON(), START, END);
}

describe('prom-client registries as OpenTelemetry metrics (OTLP export of /metrics)', () => {
  it('a counter is a monotonic cumulative sum named without _total, one point per label set', async () => {
    const [metric, ...rest] = await converted((registry) => {
      const requests = new Counter({
        name: 'http_requests_total',
        help: 'API requests',
        labelNames: ['method', 'status'] as const,
        registers: [registry],
      });
      requests.inc({ method: 'GET', status: '200' }, 3);
      requests.inc({ method: 'POST', status: '201' });
    });
    assert.deepEqual(rest, []);
    assert.ok(metric?.dataPointType === DataPointType.SUM);
    assert.deepEqual(metric.descriptor, {
      name: 'http_requests',
      description: 'API requests',
      unit: '',
      type: InstrumentType.COUNTER,
      valueType: 1,
    });
    assert.equal(metric.aggregationTemporality, AggregationTemporality.CUMULATIVE);
    assert.equal(metric.isMonotonic, true);
    assert.deepEqual(metric.dataPoints, [
      { startTime: START, endTime: END, attributes: { method: 'GET', status: '200' }, value: 3 },
      { startTime: START, endTime: END, attributes: { method: 'POST', status: '201' }, value: 1 },
    ]);
  });

  it('a counter named without _total keeps its name, only a final _total goes; a gauge is a gauge under its own name', async () => {
    const metrics = await converted((registry) => {
      new Counter({ name: 'webhook_events', help: 'events', registers: [registry] }).inc(2);
      new Counter({ name: 'webhook_total_refusals_total', help: 'refusals', registers: [registry] }).inc();
      const open = new Gauge({
        name: 'webhook_circuit_breaker_open',
        help: 'open breakers',
        labelNames: ['project'] as const,
        registers: [registry],
      });
      open.set({ project: 'p-1' }, 1);
    });
    assert.deepEqual(
      metrics.map((m) => [m.descriptor.name, m.dataPointType, m.descriptor.type]),
      [
        ['webhook_events', DataPointType.SUM, InstrumentType.COUNTER],
        ['webhook_total_refusals', DataPointType.SUM, InstrumentType.COUNTER],
        ['webhook_circuit_breaker_open', DataPointType.GAUGE, InstrumentType.GAUGE],
      ],
    );
    const gauge = metrics[2]!;
    assert.equal(gauge.aggregationTemporality, AggregationTemporality.CUMULATIVE);
    assert.equal(gauge.descriptor.description, 'open breakers');
    assert.deepEqual(gauge.dataPoints, [{ startTime: START, endTime: END, attributes: { project: 'p-1' }, value: 1 }]);
  });

  it('a histogram keeps its finite bounds and counts each bucket apart, per label set, with sum and count', async () => {
    const [metric] = await converted((registry) => {
      const latency = new Histogram({
        name: 'http_request_duration_seconds',
        help: 'latency',
        labelNames: ['route'] as const,
        buckets: [0.1, 0.5, 1],
        registers: [registry],
      });
      for (const seconds of [0.05, 0.05, 0.3, 0.7, 2, 3]) latency.observe({ route: '/a' }, seconds);
      latency.observe({ route: '/b' }, 0.2);
    });
    assert.ok(metric?.dataPointType === DataPointType.HISTOGRAM);
    assert.equal(metric.descriptor.name, 'http_request_duration_seconds');
    assert.equal(metric.descriptor.type, InstrumentType.HISTOGRAM);
    assert.equal(metric.aggregationTemporality, AggregationTemporality.CUMULATIVE);
    assert.deepEqual(metric.dataPoints, [
      {
        startTime: START,
        endTime: END,
        attributes: { route: '/a' },
        value: { buckets: { boundaries: [0.1, 0.5, 1], counts: [2, 1, 1, 2] }, sum: 6.1, count: 6 },
      },
      {
        startTime: START,
        endTime: END,
        attributes: { route: '/b' },
        value: { buckets: { boundaries: [0.1, 0.5, 1], counts: [0, 1, 0, 0] }, sum: 0.2, count: 1 },
      },
    ]);
  });

  it('the buckets are ordered by bound whatever order they are listed in; a histogram without labels has one point', () => {
    const [metric] = prometheusToOtlp(
      [
        {
          name: 'h',
          help: 'h',
          type: 'histogram',
          values: [
            { value: 4, labels: { le: '+Inf' }, metricName: 'h_bucket' },
            { value: 3, labels: { le: 5 }, metricName: 'h_bucket' },
            { value: 1, labels: { le: 1 }, metricName: 'h_bucket' },
            { value: 9.5, labels: {}, metricName: 'h_sum' },
            { value: 4, labels: {}, metricName: 'h_count' },
            // Neither a bucket, a sum nor a count (prom-client writes none such): left out.
            { value: 99, labels: {}, metricName: 'h_created' },
            { value: 98, labels: {} },
          ],
        },
      ],
      START,
      END,
    );
    assert.deepEqual(metric?.dataPoints, [
      {
        startTime: START,
        endTime: END,
        attributes: {},
        value: { buckets: { boundaries: [1, 5], counts: [1, 2, 1] }, sum: 9.5, count: 4 },
      },
    ]);
  });

  it('label sets are one series whatever order their labels come in; an undefined label is left out', () => {
    const [metric] = prometheusToOtlp(
      [
        {
          name: 'h',
          help: 'h',
          type: 'histogram',
          values: [
            { value: 1, labels: { a: 'x', b: 'y', le: 1 }, metricName: 'h_bucket' },
            { value: 1, labels: { b: 'y', a: 'x', le: '+Inf' }, metricName: 'h_bucket' },
            { value: 0.5, labels: { b: 'y', a: 'x', c: undefined }, metricName: 'h_sum' },
            { value: 1, labels: { a: 'x', b: 'y' }, metricName: 'h_count' },
          ],
        },
      ],
      START,
      END,
    );
    assert.equal(metric?.dataPoints.length, 1);
    assert.deepEqual(metric.dataPoints[0]!.attributes, { a: 'x', b: 'y' });
    assert.deepEqual(metric.dataPoints[0]!.value, { buckets: { boundaries: [1], counts: [1, 0] }, sum: 0.5, count: 1 });
  });

  it('a summary, which OpenTelemetry cannot carry, is left out', async () => {
    const metrics = await converted((registry) => {
      new Summary({ name: 'gc_pause', help: 'pauses', registers: [registry] }).observe(1);
      new Gauge({ name: 'up_gauge', help: 'g', registers: [registry] }).set(1);
    });
    assert.deepEqual(
      metrics.map((m) => m.descriptor.name),
      ['up_gauge'],
    );
  });
});

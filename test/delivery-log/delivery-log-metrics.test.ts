// The API's /metrics over a real worker on the Temporal dev server: Prometheus text (read by a strict parser) with
// request counts by route template and status and the delivery counters; METRICS_TOKEN guards it.
import assert from 'node:assert/strict';
import { fallEvent } from '../support/deliveries';
import { useDeliveryLogSuite } from './fixture';

/** One sample line of the Prometheus text format: name, labels, value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A small parser of the Prometheus text exposition format: fails on any line it cannot read. */
function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  const typed = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE ([a-zA-Z_:][\w:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) typed.add(type[1]!);
    if (line.startsWith('#')) continue;
    // Prometheus parses values with Go's ParseFloat, which reads NaN in any case (prom-client writes "Nan").
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (-?[\d.e+-]+|[Nn][Aa][Nn]|[+-]Inf)$/.exec(line);
    assert.ok(match, `not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    const name = match[1]!;
    assert.ok(
      [...typed].some((t) => name === t || name.startsWith(`${t}_`)),
      `${name} has no # TYPE`,
    );
    samples.push({ name, labels, value: Number(match[3]) });
  }
  return samples;
}

const sampleValue = (samples: Sample[], name: string, labels: Record<string, string>) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

describe('delivery log metrics: /metrics in the Prometheus text format', function () {
  this.timeout(60_000);
  const { fx, appDeps, withWorker, deliver, call, project, list } = useDeliveryLogSuite();

  it('/metrics: Prometheus text with request counts by route and status and delivery counters; METRICS_TOKEN', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const route = { method: 'GET', route: '/webhooks/project/:projectId/deliveries', status: '200' };
    const delivered = { type: 'FALL_DETECTION', outcome: 'delivered' };
    const scrape = async () => {
      const reply = await call('GET', '/metrics');
      assert.equal(reply.status, 200);
      assert.match(reply.contentType, /^text\/plain/);
      return parsePrometheus(reply.text);
    };
    const before = await scrape();
    await list(p);
    await list(p);
    await withWorker(() => deliver(fallEvent(p)));
    const after = await scrape();
    assert.equal(
      sampleValue(after, 'http_requests_total', route) - sampleValue(before, 'http_requests_total', route),
      2,
    );
    assert.equal(
      sampleValue(after, 'http_request_duration_seconds_count', route) -
        sampleValue(before, 'http_request_duration_seconds_count', route),
      2,
    );
    assert.equal(
      sampleValue(after, 'webhook_deliveries_total', delivered) -
        sampleValue(before, 'webhook_deliveries_total', delivered),
      1,
    );
    assert.equal(
      sampleValue(after, 'webhook_delivery_latency_seconds_count', { type: 'FALL_DETECTION' }) -
        sampleValue(before, 'webhook_delivery_latency_seconds_count', { type: 'FALL_DETECTION' }),
      1,
    );
    assert.ok(!after.some((s) => s.labels.route?.includes(p)), 'routes are templates, never raw paths');

    appDeps.metricsToken = 'metrics-token-0123456789';
    const refused = await call('GET', '/metrics');
    assert.equal(refused.status, 401);
    assert.match(refused.contentType, /^application\/problem\+json/);
    assert.equal(
      (await call('GET', '/metrics', { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status,
      401,
    );
    const allowed = await call('GET', '/metrics', { headers: { authorization: 'Bearer metrics-token-0123456789' } });
    assert.equal(allowed.status, 200);
    assert.ok(parsePrometheus(allowed.text).length > 0);
  });
});

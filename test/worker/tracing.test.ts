// One retried FALL_DETECTION traced from emit to receipt into a real Jaeger (v2, built from its Go module), and read
// back through Jaeger's own query API: the CLI's emit, Temporal's start, the workflow, the lookup (local activity)
// making the first attempt and its POST (500), the wait before the retry, the second attempt as an activity and its
// POST (200); each span's parent; the receiver's traceparent naming the second POST; the worker's log line of the
// failed attempt naming the trace. Then a walk over every span's attributes and events fails on any value of the
// event's payload, the registration's secret or the URL's path and query. The traced history replays; the worker's
// metrics reached the same OTLP endpoint.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { chromium } from 'playwright-core';
import { killWorker, spawnEmit, type WorkerProcess } from '../faults/support';
import { Registrations, newProjectId } from '../support/deliveries';
import { eventually } from '../support/eventually';
import { findTraces, getTrace, type JaegerSpan, type JaegerTrace } from './jaeger';
import { uniqueTaskQueue } from '../support/temporal';
import { TRACED_EVENT_ID, TRACED_HISTORY_PAYLOAD_KEYS, tracedHistoryDataConverter } from '../support/traced-history';
import { useTracingStack } from './tracing-stack';
import { workflowBundleOptions } from '../../worker/start';
import { workflowSpanSinks } from '../../worker/tracing';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOT = join(__dirname, '..', '..', 'docs', 'trace-fall-detection.png');
/** RECORD_HISTORIES=1 saves the traced history for test/workflows/replay.test.ts. */
const HISTORY = join(__dirname, '..', 'fixtures', 'histories', 'traced-lookup-attempt-retried-then-delivered.binpb');
/** The policy's wait before the second attempt: long enough to see in the trace. */
const RETRY_INTERVAL_MS = 1_500;

/** A made-up person whose every field is distinctive, so any of them found in a span is found for sure. */
const payload = {
  userUUID: randomUUID(),
  reasons: ['tracing-test-fall-reason'],
  happenedAt: '2025-03-01T08:15:00.000Z',
  email: 'zebulon.tracewalker@example.com',
  firstName: 'Zebulon',
  lastName: 'Tracewalker',
};

describe('tracing: a retried FALL_DETECTION in a real Jaeger', function () {
  this.timeout(600_000);
  const stack = useTracingStack();
  let worker: WorkerProcess | undefined;

  it('reads the whole trace back, spans in order with their parents, and no personal data in any', async () => {
    const { jaeger, env, database, receiver } = stack;
    const registrations = new Registrations(database.db);
    const projectId = newProjectId();
    // A path and a query a customer might put a token in: neither may reach a span.
    const pathToken = `tok-${randomUUID()}`;
    const queryToken = `q-${randomUUID()}`;
    const url = `${receiver.url}/${pathToken}?key=${queryToken}`;
    const secret = await registrations.register(projectId, url, ['FALL_DETECTION']);
    receiver.script({ status: 500 });

    const taskQueue = uniqueTaskQueue('tracing');
    const otel = {
      // A fixed test key, so the recorded history replays elsewhere (test/workflows/replay.test.ts).
      PAYLOAD_ENCRYPTION_KEYS: TRACED_HISTORY_PAYLOAD_KEYS,
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      // Spans leave within 200 ms instead of 5 s, metrics every 500 ms instead of every minute.
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_METRIC_EXPORT_INTERVAL: '500',
    };
    worker = stack.spawnWorker(registrations.key, taskQueue, {
      ...otel,
      DELIVERY_INITIAL_INTERVAL_MS: String(RETRY_INTERVAL_MS),
      DELIVERY_MAX_INTERVAL_MS: String(RETRY_INTERVAL_MS),
    });

    // The monitoring system's side: `webhooks event emit`, the CLI, in its own process.
    // A fixed id (each run has its own Temporal): the recorded history's input is sealed for its workflow id.
    const eventId = TRACED_EVENT_ID;
    const cli = spawnEmit(
      { projectId, type: 'FALL_DETECTION', userUUID: payload.userUUID, data: payload, id: eventId },
      { ...otel, TEMPORAL_ADDRESS: env.address, TEMPORAL_TASK_QUEUE: taskQueue },
    );
    const emitted = await cli.exited;
    assert.equal(emitted.code, 0, cli.output());
    const workflowId = `webhook-event-${eventId}`;

    const [first, second] = await receiver.waitForRequests(2, 60_000);
    assert.ok(first && second);

    const complete = (trace: JaegerTrace) =>
      trace.spans.filter((span) => span.operationName === 'POST').length === 2 &&
      trace.spans.some((span) => span.operationName === 'RunWorkflow:deliverWebhookEvent') &&
      trace.spans.some((span) => span.operationName === 'wait');
    const trace = await eventually(
      'the whole trace in Jaeger',
      async () => {
        const [found] = await findTraces(jaeger.queryUrl, 'webhooks-cli', { 'webhook.id': workflowId });
        if (!found) return undefined;
        const whole = await getTrace(jaeger.queryUrl, found.traceID);
        return whole && complete(whole) ? whole : undefined;
      },
      60_000,
    ).catch(async (error: unknown) => {
      const services = await fetch(`${jaeger.queryUrl}/api/services`).then((r) => r.text());
      const found = await findTraces(jaeger.queryUrl, 'webhook-worker', {});
      const seen = found.map((t) => t.spans.map((s) => s.operationName).join(', ')).join('\n');
      throw new Error(
        `${(error as Error).message}\nservices: ${services}\nworker traces:\n${seen}\nworker:\n${worker?.output()}\n` +
          `jaeger:\n${jaeger.output()}`,
      );
    });

    const spans = [...trace.spans].sort((a, b) => a.startTime - b.startTime);
    const named = (name: string) => spans.filter((span) => span.operationName === name);
    const one = (name: string) => {
      const [span, ...more] = named(name);
      assert.ok(span, `no span ${name} in ${spans.map((s) => s.operationName).join(', ')}`);
      assert.equal(more.length, 0, `more than one ${name}`);
      return span;
    };
    const parentOf = (span: JaegerSpan) =>
      spans.find((candidate) => candidate.spanID === span.references.find((r) => r.refType === 'CHILD_OF')?.spanID);
    const tag = (span: JaegerSpan, key: string) => span.tags.find((t) => t.key === key)?.value;
    const events = (span: JaegerSpan) =>
      span.logs.map((log) => log.fields.find((field) => field.key === 'event')?.value as string);
    const service = (span: JaegerSpan) => trace.processes[span.processID]?.serviceName;

    // The chain from the monitoring system's emit down to each POST.
    const emit = one('emit FALL_DETECTION');
    assert.equal(parentOf(emit), undefined, 'the emit is the root');
    assert.equal(service(emit), 'webhooks-cli');
    const start = one('StartWorkflow:deliverWebhookEvent');
    assert.equal(parentOf(start), emit);
    const run = one('RunWorkflow:deliverWebhookEvent');
    assert.equal(parentOf(run), start);
    assert.equal(service(run), 'webhook-worker');
    const lookupStart = one('StartActivity:planDelivery');
    assert.equal(parentOf(lookupStart), run);
    const lookup = one('RunActivity:planDelivery');
    assert.equal(parentOf(lookup), lookupStart);
    const attemptStart = one('StartActivity:deliverWebhookAttempt');
    assert.equal(parentOf(attemptStart), run);
    const attemptRun = one('RunActivity:deliverWebhookAttempt');
    assert.equal(parentOf(attemptRun), attemptStart);
    const [attempt1, attempt2] = named('attempt');
    assert.ok(attempt1 && attempt2 && named('attempt').length === 2);
    assert.equal(parentOf(attempt1), lookup, 'the lookup makes the first attempt');
    assert.equal(parentOf(attempt2), attemptRun, 'the activity makes the second');
    const [post1, post2] = named('POST');
    assert.ok(post1 && post2);
    assert.equal(parentOf(post1), attempt1);
    assert.equal(parentOf(post2), attempt2);
    const wait = one('wait');
    assert.equal(parentOf(wait), run);

    // In order, the wait between the attempts visible.
    assert.ok(emit.startTime <= start.startTime && start.startTime <= run.startTime + 1_000_000);
    // Workflow spans run on workflow time, the start of their workflow task: the wait after the lookup's own attempt
    // begins, in the trace, when that task began. It ends after the first POST and before the second.
    assert.ok(wait.startTime + wait.duration >= post1.startTime + post1.duration, 'the wait ends after the first POST');
    assert.ok(wait.startTime + wait.duration <= post2.startTime + 1_000, 'the second POST follows the wait');
    assert.ok(wait.duration >= (RETRY_INTERVAL_MS - 100) * 1_000, `wait of ${wait.duration} µs`);
    assert.equal(tag(wait, 'webhook.wait.reason'), 'retry');
    assert.equal(tag(wait, 'webhook.wait.ended_by'), 'timer');

    // The attributes an operator asks about.
    for (const [span, number, outcome] of [
      [attempt1, 1, 'failed'],
      [attempt2, 2, 'delivered'],
    ] as const) {
      assert.equal(tag(span, 'webhook.project_id'), projectId);
      assert.equal(tag(span, 'webhook.event_type'), 'FALL_DETECTION');
      assert.equal(tag(span, 'webhook.id'), workflowId);
      assert.equal(tag(span, 'webhook.attempt'), number);
      assert.equal(tag(span, 'webhook.outcome'), outcome);
      assert.equal(tag(span, 'webhook.breaker.state'), 'closed');
    }
    assert.equal(tag(attempt1, 'webhook.failure_type'), 'WebhookReceiverStatus');
    for (const [post, status] of [
      [post1, 500],
      [post2, 200],
    ] as const) {
      assert.equal(tag(post, 'span.kind'), 'client');
      assert.equal(tag(post, 'http.request.method'), 'POST');
      assert.equal(tag(post, 'http.response.status_code'), status);
      assert.equal(tag(post, 'server.address'), '127.0.0.1');
      assert.equal(tag(post, 'server.port'), receiver.port);
      assert.equal(tag(post, 'url.scheme'), 'http');
      assert.equal(typeof tag(post, 'webhook.http.duration_ms'), 'number');
      assert.deepEqual(
        events(post).filter((name) => name === 'request.headers_sent' || name === 'response.first_byte'),
        ['request.headers_sent', 'response.first_byte'],
      );
    }
    // The first POST opened the connection; the second reused it (keep-alive).
    assert.deepEqual(events(post1).slice(0, 2), ['connect.start', 'connect.end']);

    // The receiver can join the trace: its traceparent names the POST that reached it.
    assert.equal(second.headers.traceparent, `00-${trace.traceID}-${post2.spanID}-01`);
    assert.equal(first.headers.traceparent, `00-${trace.traceID}-${post1.spanID}-01`);

    // The worker's line about the failed attempt names the trace and the span it was written in.
    const failedLine = await eventually('the failed attempt logged', () =>
      worker!
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.msg === 'webhook delivery attempt failed: receiver status'),
    );
    assert.equal(failedLine.trace_id, trace.traceID);
    assert.equal(failedLine.span_id, attempt1.spanID);

    // No value of the event, the secret, or the URL's path and query anywhere in the trace.
    const forbidden = [
      ...Object.values(payload).flat(),
      secret,
      pathToken,
      queryToken,
      '/hooks/receive',
      JSON.stringify(payload),
    ];
    const everything: [where: string, value: unknown][] = [];
    for (const span of spans) {
      for (const t of span.tags) everything.push([`${span.operationName} ${t.key}`, t.value]);
      for (const log of span.logs)
        for (const field of log.fields) everything.push([`${span.operationName} event ${field.key}`, field.value]);
    }
    for (const process of Object.values(trace.processes))
      for (const t of process.tags) everything.push([`process ${process.serviceName} ${t.key}`, t.value]);
    assert.ok(everything.length > 50, `only ${everything.length} values to walk`);
    for (const [where, value] of everything) {
      const text = typeof value === 'string' ? value : JSON.stringify(value);
      for (const bad of forbidden) assert.ok(!text.includes(bad), `${where} carries ${bad}: ${text}`);
    }

    // Tracing adds no command: the history it recorded (its activities scheduled with the trace header) replays on
    // the workflow code as `npm run build` bundles it, tracing interceptors included, without a nondeterminism error.
    const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
    assert.ok(
      history.events?.some((event) => event.activityTaskScheduledEventAttributes?.header?.fields?.['_tracer-data']),
      'the attempt activity was scheduled with the trace context',
    );
    const workflowBundle = await bundleWorkflowCode({ ...workflowBundleOptions(), logger: new DefaultLogger('ERROR') });
    const replay = {
      workflowBundle,
      dataConverter: tracedHistoryDataConverter(database.db),
      sinks: workflowSpanSinks(undefined),
    };
    await Worker.runReplayHistory(replay, history, workflowId);
    if (process.env.RECORD_HISTORIES === '1')
      writeFileSync(HISTORY, temporal.api.history.v1.History.encode(history).finish());

    // The same endpoint took the worker's metrics over OTLP: the delivery counters of /metrics and the SDK's own.
    const metrics = await eventually(
      'the delivery counters over OTLP',
      async () => {
        const text = await fetch(jaeger.metricsUrl).then((response) => response.text());
        return /^webhook_delivery_attempts(_total)?\{[^}]*result="delivered"[^}]*\} 1$/m.test(text) ? text : undefined;
      },
      30_000,
    );
    assert.match(
      metrics,
      /^webhook_delivery_attempts(_total)?\{[^}]*result="failed"[^}]*type="FALL_DETECTION"[^}]*\} 1$/m,
    );
    assert.match(
      metrics,
      /^webhook_deliveries(_total)?\{[^}]*outcome="delivered"[^}]*type="FALL_DETECTION"[^}]*\} 1$/m,
    );
    assert.match(metrics, /^webhook_delivery_latency(_seconds)?_bucket\{/m);
    assert.match(metrics, /^temporal_workflow_completed(_total)?\{/m);

    // The trace in the real Jaeger UI, photographed in Chromium for docs/operators.md: opt-in, since its assets are
    // built from jaeger-ui's source (scripts/ensure-jaeger-ui.sh), which CI does not fetch.
    if (process.env.TRACE_SCREENSHOT === '1' && process.env.JAEGER_UI_ASSETS && existsSync(CHROMIUM))
      await photographTrace(jaeger.queryUrl, trace);
  });

  it("follows the emitter's sampling: an event it did not sample records no span anywhere, its receiver told so", async () => {
    const { jaeger, env, database, receiver } = stack;
    await killWorker(worker);
    const registrations = new Registrations(database.db);
    const projectId = newProjectId();
    await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const taskQueue = uniqueTaskQueue('tracing-unsampled');
    const otel = {
      PAYLOAD_ENCRYPTION_KEYS: TRACED_HISTORY_PAYLOAD_KEYS,
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_METRICS_EXPORTER: 'none',
    };
    worker = stack.spawnWorker(registrations.key, taskQueue, otel);
    const before = receiver.requests.length;
    const eventId = `unsampled-${randomUUID()}`;
    const cli = spawnEmit(
      { projectId, type: 'FALL_DETECTION', userUUID: payload.userUUID, data: payload, id: eventId },
      // The emitter samples nothing (as 90 % of events under parentbased_traceidratio 0.1); the worker samples all.
      {
        ...otel,
        OTEL_TRACES_SAMPLER: 'always_off',
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      },
    );
    assert.equal((await cli.exited).code, 0, cli.output());
    const [request] = (await receiver.waitForRequests(before + 1, 60_000)).slice(before);
    assert.match(String(request?.headers.traceparent), /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/, 'not sampled');

    // A traced event emitted after it reaches Jaeger, so the batch the worker would have sent the other in is there.
    const marker = `sampled-${randomUUID()}`;
    const traced = spawnEmit(
      { projectId, type: 'FALL_DETECTION', userUUID: payload.userUUID, data: payload, id: marker },
      { ...otel, TEMPORAL_ADDRESS: env.address, TEMPORAL_TASK_QUEUE: taskQueue },
    );
    assert.equal((await traced.exited).code, 0, traced.output());
    await eventually(
      'the sampled event in Jaeger',
      async () =>
        (await findTraces(jaeger.queryUrl, 'webhook-worker', { 'webhook.id': `webhook-event-${marker}` })).some(
          (trace) => trace.spans.some((span) => span.operationName === 'POST'),
        ),
      60_000,
    );
    for (const service of ['webhooks-cli', 'webhook-worker'])
      assert.deepEqual(
        await findTraces(jaeger.queryUrl, service, { 'webhook.id': `webhook-event-${eventId}` }),
        [],
        `${service} recorded a span of the unsampled event`,
      );
  });
});

/**
 * Jaeger UI's trace page (the query extension serves it from JAEGER_UI_ASSETS) with every span row drawn, the name
 * column wide enough for the operations' names, the first attempt's details open with its tags and each POST's with
 * its tags summed up on a line (the status code among them), saved as docs/trace-fall-detection.png: 1280 px wide,
 * down to the last row.
 */
async function photographTrace(queryUrl: string, trace: JaegerTrace): Promise<void> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    // Tall enough that the whole timeline is in view: the page's header is fixed, a full-page capture would repeat it.
    const page = await browser.newPage({ viewport: { width: 1280, height: 1800 }, colorScheme: 'light' });
    // The UI keeps the name column's width (a fraction of the page, 0.25 at first) in localStorage.
    await page.addInitScript("localStorage.setItem('spanNameColumnWidth', '0.4')");
    await page.goto(`${queryUrl}/trace/${trace.traceID}`);
    const rows = page.locator('.span-row');
    await eventually('every span drawn', async () => ((await rows.count()) === trace.spans.length ? true : undefined));
    const operation = (name: string) =>
      page.locator('.span-row .endpoint-name').filter({ hasText: new RegExp(`^${name}$`) });
    await operation('attempt').first().click();
    const details = page.locator('.detail-row');
    await details.first().locator('.AccordianKeyValues--header', { hasText: 'Tags' }).click();
    await details.first().locator('.KeyValueTable').waitFor();
    await operation('POST').first().click();
    await operation('POST').last().click();
    await eventually('three spans detailed', async () => ((await details.count()) === 3 ? true : undefined));
    let bottom = 0;
    for (const row of await page.locator('.span-row, .detail-row').all()) {
      const box = await row.boundingBox();
      if (box) bottom = Math.max(bottom, box.y + box.height);
    }
    await page.screenshot({ path: SCREENSHOT, clip: { x: 0, y: 0, width: 1280, height: Math.ceil(bottom) + 8 } });
  } finally {
    await browser.close();
  }
}

// The worker's POST span and the receiver's traceparent, and the trace ids on log lines, in process: a tracer provider
// exporting to memory stands in for the OTLP one (test/worker/tracing.test.ts runs the real thing into Jaeger).
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { context, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createWebhookHttpClient, traceHttpClient, type WebhookHttpClient } from '../../activities';
import { createLogger } from '../../common/telemetry/logger';
import { tracer } from '../../common/telemetry/tracing';
import { freePort } from '../../dev/ports';
import { startTestReceiver, type TestReceiver } from '../support/receiver';

describe('tracing in process: POST spans, traceparent, log lines', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  let receiver: TestReceiver;

  before(async () => {
    provider.register({ propagator: new W3CTraceContextPropagator() });
    receiver = await startTestReceiver();
  });
  after(async () => {
    await receiver?.close();
    await provider.shutdown();
    // Leave the process as the other suites expect it: no tracer provider, context manager or propagator.
    trace.disable();
    context.disable();
    propagation.disable();
  });
  beforeEach(() => exporter.reset());

  const posts = () => exporter.getFinishedSpans().filter((span) => span.name === 'POST');
  const eventsOf = (span: ReadableSpan) => span.events.map((event) => event.name);

  it('POSTs in a client span naming scheme, host, port and status, and hands the receiver its traceparent', async () => {
    const http = traceHttpClient(createWebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true }), {
      traceparent: true,
    });
    try {
      receiver.script({ status: 503 });
      const url = new URL(`${receiver.url}/SECRET-PATH?token=SECRET-QUERY`);
      await tracer().startActiveSpan('attempt', async (parent) => {
        assert.equal((await http.post(url, { 'content-type': 'application/json' }, '{}')).statusCode, 503);
        assert.equal((await http.post(url, {}, '{}')).statusCode, 200);
        parent.end();
      });
    } finally {
      await http.close();
    }
    const [first, second] = posts();
    assert.ok(first && second);
    const attempt = exporter.getFinishedSpans().find((span) => span.name === 'attempt')!;
    for (const [span, status, request] of [
      [first, 503, receiver.requests[0]!],
      [second, 200, receiver.requests[1]!],
    ] as const) {
      assert.equal(span.parentSpanId, attempt.spanContext().spanId);
      assert.equal(span.kind, 2); // CLIENT
      assert.deepEqual(
        { ...span.attributes, 'webhook.http.duration_ms': typeof span.attributes['webhook.http.duration_ms'] },
        {
          'http.request.method': 'POST',
          'url.scheme': 'http',
          'server.address': '127.0.0.1',
          'server.port': receiver.port,
          'http.response.status_code': status,
          'webhook.http.duration_ms': 'number',
        },
      );
      assert.equal(span.status.code, status >= 400 ? 2 : 0);
      const { traceId, spanId } = span.spanContext();
      assert.equal(request.headers.traceparent, `00-${traceId}-${spanId}-01`);
      assert.equal(request.headers.baggage, undefined);
      assert.equal(request.headers['content-type'], status === 503 ? 'application/json' : undefined);
    }
    // The first POST opened the connection (the second may too: reuse is the pool's choice).
    assert.deepEqual(eventsOf(first), ['connect.start', 'connect.end', 'request.headers_sent', 'response.first_byte']);
    assert.deepEqual(eventsOf(second).slice(-2), ['request.headers_sent', 'response.first_byte']);
    assert.equal(first.events[1]!.attributes?.['network.peer.address'], '127.0.0.1');
  });

  it('hands the attempt’s connection (client certificate, route) to the client it wraps (mutual TLS, proxy while traced)', async () => {
    const seen: unknown[] = [];
    const inner: WebhookHttpClient = {
      post: (_url, _headers, _body, connection) => {
        seen.push(connection);
        return Promise.resolve({ statusCode: 200 });
      },
      close: () => Promise.resolve(),
    };
    const connection = {
      clientCertificate: { id: 'r1:fp', certificate: 'CERT', privateKey: () => 'KEY' },
      route: { proxy: 'http://proxy.internal:3128' },
    };
    const http = traceHttpClient(inner, { traceparent: true });
    await http.post(new URL(receiver.url), {}, '{}', connection);
    await http.post(new URL(receiver.url), {}, '{}');
    assert.deepEqual(seen, [connection, undefined]);
  });

  it('sends no traceparent with DELIVERY_TRACEPARENT=false, and still traces the POST', async () => {
    const http = traceHttpClient(createWebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true }), {
      traceparent: false,
    });
    try {
      const before = receiver.requests.length;
      await http.post(new URL(receiver.url), {}, '{}');
      assert.equal(receiver.requests[before]!.headers.traceparent, undefined);
    } finally {
      await http.close();
    }
    assert.equal(posts().length, 1);
  });

  it('marks a POST that got no answer with its error type and the failed connect', async () => {
    const http = traceHttpClient(createWebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true }), {
      traceparent: true,
    });
    const closedPort = await freePort();
    try {
      await tracer().startActiveSpan('attempt', async (parent) => {
        await assert.rejects(http.post(new URL(`http://127.0.0.1:${closedPort}/x`), {}, '{}'));
        parent.end();
      });
    } finally {
      await http.close();
    }
    const [post] = posts();
    assert.ok(post);
    assert.equal(post.attributes['error.type'], 'ECONNREFUSED');
    assert.equal(post.attributes['http.response.status_code'], undefined);
    assert.equal(post.status.code, 2);
    assert.deepEqual(eventsOf(post), ['connect.start', 'connect.error']);
  });

  it('writes trace_id, span_id and trace_flags on log lines inside a sampled span, only when tracing is on', () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const saved = process.env.OTEL_TRACES_EXPORTER;
    process.env.OTEL_TRACES_EXPORTER = 'otlp';
    const traced = createLogger('info', 'test', sink);
    delete process.env.OTEL_TRACES_EXPORTER;
    const untraced = createLogger('info', 'test', sink);
    if (saved !== undefined) process.env.OTEL_TRACES_EXPORTER = saved;

    const ids = tracer().startActiveSpan('attempt', (span) => {
      traced.child({ component: 'delivery' }).info('inside');
      untraced.info('untraced inside');
      span.end();
      return span.spanContext();
    });
    traced.info('after the span');
    assert.deepEqual(
      lines.map((line) => [line.msg, line.trace_id, line.span_id, line.trace_flags]),
      [
        ['inside', ids.traceId, ids.spanId, '01'],
        ['untraced inside', undefined, undefined, undefined],
        ['after the span', undefined, undefined, undefined],
      ],
    );
  });
});

// Spans of the worker's side of a delivery, added only when the worker traces (worker/start.ts): one per attempt, with
// who it is for, its number, outcome and the breaker's state; one client span per POST with the HTTP semantic
// conventions (scheme, host and port only, never the path), and the connection's and answer's moments as its events,
// as undici publishes them. The receiver gets the POST span's W3C traceparent unless DELIVERY_TRACEPARENT=false.
import { subscribe } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import type { Socket } from 'node:net';
import { SpanKind, SpanStatusCode, context, defaultTextMapSetter, trace, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { DELIVERY_DEFERRED, type DeliveryAttemptInput, type DeliveryAttemptOutcome } from '../common/contract';
import { ATTRIBUTE, deliverySpanAttributes, receiverAttributes } from '../common/telemetry/span-attributes';
import { inSpan, tracer } from '../common/telemetry/tracing';
import type { createAttempt } from './attempt';
import type { WebhookHttpClient } from './http/client';

type Attempt = ReturnType<typeof createAttempt>;

/** Each attempt in a span `attempt` below the activity's: project, type, X-Webhook-Id, number and outcome. */
export function traceAttempts(attempt: Attempt): Attempt {
  return (input: DeliveryAttemptInput, lookup) => {
    const { workflowExecution, activityId } = Context.current().info;
    const webhookId = input.webhookId ?? workflowExecution?.workflowId ?? activityId;
    return inSpan('attempt', deliverySpanAttributes({ ...input, webhookId }), async (span) => {
      try {
        const outcome: DeliveryAttemptOutcome = await attempt(input, lookup);
        span.setAttributes({ [ATTRIBUTE.attempt]: outcome.attempt, [ATTRIBUTE.outcome]: outcome.status });
        return outcome;
      } catch (error) {
        if (error instanceof ApplicationFailure) {
          const details = error.details?.[0] as { attempt?: number; reason?: string; waitMs?: number } | undefined;
          const deferred = error.type === DELIVERY_DEFERRED;
          span.setAttributes({
            [ATTRIBUTE.outcome]: deferred ? 'deferred' : 'failed',
            [ATTRIBUTE.failureType]: error.type ?? 'Error',
            ...(details?.attempt !== undefined && { [ATTRIBUTE.attempt]: details.attempt }),
            ...(deferred && details?.reason !== undefined && { [ATTRIBUTE.waitReason]: details.reason }),
            ...(deferred && details?.waitMs !== undefined && { [ATTRIBUTE.waitMs]: details.waitMs }),
          });
        } else span.setAttribute(ATTRIBUTE.outcome, 'failed');
        throw error;
      }
    });
  };
}

/** POST spans, as the HTTP client semantic conventions name them; their events come from undici's channels. */
const posts = new WeakSet<Span>();
/** The POST span each undici request belongs to (created inside it, synchronously). */
const requests = new WeakMap<object, Span>();

/**
 * The worker's HTTP client, each POST in a client span: method, scheme, host, port, status, duration, and the events
 * connect.start / connect.end (DNS, TCP and TLS together: undici publishes no finer steps), request.headers_sent,
 * response.first_byte. With `traceparent`, the receiver gets the span's W3C trace context.
 */
export function traceHttpClient(http: WebhookHttpClient, options: { traceparent: boolean }): WebhookHttpClient {
  subscribeToUndici();
  return {
    post: (url, headers, body, connection, requestOptions) =>
      tracer().startActiveSpan('POST', { kind: SpanKind.CLIENT, attributes: receiverAttributes(url) }, async (span) => {
        posts.add(span);
        const started = performance.now();
        const sent = { ...headers };
        // traceparent (and tracestate) only: never baggage, which a caller may have filled with anything.
        if (options.traceparent) traceContext.inject(context.active(), sent, defaultTextMapSetter);
        try {
          const response = await http.post(url, sent, body, connection, requestOptions);
          span.setAttribute('http.response.status_code', response.statusCode);
          if (response.statusCode >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
          return response;
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          span.setAttribute(
            'error.type',
            typeof code === 'string' ? code : error instanceof Error ? error.name : 'error',
          );
          span.setStatus({ code: SpanStatusCode.ERROR });
          throw error;
        } finally {
          span.setAttribute('webhook.http.duration_ms', Math.round(performance.now() - started));
          span.end();
        }
      }),
    close: () => http.close(),
  };
}

const traceContext = new W3CTraceContextPropagator();
let subscribed = false;

/** undici's diagnostics channels, read once per process, each message turned into an event of its POST span. */
function subscribeToUndici(): void {
  if (subscribed) return;
  subscribed = true;
  // The connection is made in the context of the request that needs it: the active span is that request's POST.
  const activePost = () => {
    const span = trace.getActiveSpan();
    return span && posts.has(span) ? span : undefined;
  };
  subscribe('undici:request:create', (message) => {
    const span = activePost();
    if (span) requests.set((message as { request: object }).request, span);
  });
  subscribe('undici:client:beforeConnect', () => activePost()?.addEvent('connect.start'));
  subscribe('undici:client:connected', (message) => {
    const socket = (message as { socket?: Socket }).socket;
    activePost()?.addEvent('connect.end', {
      ...(socket?.remoteAddress && { 'network.peer.address': socket.remoteAddress }),
      ...(socket?.remotePort && { 'network.peer.port': socket.remotePort }),
      tls: Boolean((socket as { encrypted?: boolean } | undefined)?.encrypted),
    });
  });
  subscribe('undici:client:connectError', (message) => {
    const code = (message as { error?: { code?: unknown } }).error?.code;
    activePost()?.addEvent('connect.error', { 'error.type': typeof code === 'string' ? code : 'error' });
  });
  subscribe('undici:client:sendHeaders', (message) =>
    requests.get((message as { request: object }).request)?.addEvent('request.headers_sent'),
  );
  subscribe('undici:request:headers', (message) =>
    requests.get((message as { request: object }).request)?.addEvent('response.first_byte'),
  );
}

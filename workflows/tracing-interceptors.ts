// Workflow interceptors (not a workflow): Temporal's OpenTelemetry interceptors for a delivery whose start carried a
// trace context, and a span for each wait (a busy endpoint, an open breaker, the interval before a retry) named by its
// timer's summary. A delivery started without one (tracing off, or a client that does not trace) runs through none of
// them: no span, no header, no sink call, and no OpenTelemetry module loaded; nor does one whose trace the emitter did
// not sample (OTEL_TRACES_SAMPLER), whose header is only handed on to its activities. Spans leave through the worker's
// replay-safe sink (not called on replay); nothing here adds a command, so traced and untraced histories replay alike
// (test/workflows/replay.test.ts).
import type * as OpenTelemetryApi from '@opentelemetry/api';
import type * as TemporalOpenTelemetry from '@temporalio/interceptors-opentelemetry/lib/workflow';
import {
  CancelledFailure,
  defaultPayloadConverter,
  type Payload,
  type WorkflowInterceptors,
} from '@temporalio/workflow';
import { ATTRIBUTE, sampledTraceparent } from '../common/telemetry/span-attributes';

/** The header Temporal's client interceptor carries the trace context in (its TRACE_HEADER). */
const TRACE_HEADER = '_tracer-data';

/** Temporal's interceptors and a tracer for one traced workflow run. */
interface Traced {
  inbound: TemporalOpenTelemetry.OpenTelemetryInboundInterceptor;
  outbound: TemporalOpenTelemetry.OpenTelemetryOutboundInterceptor;
  internals: TemporalOpenTelemetry.OpenTelemetryInternalsInterceptor;
  tracer: OpenTelemetryApi.Tracer;
}

/**
 * Loaded for a traced run only. In the worker's reusable V8 context each workflow run evaluates the modules it loads
 * for itself (a module cache per run): OpenTelemetry's SDK loaded for every cached delivery cost ~0.25 MB and ~4 ms of
 * CPU each (bench/README.md), so an untraced run never loads it.
 */
function loadTracing(): Traced {
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded on demand, see above */
  const otel = require('@temporalio/interceptors-opentelemetry/lib/workflow') as typeof TemporalOpenTelemetry;
  const api = require('@opentelemetry/api') as typeof OpenTelemetryApi;
  /* eslint-enable @typescript-eslint/no-require-imports */
  // Made first: Temporal's interceptors register the sandbox's tracer provider, propagator and context manager.
  const inbound = new otel.OpenTelemetryInboundInterceptor();
  return {
    inbound,
    outbound: new otel.OpenTelemetryOutboundInterceptor(),
    internals: new otel.OpenTelemetryInternalsInterceptor(),
    tracer: api.trace.getTracer('webhook-delivery-service'),
  };
}

/** Whether the trace context a start carried is sampled (its traceparent's flag); an unreadable one is not. */
function sampled(header: Payload): boolean {
  try {
    return sampledTraceparent(defaultPayloadConverter.fromPayload<{ traceparent?: unknown }>(header).traceparent);
  } catch {
    return false;
  }
}

/** The workflow's interceptors, made per workflow run by the worker. */
export const interceptors = (): WorkflowInterceptors => {
  // Set by execute, before any outbound call: Temporal's interceptors when this run's trace is sampled; else, for a
  // trace the emitter did not sample, its header, handed on as it is so the activities record nothing either.
  let traced: Traced | undefined;
  let unsampled: Payload | undefined;
  const handOn = <T extends { headers: Record<string, Payload> }>(input: T): T =>
    unsampled ? { ...input, headers: { ...input.headers, [TRACE_HEADER]: unsampled } } : input;
  return {
    inbound: [
      {
        execute(input, next) {
          const header = input.headers[TRACE_HEADER];
          if (header === undefined) return next(input);
          if (!sampled(header)) {
            unsampled = header;
            return next(input);
          }
          traced = loadTracing();
          return traced.inbound.execute(input, next);
        },
        handleSignal: (input, next) => (traced ? traced.inbound.handleSignal(input, next) : next(input)),
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) =>
          traced ? traced.outbound.scheduleActivity(input, next) : next(handOn(input)),
        scheduleLocalActivity: (input, next) =>
          traced ? traced.outbound.scheduleLocalActivity(input, next) : next(handOn(input)),
        getLogAttributes: (input, next) => (traced ? traced.outbound.getLogAttributes(input, next) : next(input)),
        startTimer(input, next) {
          if (!traced) return next(input);
          const span = traced.tracer.startSpan('wait', {
            attributes: {
              [ATTRIBUTE.waitReason]: input.options?.summary ?? 'timer',
              [ATTRIBUTE.waitMs]: input.durationMs,
            },
          });
          const fired = next(input);
          // The wait ends with its timer, or earlier when the resumer's signal cancels it (the breaker let it go).
          fired.then(
            () => endWait(span, 'timer'),
            (error: unknown) => endWait(span, error instanceof CancelledFailure ? 'signal' : 'error'),
          );
          return fired;
        },
      },
    ],
    internals: [
      {
        dispose(input, next) {
          if (traced) void traced.internals.dispose(input, next);
          else next(input);
        },
      },
    ],
  };
};

function endWait(span: OpenTelemetryApi.Span, endedBy: 'timer' | 'signal' | 'error'): void {
  span.setAttribute('webhook.wait.ended_by', endedBy);
  span.end();
}

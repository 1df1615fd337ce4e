// Workflow interceptors (not a workflow): Temporal's OpenTelemetry interceptors for a delivery whose start carried a
// trace context, and a span for each wait (a busy endpoint, an open breaker, the interval before a retry) named by its
// timer's summary. A delivery started without one (tracing off, or a client that does not trace) runs through none of
// them: no span, no header, no sink call. Spans leave through the worker's replay-safe sink (not called on replay);
// nothing here adds a command, so traced and untraced histories replay alike (test/replay.test.ts).
import { trace, type Span } from '@opentelemetry/api';
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow';
import { CancelledFailure, type WorkflowInterceptors } from '@temporalio/workflow';
import { ATTRIBUTE } from '../common/span-attributes';

/** The workflow's interceptors, made per workflow run by the worker. */
export const interceptors = (): WorkflowInterceptors => {
  // Set by execute, before any outbound call: whether this run is traced, and Temporal's interceptors when it is.
  let traced: { inbound: OpenTelemetryInboundInterceptor; outbound: OpenTelemetryOutboundInterceptor } | undefined;
  return {
    inbound: [
      {
        execute(input, next) {
          // Only a tracing client's start carries the header (Temporal's interceptors register the sandbox's
          // propagator when first made, so its content is read by them, not here).
          if (input.headers[TRACE_HEADER] === undefined) return next(input);
          traced = { inbound: new OpenTelemetryInboundInterceptor(), outbound: new OpenTelemetryOutboundInterceptor() };
          return traced.inbound.execute(input, next);
        },
        handleSignal: (input, next) => (traced ? traced.inbound.handleSignal(input, next) : next(input)),
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => (traced ? traced.outbound.scheduleActivity(input, next) : next(input)),
        scheduleLocalActivity: (input, next) =>
          traced ? traced.outbound.scheduleLocalActivity(input, next) : next(input),
        getLogAttributes: (input, next) => (traced ? traced.outbound.getLogAttributes(input, next) : next(input)),
        startTimer(input, next) {
          if (!traced) return next(input);
          const span = trace.getTracer('webhook-delivery-service').startSpan('wait', {
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
          if (traced) void new OpenTelemetryInternalsInterceptor().dispose(input, next);
          else next(input);
        },
      },
    ],
  };
};

function endWait(span: Span, endedBy: 'timer' | 'signal' | 'error'): void {
  span.setAttribute('webhook.wait.ended_by', endedBy);
  span.end();
}

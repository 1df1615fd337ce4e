// Tracing as the rest of the code sees it, on the OpenTelemetry API alone: whether this process traces, the service's
// tracer and a span helper. The SDK (exporter, provider) is installed by the entry points (common/telemetry/tracing-sdk.ts) only
// when the OTEL_* variables turn traces on; until then every span here is the API's no-op one.
import { trace, type Span, type Tracer } from '@opentelemetry/api';
import { telemetrySettings } from './settings';

/** Whether this process traces (the OTEL_* variables; see common/telemetry/settings.ts): asked at start-up only. */
export const tracingEnabled = (env: NodeJS.ProcessEnv = process.env): boolean => telemetrySettings(env).traces;

/** The service's own tracer (a no-op one while no provider is registered). */
export const tracer = (): Tracer => trace.getTracer('webhook-delivery-service');

/**
 * The active span's ids for a log line, with `trace_flags` as OpenTelemetry's log correlation writes it (`01`,
 * sampled); nothing outside a span, or in one that is not sampled (its ids go nowhere).
 */
export function traceFields(): { trace_id?: string; span_id?: string; trace_flags?: string } {
  const context = trace.getActiveSpan()?.spanContext();
  if (!context || (context.traceFlags & 1) === 0) return {};
  return { trace_id: context.traceId, span_id: context.spanId, trace_flags: '01' };
}

/** Runs `fn` in a new active span that ends when it settles, its status an error (named, not its message) on a throw. */
export async function inSpan<T>(
  name: string,
  attributes: Record<string, string | number | boolean | undefined>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return tracer().startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.setStatus({ code: 2, message: error instanceof Error ? error.name : 'error' });
      throw error;
    } finally {
      span.end();
    }
  });
}

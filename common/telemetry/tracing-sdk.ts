// The OpenTelemetry SDK of a process that traces: a tracer provider exporting over OTLP/HTTP (protobuf), installed by
// the worker, the API and the CLI at start when the OTEL_* variables turn traces on, and never loaded otherwise.
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { tracingEnabled } from './tracing';

/** What the worker hands the workflow span sink: the same processor and resource as the process's own spans. */
export interface Tracing {
  spanProcessor: SpanProcessor;
  resource: Resource;
  /** Exports what is buffered (at shutdown; tests read the backend afterwards). */
  flush(): Promise<void>;
}

let installed: Tracing | undefined;

/** The process's resource for every signal: `serviceName` unless OTEL_SERVICE_NAME names it, and the SDK's defaults. */
export const serviceResource = (serviceName: string, env: NodeJS.ProcessEnv = process.env): Resource =>
  Resource.default().merge(new Resource({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || serviceName }));

/**
 * Registers the tracer provider (W3C trace context propagation, async-hooks context) exporting to
 * OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, sampled as OTEL_TRACES_SAMPLER[_ARG] say; once per process. Undefined when
 * tracing is off. The service is `serviceName` unless OTEL_SERVICE_NAME names it.
 */
export function installTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env): Tracing | undefined {
  if (installed || !tracingEnabled(env)) return installed;
  const resource = serviceResource(serviceName, env);
  const spanProcessor = new BatchSpanProcessor(new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  // Trace context only, no baggage: what crosses Temporal and reaches receivers is the trace's ids.
  provider.register({ propagator: new W3CTraceContextPropagator() });
  installed = { spanProcessor, resource, flush: () => provider.forceFlush() };
  return installed;
}

// The worker's side of tracing (common/telemetry/tracing-sdk.ts installs the provider): Temporal's OpenTelemetry activity
// interceptors, the workflow interceptor module every bundle carries, and the sink workflow spans leave through.
import type { InjectedSinks, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import type { OpenTelemetryWorkflowExporter } from '@temporalio/interceptors-opentelemetry/lib/workflow/definitions';
import { workflowSpanAttributes } from '../common/telemetry/span-attributes';
import type { Tracing } from '../common/telemetry/tracing-sdk';

/**
 * Bundled with the workflows whether or not this worker traces: it does nothing for a delivery started without a trace
 * context, and the prebuilt bundle cannot change with the environment.
 */
export const WORKFLOW_INTERCEPTOR_MODULE = require.resolve('../workflows/tracing-interceptors');

/** Each activity (the lookup, every attempt) in a span below its scheduling workflow's. */
export const tracingActivityInterceptors = (): ActivityInterceptorsFactory[] => [
  (ctx) => ({
    inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
    outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
  }),
];

/**
 * The sink the workflow interceptors export their spans through: not called on replay (a replayed span was exported
 * when it ran), and given only the workflow's ids of its WorkflowInfo. Without tracing, a sink that drops them: a
 * delivery a tracing client started still runs its workflow spans, and they go nowhere.
 */
export function workflowSpanSinks(
  tracing: Tracing | undefined,
): InjectedSinks<{ exporter: OpenTelemetryWorkflowExporter }> {
  if (!tracing) return { exporter: { export: { fn: () => undefined } } };
  const exporter = makeWorkflowExporter(tracing.spanProcessor, tracing.resource);
  return {
    exporter: {
      export: {
        fn: (info, spans) => exporter.export.fn(workflowSpanAttributes(info) as unknown as WorkflowInfo, spans),
      },
    },
  };
}

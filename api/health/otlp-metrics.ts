// The API's /metrics series pushed over OTLP/HTTP as well, for operators without Prometheus: OpenTelemetry's periodic
// reader and OTLP exporter, fed by a metric producer that reads the same prom-client registries a scrape reads
// (common/telemetry/prometheus-otlp.ts converts them). Started only when OTLP metrics are asked for by name
// (OTEL_METRICS_EXPORTER=otlp or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT): /metrics is always served, so the shared
// OTEL_EXPORTER_OTLP_ENDPOINT alone (set for traces, say) does not also push metrics to a trace store.
import { hrTime } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { Resource } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader, type MetricProducer } from '@opentelemetry/sdk-metrics';
import type { Registry } from 'prom-client';
import type { Logger } from '../../common/telemetry/logger';
import { prometheusToOtlp } from '../../common/telemetry/prometheus-otlp';
import type { OtlpMetricsExporter } from '../../common/telemetry/settings';
import { serviceResource } from '../../common/telemetry/tracing-sdk';

export interface OtlpMetrics {
  /** Sends what was collected last and stops (at shutdown). */
  shutdown(): Promise<void>;
}

export function startOtlpMetrics(
  serviceName: string,
  readMetrics: () => Promise<Registry>,
  exporter: OtlpMetricsExporter,
  logger: Logger,
): OtlpMetrics {
  const startTime = hrTime();
  const producer: MetricProducer = {
    async collect() {
      try {
        const registry = await readMetrics();
        const metrics = prometheusToOtlp(await registry.getMetricsAsJSON(), startTime, hrTime());
        return {
          resourceMetrics: { resource: Resource.empty(), scopeMetrics: [{ scope: { name: 'webhook-api' }, metrics }] },
          errors: [],
        };
      } catch (error) {
        // As a failed scrape: nothing is sent this time (the per-project gauges come from the database).
        logger.warn({ err: error }, 'API metrics not collected for OTLP: the database did not answer');
        return { resourceMetrics: { resource: Resource.empty(), scopeMetrics: [] }, errors: [error] };
      }
    },
  };
  const reader = new PeriodicExportingMetricReader({
    exporter: new OTLPMetricExporter({ url: exporter.url, headers: exporter.headers }),
    exportIntervalMillis: exporter.intervalMs,
    exportTimeoutMillis: Math.min(30_000, exporter.intervalMs),
    metricProducers: [producer],
  });
  const provider = new MeterProvider({ resource: serviceResource(serviceName), readers: [reader] });
  return { shutdown: () => provider.shutdown() };
}

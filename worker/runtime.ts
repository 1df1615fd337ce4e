import { DefaultLogger, Runtime, makeTelemetryFilterString, type LogEntry } from '@temporalio/worker';
import { DELIVERY_LATENCY_BUCKETS } from '../common/telemetry/delivery-metrics';
import type { Logger } from '../common/telemetry/logger';
import type { OtlpMetricsExporter } from '../common/telemetry/settings';

let installed = false;

/** Where the SDK's Prometheus endpoint listens (WORKER_METRICS_HOST, WORKER_METRICS_PORT). */
export interface RuntimeMetricsAddress {
  host: string;
  port: number;
}

/** `host:port` for the exporter; an IPv6 host goes in brackets. */
export const metricsBindAddress = ({ host, port }: RuntimeMetricsAddress): string =>
  host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;

/**
 * Routes the SDK's logs (workflow and activity `log`, core) into pino, and serves its metrics at `metrics`.
 * Process-wide and only possible before the first NativeConnection, so it runs once; signals are left to our own
 * shutdown code. The endpoint has no authentication: keep it on loopback unless a network policy guards it.
 */
export function installRuntimeLogger(
  logger: Logger,
  metrics?: RuntimeMetricsAddress,
  /** Instead of the Prometheus endpoint: the same series pushed over OTLP/HTTP (the OTEL_* metrics variables). */
  otlpMetrics?: OtlpMetricsExporter,
): void {
  if (installed) return;
  const sdk = logger.child({ component: 'temporal' });
  try {
    Runtime.install({
      logger: new DefaultLogger('INFO', (entry: LogEntry) => {
        const level = entry.level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error';
        sdk[level]({ ...entry.meta }, entry.message);
      }),
      telemetryOptions: {
        logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'WARN', other: 'ERROR' }) },
        // The SDK's metrics and the delivery counters of the activities' meter (WORKER_METRICS_PORT). The latency is
        // recorded in seconds: without its own buckets it would get the core's, meant for milliseconds (50 to 10000).
        ...(metrics && {
          metrics: {
            prometheus: {
              bindAddress: metricsBindAddress(metrics),
              histogramBucketOverrides: { webhook_delivery_latency: DELIVERY_LATENCY_BUCKETS },
            },
          },
        }),
        ...(otlpMetrics && {
          metrics: {
            otel: {
              url: otlpMetrics.url,
              http: true,
              headers: otlpMetrics.headers,
              metricsExportInterval: otlpMetrics.intervalMs,
              histogramBucketOverrides: { webhook_delivery_latency: DELIVERY_LATENCY_BUCKETS },
            },
          },
        }),
      },
      shutdownSignals: [],
    });
  } catch (error) {
    // Something in this process (a test environment, an embedding launcher) created the runtime first.
    logger.warn({ err: error }, 'Temporal runtime already installed: SDK logs keep their existing destination');
  }
  installed = true;
}

import { DefaultLogger, Runtime, makeTelemetryFilterString, type LogEntry } from '@temporalio/worker';
import type { Logger } from '../common/logger';

let installed = false;

/**
 * Routes the SDK's logs (workflow and activity `log`, core) into pino, and serves its metrics on metricsPort. Process-wide and only possible before
 * the first NativeConnection, so it runs once; signals are left to our own shutdown code.
 */
export function installRuntimeLogger(logger: Logger, metricsPort?: number): void {
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
        // The SDK's metrics and the delivery counters of the activities' meter (WORKER_METRICS_PORT).
        ...(metricsPort !== undefined && { metrics: { prometheus: { bindAddress: `0.0.0.0:${metricsPort}` } } }),
      },
      shutdownSignals: [],
    });
  } catch (error) {
    // Something in this process (a test environment, an embedding launcher) created the runtime first.
    logger.warn({ err: error }, 'Temporal runtime already installed: SDK logs keep their existing destination');
  }
  installed = true;
}

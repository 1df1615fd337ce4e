// Entry of `npm run start:worker`: a delivery worker, stopped gracefully by SIGINT/SIGTERM.
import { loadConfig } from '../common/config';
import { createLogger, prettyLogs } from '../common/telemetry/logger';
import { onShutdownSignal } from '../common/signals';
import { startWorker } from './start';

export { startWorker, type RunningWorker } from './start';
export { installRuntimeLogger } from './runtime';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, { database: true, audit: true, persons: true, standalone: true });
  } catch (error) {
    createLogger().fatal((error as Error).message);
    process.exitCode = 1;
    return;
  }
  const logger = createLogger(config.LOG_LEVEL, 'webhooks', undefined, {
    pretty: prettyLogs(config),
    otlpService: 'webhook-worker',
  });
  let running;
  try {
    running = await startWorker(config, logger);
  } catch (error) {
    // What start-up installed (the Temporal runtime, its exporters) may hold the process open: a failed start exits.
    logger.fatal({ err: error }, 'worker failed to start');
    process.exit(1);
  }
  // In-flight delivery attempts get WORKER_SHUTDOWN_GRACE_MS to finish; the rest is closing connections.
  onShutdownSignal(logger, config.WORKER_SHUTDOWN_GRACE_MS + 10_000, () => running.shutdown());
  await running.run;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    createLogger().fatal({ err: error }, 'worker crashed');
    process.exitCode = 1;
  });
}

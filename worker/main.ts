// Entry of `npm run start:worker`: a delivery worker, stopped gracefully by SIGINT/SIGTERM.
import { loadConfig } from '../common/config';
import { createLogger } from '../common/logger';
import { startWorker } from './start';

export { startWorker, type RunningWorker } from './start';
export { installRuntimeLogger } from './runtime';

async function main(): Promise<void> {
  const logger = createLogger();
  let config;
  try {
    config = loadConfig(process.env, { database: true });
  } catch (error) {
    logger.fatal((error as Error).message);
    process.exitCode = 1;
    return;
  }
  const running = await startWorker(config, logger);
  const stop = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'shutting down: finishing in-flight delivery attempts');
    // A second signal while draining means "now".
    process.once(signal, () => process.exit(130));
    void running.shutdown();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await running.run;
  logger.info('worker stopped');
}

if (require.main === module) {
  main().catch((error: unknown) => {
    createLogger().fatal({ err: error }, 'worker crashed');
    process.exitCode = 1;
  });
}

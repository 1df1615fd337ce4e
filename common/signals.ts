import type { Logger } from './telemetry/logger';

/**
 * A repeat this close to the first signal is the same Ctrl-C: a terminal signals the whole process group, and npm
 * forwards the signal to its child as well.
 */
const SAME_SIGNAL_WINDOW_MS = 1_000;

/**
 * On the first SIGINT or SIGTERM runs `stop` once (logging its outcome) and exits with 1 if it takes longer than
 * `timeoutMs`; a later signal, not the duplicate of the first, exits at once with 130.
 */
export function onShutdownSignal(logger: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let firstAt: number | undefined;
  const handle = (signal: NodeJS.Signals) => {
    if (firstAt !== undefined) {
      if (Date.now() - firstAt < SAME_SIGNAL_WINDOW_MS) return;
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    firstAt = Date.now();
    logger.info({ signal }, 'shutting down');
    setTimeout(() => {
      logger.error({ timeoutMs }, 'shutdown timed out');
      process.exit(1);
    }, timeoutMs).unref();
    stop().then(
      () => logger.info('stopped'),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
      },
    );
  };
  process.on('SIGINT', handle).on('SIGTERM', handle);
}

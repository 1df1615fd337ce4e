import type { Logger } from '../common/telemetry/logger';
import { eraseExpiredPreviousSecrets, type Db } from '../db';

/**
 * Erases, every `intervalMs`, the previous secrets whose rotation overlap is over, also of registrations no delivery
 * reads (an attempt erases its own on sight). Every worker may run it: the UPDATE is idempotent. Returns the stop.
 */
export function startSecretSweep(db: Db, intervalMs: number, logger: Logger): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    eraseExpiredPreviousSecrets(db)
      .then((erased) => erased > 0 && logger.info({ erased }, 'expired previous webhook secrets erased'))
      .catch((error: unknown) => logger.warn({ err: error }, 'could not erase expired previous webhook secrets'))
      .finally(() => (running = false));
  }, intervalMs);
  // Never what keeps the process alive.
  timer.unref();
  return () => clearInterval(timer);
}

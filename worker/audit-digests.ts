import type { Logger } from '../common/telemetry/logger';
import { writeAuditDigest, type Db } from '../db';

/**
 * Writes a signed digest of the audit trail soon after start and every `intervalMs` (AUDIT_DIGEST_INTERVAL_MS). Every worker
 * may run it: each digest file is created exclusively, so two workers write two successive digests, never one twice.
 */
export function startAuditDigests(db: Db, intervalMs: number, logger: Logger): () => void {
  let running = false;
  const write = (reason: 'start' | 'schedule') => {
    if (running) return;
    running = true;
    writeAuditDigest(db, reason)
      .then((digest) => logger.info({ sequence: digest.sequence, reason }, 'audit digest written'))
      .catch((error: unknown) => logger.error({ err: error }, 'could not write the audit digest'))
      .finally(() => (running = false));
  };
  // Soon after start, once the API has migrated a new database (`npm start` starts the worker first).
  const first = setTimeout(() => write('start'), Math.min(intervalMs, 10_000));
  const timer = setInterval(() => write('schedule'), intervalMs);
  // Never what keeps the process alive.
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}

import type { Logger } from '../common/telemetry/logger';
import { purgeDeliveries, type Db } from '../db';

/** How often a worker purges the delivery log of entries past DELIVERY_LOG_RETENTION_DAYS. */
export const RETENTION_PURGE_INTERVAL_MS = 60 * 60_000;

/**
 * Purges the delivery log now and then every hour; every worker does it (a delete is idempotent, so several
 * workers only repeat each other). Returns the function that stops it.
 */
export function startDeliveryLogRetention(db: Db, retentionDays: number, logger: Logger): () => void {
  const purge = async () => {
    try {
      const purged = await purgeDeliveries(db, retentionDays);
      if (purged > 0) logger.info({ purged, retentionDays }, 'delivery log entries past retention purged');
    } catch (error) {
      logger.warn({ err: error }, 'delivery log purge failed; retried at the next interval');
    }
  };
  void purge();
  const timer = setInterval(() => void purge(), RETENTION_PURGE_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

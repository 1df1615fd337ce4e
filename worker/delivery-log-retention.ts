import type { Logger } from '../common/telemetry/logger';
import { maintainDeliveryLog, type Db } from '../db';

/** How often a worker maintains the delivery log's partitions (DELIVERY_LOG_RETENTION_DAYS). */
export const RETENTION_PURGE_INTERVAL_MS = 60 * 60_000;

/** How many days ahead the daily partitions are made: a week of workers stopped still writes to its own day's. */
export const PARTITION_DAYS_AHEAD = 7;

/**
 * Maintains the delivery log now and then every hour: makes the days ahead and drops whole days past retention
 * (db/migrations/029). Every worker does it; the function takes a lock, so a second only finds the work done.
 * Returns the function that stops it.
 */
export function startDeliveryLogRetention(db: Db, retentionDays: number, logger: Logger): () => void {
  const maintain = async () => {
    try {
      const days = await maintainDeliveryLog(db, retentionDays, PARTITION_DAYS_AHEAD);
      const of = (action: string) => days.filter((day) => day.action === action);
      const [created, dropped, kept, busy] = [of('created'), of('dropped'), of('kept'), of('busy')];
      if (dropped.length > 0)
        logger.info(
          {
            retentionDays,
            days: dropped.map((day) => day.day),
            deliveries: dropped.reduce((sum, day) => sum + (day.deliveries ?? 0), 0),
            attempts: dropped.reduce((sum, day) => sum + (day.attempts ?? 0), 0),
          },
          'delivery log days past retention dropped',
        );
      if (kept.length > 0)
        logger.info(
          { retentionDays, days: kept.map((day) => ({ day: day.day, open: day.deliveries })) },
          'delivery log days past retention kept: they hold pending or held deliveries',
        );
      if (busy.length > 0)
        logger.warn({ days: busy.map((day) => day.day) }, 'delivery log days not dropped: locked; retried next time');
      if (created.length > 0) logger.debug({ days: created.map((day) => day.day) }, 'delivery log days made');
    } catch (error) {
      logger.warn({ err: error }, 'delivery log maintenance failed; retried at the next interval');
    }
  };
  void maintain();
  const timer = setInterval(() => void maintain(), RETENTION_PURGE_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

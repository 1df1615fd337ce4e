import type { Logger } from '../common/telemetry/logger';
import { CLIENT_CERTIFICATE_WARNING_DAYS } from '../common/registration/client-certificate';
import { endExpiredPauses, expiringCertificates, takeQueuedNotices, type Db } from '../db';
import type { Notify } from '../activities/notices';

/**
 * Sends, every `intervalMs`, the notices the API queued, and ends the pauses that ran out (PAUSE_MAX_HOURS after they began): the operators read it in the
 * log and the audit trail (`webhook.pause.expire`, written with the change), the project's contacts in a notice.
 * Their held deliveries need no help: they were listed as due at the pause's end, and the breaker resumer wakes them,
 * paced. Every worker may run it. Returns the stop.
 */
export function startPauseExpiry(db: Db, logger: Logger, intervalMs = 30_000, notify?: Notify): () => void {
  let running = false;
  const sweep = async () => {
    // What the API queued with its actions (a pause started or ended early): the API has no mail server of its own.
    if (notify) for (const notice of await takeQueuedNotices(db)) notify(notice);
    // Client certificates near their end: the project is told (at most hourly, like every notice).
    if (notify)
      for (const { projectId, notAfter } of await expiringCertificates(
        db,
        CLIENT_CERTIFICATE_WARNING_DAYS * 86_400_000,
      ))
        notify({ condition: 'certificate-expiring', projectId, facts: { notAfter: notAfter.toISOString() } });
    for (const ended of await endExpiredPauses(db)) {
      notify?.({
        condition: 'pause-ended',
        projectId: ended.projectId,
        facts: {
          endedBy: 'its end time passing',
          pausedAt: ended.pausedAt.toISOString(),
          pausedUntil: ended.pausedUntil.toISOString(),
        },
      });
      logger.warn(
        { projectId: ended.projectId, pausedAt: ended.pausedAt.toISOString() },
        'webhook pause ended by itself (PAUSE_MAX_HOURS): held deliveries resume',
      );
    }
  };
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweep()
      .catch((error: unknown) => logger.warn({ err: error }, 'could not end expired webhook pauses'))
      .finally(() => (running = false));
  }, intervalMs);
  // Never what keeps the process alive.
  timer.unref();
  return () => clearInterval(timer);
}

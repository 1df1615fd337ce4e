import type { Logger } from '../common/logger';
import { appendAuditEvent, endExpiredPauses, type Db } from '../db';

/**
 * Ends, every `intervalMs`, the pauses that ran out (PAUSE_MAX_HOURS after they began): the operators read it in the
 * log and the audit trail (`webhook.pause.expire`). Their held deliveries need no help: they were listed as due at
 * the pause's end, and the breaker resumer wakes them, paced. Every worker may run it. Returns the stop.
 */
export function startPauseExpiry(db: Db, logger: Logger, intervalMs = 30_000): () => void {
  let running = false;
  const sweep = async () => {
    for (const ended of await endExpiredPauses(db)) {
      logger.warn(
        { projectId: ended.projectId, pausedAt: ended.pausedAt.toISOString() },
        'webhook pause ended by itself (PAUSE_MAX_HOURS): held deliveries resume',
      );
      await appendAuditEvent(db, {
        actor: { kind: 'system' },
        action: 'webhook.pause.expire',
        outcome: 'ok',
        projectId: ended.projectId,
        registrationId: ended.registrationId,
        changes: { pausedAt: ended.pausedAt.toISOString(), pausedUntil: ended.pausedUntil.toISOString() },
      });
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

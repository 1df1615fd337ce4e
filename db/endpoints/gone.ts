import { appendAuditEvent } from '../audit/events';
import type { Db } from '../connection';
import { queueNotice } from './notices';
import type { PauseState } from './pause';

/**
 * A receiver that answers 410 Gone (Standard Webhooks: the endpoint is gone) holds its registration's deliveries as a
 * member's pause does, but without an end of its own: a fall must wait with the others, not fail, until a member has
 * fixed the receiver and resumes (resumeRegistration clears it as it ends a pause).
 */

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const REGISTRATIONS = 'webhook_registrations';

/**
 * Holds the registration's deliveries because its receiver answered `statusCode` (410): unless a hold or a pause is
 * already under way, the hold starts now, with its `webhook.gone` audit row (actor `system`) and the contacts'
 * `receiver-gone` notice in the same transaction. Returns the hold as it now is (`started` when this call began it);
 * undefined when the registration is gone too.
 */
export async function holdForGone(
  db: Db,
  registrationId: string,
  statusCode: number,
): Promise<(PauseState & { started: boolean }) | undefined> {
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw<{
      rows: { id: string; project_id: string; paused_at: Date; started: boolean }[];
    }>(
      // A member's pause under way is left as it is: its end would release deliveries the receiver refuses, so it
      // becomes this hold (no end of its own); a hold under way is left alone.
      `WITH current AS (
         SELECT id, pause_reason IS NOT NULL AS holding FROM ${REGISTRATIONS} WHERE id = :registrationId FOR UPDATE
       )
       UPDATE ${REGISTRATIONS} r
          SET paused_at = CASE WHEN current.holding THEN r.paused_at ELSE now() END,
              paused_until = NULL,
              pause_reason = 'gone',
              paused_by = CASE WHEN current.holding THEN r.paused_by
                               ELSE jsonb_build_object('kind', 'receiver', 'statusCode', CAST(:statusCode AS int)) END,
              updated_at = now()
         FROM current
        WHERE r.id = current.id
       RETURNING r.id, r.project_id, r.paused_at, NOT current.holding AS started`,
      { registrationId, statusCode },
    );
    const [row] = rows;
    if (!row) return undefined;
    const hold = { registrationId: row.id, pausedAt: row.paused_at, pausedUntil: null, reason: 'gone' as const };
    const held = { ...hold, started: row.started };
    if (!row.started) return held;
    const heldAt = row.paused_at.toISOString();
    await appendAuditEvent(trx, {
      actor: { kind: 'system' },
      action: 'webhook.gone',
      outcome: 'ok',
      projectId: row.project_id,
      registrationId: row.id,
      changes: { pauseReason: 'gone', statusCode, pausedAt: heldAt },
    });
    await queueNotice(trx, {
      projectId: row.project_id,
      condition: 'receiver-gone',
      facts: { statusCode, pausedAt: heldAt },
    });
    return held;
  });
}

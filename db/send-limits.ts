import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

/** What a limit counts, per project: TEST events (test endpoint and TEST redeliveries), redeliver calls, recoveries. */
export type SendLimitKind = 'test' | 'redeliver' | 'recover';

export interface SendLimitRule {
  /** Sends admitted in any `windowMs` (a sliding window). */
  perWindow: number;
  windowMs: number;
  /** One send in flight at a time, holding the slot at most this long; absent: no in-flight limit. */
  leaseMs?: number;
}

export type SendAdmission =
  /** Admitted; `holder` releases the in-flight slot, when the rule has one. */
  | { admitted: true; holder: string }
  /** Refused: another send holds the slot, or the window is full; try again in `retryAfterMs`. */
  | { admitted: false; limit: 'in-flight' | 'rate'; retryAfterMs: number };

/** What the database holds of one project's limit. */
export interface SendLimitState {
  sentAt: Date[];
  leaseUntil: Date | null;
}

/**
 * The rule applied at `now`: refused while an unexpired lease holds the slot or `perWindow` sends fall within the
 * window; else admitted, with the window's sends to keep (older ones are dropped, so the row stays small).
 */
export function decideSend(
  state: SendLimitState,
  rule: SendLimitRule,
  now: Date,
): { admitted: true; sentAt: Date[] } | Extract<SendAdmission, { admitted: false }> {
  const at = now.getTime();
  const leaseUntil = state.leaseUntil?.getTime();
  if (rule.leaseMs !== undefined && leaseUntil !== undefined && leaseUntil > at)
    return { admitted: false, limit: 'in-flight', retryAfterMs: leaseUntil - at };
  const recent = state.sentAt.map((t) => t.getTime()).filter((t) => t > at - rule.windowMs);
  recent.sort((a, b) => a - b);
  // The window has room again once this send leaves it.
  const freesSlot = recent[recent.length - rule.perWindow];
  if (freesSlot !== undefined) return { admitted: false, limit: 'rate', retryAfterMs: freesSlot + rule.windowMs - at };
  return { admitted: true, sentAt: [...recent.map((t) => new Date(t)), now] };
}

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const TABLE = 'webhook_send_limits';

interface Columns {
  sent_at: Date[];
  lease_until: Date | null;
  db_now: Date;
}

/**
 * Admits one send of `kind` for the project if its rule allows, atomically for every API process (the row is locked
 * for the decision). Time is the database's clock, one for every process; `at` replaces it in tests.
 */
export async function admitSend(
  db: Knex,
  projectId: string,
  kind: SendLimitKind,
  rule: SendLimitRule,
  at?: Date,
): Promise<SendAdmission> {
  return db.transaction(async (trx) => {
    const key = { project_id: projectId, kind };
    await trx(TABLE).insert(key).onConflict(['project_id', 'kind']).ignore();
    const { rows } = await trx.raw<{ rows: Columns[] }>(
      `SELECT sent_at, lease_until, now() AS db_now FROM ${TABLE} WHERE project_id = ? AND kind = ? FOR UPDATE`,
      [projectId, kind],
    );
    const row = rows[0] as Columns; // inserted above, and never deleted while its project lives
    const now = at ?? row.db_now;
    const decision = decideSend({ sentAt: row.sent_at, leaseUntil: row.lease_until }, rule, now);
    if (!decision.admitted) return decision;
    const holder = randomUUID();
    await trx(TABLE)
      .where(key)
      .update({
        sent_at: decision.sentAt,
        ...(rule.leaseMs !== undefined && {
          lease_holder: holder,
          lease_until: new Date(now.getTime() + rule.leaseMs),
        }),
      });
    return { admitted: true, holder };
  });
}

/** Frees the in-flight slot, if `holder` still holds it (an expired lease may have passed to another send). */
export async function releaseSendSlot(db: Knex, projectId: string, kind: SendLimitKind, holder: string): Promise<void> {
  await db(TABLE)
    .where({ project_id: projectId, kind, lease_holder: holder })
    .update({ lease_holder: null, lease_until: null });
}

/** Keeps the in-flight slot `leaseMs` from now (or `at`), if `holder` still holds it. */
export async function extendSendSlot(
  db: Knex,
  projectId: string,
  kind: SendLimitKind,
  holder: string,
  leaseMs: number,
  at?: Date,
): Promise<void> {
  await db(TABLE)
    .where({ project_id: projectId, kind, lease_holder: holder })
    .update({
      lease_until: at ? new Date(at.getTime() + leaseMs) : db.raw(`now() + ? * interval '1 millisecond'`, [leaseMs]),
    });
}

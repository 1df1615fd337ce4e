import type { Db } from '../connection';

/** A project's own notification contacts: a URL for signed notices, e-mail addresses, or both. */
export interface NotificationContacts {
  url: string | null;
  emails: string[];
}

/**
 * The conditions a project is told of, each at most once an hour (a certificate's end, once a day; a pause, and a hold
 * its receiver's 410 began, each time).
 */
export const NOTICE_CONDITIONS = [
  'breaker-open',
  'recovered',
  'delivery-gave-up',
  'pause-started',
  'pause-ended',
  'receiver-gone',
  'certificate-expiring',
] as const;
export type NoticeCondition = (typeof NOTICE_CONDITIONS)[number];

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const CONTACTS = 'project_notification_contacts';
// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const NOTICES = 'project_notices';

/** Sets the project's contacts (none of either removes them). */
export async function setNotificationContacts(
  db: Db,
  projectId: string,
  contacts: NotificationContacts,
): Promise<NotificationContacts> {
  if (contacts.url === null && contacts.emails.length === 0) {
    await db(CONTACTS).where({ project_id: projectId }).delete();
    return contacts;
  }
  await db(CONTACTS)
    .insert({ project_id: projectId, url: contacts.url, emails: contacts.emails })
    .onConflict('project_id')
    .merge({ url: contacts.url, emails: contacts.emails, updated_at: db.fn.now() });
  return contacts;
}

/** The project's contacts; none when never set. */
export async function findNotificationContacts(db: Db, projectId: string): Promise<NotificationContacts> {
  const row = await db(CONTACTS)
    .where({ project_id: projectId })
    .first<{ url: string | null; emails: string[] } | undefined>('url', 'emails');
  return { url: row?.url ?? null, emails: row?.emails ?? [] };
}

const HOUR_MS = 3_600_000;

/**
 * How often a condition may be told: an hour, but a client certificate's coming end once a day (it stays true for up
 * to 14 days: hourly, it would be 336 notices), and every pause's start and end and every hold a 410 began (a second
 * one within the hour must not hold falls unannounced).
 */
export const noticeIntervalMs = (condition: NoticeCondition): number =>
  condition === 'certificate-expiring'
    ? 24 * HOUR_MS
    : condition === 'pause-started' || condition === 'pause-ended' || condition === 'receiver-gone'
      ? 0
      : HOUR_MS;

/**
 * Claims the right to tell the project of `condition` now: true for one caller, and then for none until `everyMs` has
 * passed (the condition's interval by default), whichever worker asks.
 */
export async function claimNotice(
  db: Db,
  projectId: string,
  condition: NoticeCondition,
  everyMs = noticeIntervalMs(condition),
): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>(
    `INSERT INTO ${NOTICES} AS n (project_id, condition, sent_at) VALUES (:projectId, :condition, now())
     ON CONFLICT (project_id, condition) DO UPDATE SET sent_at = now()
      WHERE n.sent_at <= now() - :everyMs * interval '1 millisecond'
     RETURNING 1`,
    { projectId, condition, everyMs },
  );
  return rows.length > 0;
}

/** Registrations whose client certificate expires within `withinMs` (or has expired), for the worker's notices. */
export async function expiringCertificates(db: Db, withinMs: number): Promise<{ projectId: string; notAfter: Date }[]> {
  const rows = await db('webhook_registrations')
    .whereNotNull('client_certificate_not_after')
    .where('client_certificate_not_after', '<=', db.raw(`now() + ? * interval '1 millisecond'`, [withinMs]))
    .select<{ project_id: string; client_certificate_not_after: Date }[]>('project_id', 'client_certificate_not_after');
  return rows.map((row) => ({ projectId: row.project_id, notAfter: row.client_certificate_not_after }));
}

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const OUTBOX = 'project_notice_outbox';

/** A notice the API queued with its action, for the worker to send. */
export interface QueuedNotice {
  projectId: string;
  condition: NoticeCondition;
  facts: Record<string, string | number>;
}

/** Queues a notice in the caller's transaction: it is sent (by a worker) only if the action commits. */
export async function queueNotice(db: Db, notice: QueuedNotice): Promise<void> {
  await db(OUTBOX).insert({ project_id: notice.projectId, condition: notice.condition, facts: notice.facts });
}

/** Takes up to `limit` queued notices, oldest first, each once whichever worker asks. */
export async function takeQueuedNotices(db: Db, limit = 100): Promise<QueuedNotice[]> {
  const { rows } = await db.raw<{
    rows: { id: string; project_id: string; condition: NoticeCondition; facts: QueuedNotice['facts'] }[];
  }>(
    `DELETE FROM ${OUTBOX} WHERE id IN (SELECT id FROM ${OUTBOX} ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
     RETURNING id, project_id, condition, facts`,
    [limit],
  );
  // DELETE … RETURNING keeps no order: the notices of one project go out as their actions happened.
  return rows
    .sort((a, b) => Number(a.id) - Number(b.id))
    .map((row) => ({ projectId: row.project_id, condition: row.condition, facts: row.facts }));
}

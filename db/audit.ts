import { createHash } from 'node:crypto';
import type { Db } from './connection';

/** Who acted: a member's token, a portal link (acting for the member who made it), the operator CLI, or the service. */
export type AuditActorKind = 'member' | 'portal-link' | 'cli' | 'system';
export type AuditOutcome = 'ok' | 'refused' | 'failed';

export interface AuditActor {
  kind: AuditActorKind;
  /** The token's `sub` (for a portal link, the member who made it; for the CLI, the OS user). */
  subject?: string;
  issuer?: string;
  portalLinkId?: string;
  portalCapabilities?: string[];
  requestId?: string;
  callerAddress?: string;
}

/** What an action leaves in the trail. `changes` never holds a secret, a token, a payload or a field of an event. */
export interface AuditEventInput {
  actor: AuditActor;
  action: string;
  outcome: AuditOutcome;
  projectId?: string;
  registrationId?: string;
  deliveryId?: string;
  changes?: Record<string, unknown>;
}

export interface AuditEventRow extends AuditEventInput {
  /** bigserial, as a string. */
  id: string;
  /** Database time, UTC, to the microsecond: the form the hash covers. */
  at: string;
  prevHash: string;
  hash: string;
}

interface Columns {
  id: string;
  at: string;
  actor_kind: AuditActorKind;
  actor_subject: string | null;
  actor_issuer: string | null;
  portal_link_id: string | null;
  portal_capabilities: string[] | null;
  request_id: string | null;
  caller_address: string | null;
  action: string;
  outcome: AuditOutcome;
  project_id: string | null;
  registration_id: string | null;
  delivery_id: string | null;
  changes: Record<string, unknown> | null;
  prev_hash: string;
  hash: string;
}

const TABLE = 'audit_events';
/** The chain's first row follows this. */
export const AUDIT_GENESIS_HASH = '0'.repeat(64);
/** pg_advisory_xact_lock key held while a row is chained: every API process appends to one chain, one at a time. */
export const AUDIT_CHAIN_LOCK = 0x61756469_74; // 'audit'
const AT_UTC = `to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** JSON with object keys sorted at every depth: jsonb keeps no key order, so the hash cannot depend on one. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** sha256 over the row's content, in a fixed order, and the previous row's hash. */
export function auditRowHash(c: Omit<Columns, 'hash'>): string {
  const content = [
    'audit-v1',
    c.id,
    c.at,
    c.actor_kind,
    c.actor_subject,
    c.actor_issuer,
    c.portal_link_id,
    c.portal_capabilities,
    c.request_id,
    c.caller_address,
    c.action,
    c.outcome,
    c.project_id,
    c.registration_id,
    c.delivery_id,
    c.changes,
    c.prev_hash,
  ];
  return createHash('sha256').update(canonicalJson(content)).digest('hex');
}

const toRow = (c: Columns): AuditEventRow => ({
  id: c.id,
  at: c.at,
  actor: {
    kind: c.actor_kind,
    ...(c.actor_subject !== null && { subject: c.actor_subject }),
    ...(c.actor_issuer !== null && { issuer: c.actor_issuer }),
    ...(c.portal_link_id !== null && { portalLinkId: c.portal_link_id }),
    ...(c.portal_capabilities !== null && { portalCapabilities: c.portal_capabilities }),
    ...(c.request_id !== null && { requestId: c.request_id }),
    ...(c.caller_address !== null && { callerAddress: c.caller_address }),
  },
  action: c.action,
  outcome: c.outcome,
  ...(c.project_id !== null && { projectId: c.project_id }),
  ...(c.registration_id !== null && { registrationId: c.registration_id }),
  ...(c.delivery_id !== null && { deliveryId: c.delivery_id }),
  ...(c.changes !== null && { changes: c.changes }),
  prevHash: c.prev_hash,
  hash: c.hash,
});

const isTransaction = (db: Db) => (db as { isTransaction?: boolean }).isTransaction === true;

/**
 * Appends one event to the chain, inside the caller's transaction (one is opened when given none), so the row commits
 * or rolls back with the action it records. The advisory lock, held to the end of that transaction, orders the chain:
 * the id, the time and the previous hash are read under it.
 */
export async function appendAuditEvent(db: Db, event: AuditEventInput): Promise<AuditEventRow> {
  if (!isTransaction(db)) return db.transaction((trx) => appendAuditEvent(trx, event));
  await db.raw('SELECT pg_advisory_xact_lock(?)', [AUDIT_CHAIN_LOCK]);
  const last = await db<Columns>(TABLE).orderBy('id', 'desc').first('hash');
  const { rows } = await db.raw<{ rows: { id: string; at: string }[] }>(
    `SELECT nextval(pg_get_serial_sequence('${TABLE}', 'id'))::text AS id,
            ${AT_UTC.replace('at AT', 'clock_timestamp() AT')} AS at`,
  );
  const { id, at } = rows[0]!;
  const { actor } = event;
  const columns: Omit<Columns, 'hash'> = {
    id,
    at,
    actor_kind: actor.kind,
    actor_subject: actor.subject ?? null,
    actor_issuer: actor.issuer ?? null,
    portal_link_id: actor.portalLinkId ?? null,
    portal_capabilities: actor.portalCapabilities ?? null,
    request_id: actor.requestId ?? null,
    caller_address: actor.callerAddress ?? null,
    action: event.action,
    outcome: event.outcome,
    project_id: event.projectId ?? null,
    registration_id: event.registrationId ?? null,
    delivery_id: event.deliveryId ?? null,
    changes: event.changes ?? null,
    prev_hash: last?.hash ?? AUDIT_GENESIS_HASH,
  };
  const hash = auditRowHash(columns);
  await db(TABLE).insert({
    ...columns,
    changes: columns.changes === null ? null : JSON.stringify(columns.changes),
    hash,
  });
  return toRow({ ...columns, hash });
}

const SELECT_COLUMNS = [
  'id',
  `${AT_UTC} AS at`,
  'actor_kind',
  'actor_subject',
  'actor_issuer',
  'portal_link_id',
  'portal_capabilities',
  'request_id',
  'caller_address',
  'action',
  'outcome',
  'project_id',
  'registration_id',
  'delivery_id',
  'changes',
  'prev_hash',
  'hash',
];

async function readPage(
  db: Db,
  afterId: string | undefined,
  limit: number,
  window: { since?: Date; until?: Date } = {},
): Promise<Columns[]> {
  const query = db<Columns>(TABLE)
    .select(db.raw(SELECT_COLUMNS.map((c) => (c === 'id' ? 'id::text AS id' : c)).join(', ')))
    // The table's bigint id: the output column of that name is text, and sorts as text.
    .orderBy(`${TABLE}.id`)
    .limit(limit);
  if (afterId !== undefined) void query.where(`${TABLE}.id`, '>', afterId);
  if (window.since !== undefined) void query.where(`${TABLE}.at`, '>=', window.since);
  if (window.until !== undefined) void query.where(`${TABLE}.at`, '<', window.until);
  return (await query) as unknown as Columns[];
}

/** Every event in [since, until), oldest first, a page at a time (the export's JSON lines). */
export async function* auditEventsInWindow(
  db: Db,
  window: { since?: Date; until?: Date },
  pageSize = 1000,
): AsyncGenerator<AuditEventRow> {
  let afterId: string | undefined;
  for (;;) {
    const page = await readPage(db, afterId, pageSize, window);
    for (const row of page) yield toRow(row);
    if (page.length < pageSize) return;
    afterId = page[page.length - 1]!.id;
  }
}

export interface AuditFilter {
  projectId?: string;
  /** The actor's subject. */
  subject?: string;
  action?: string;
  /** at >= since, at < until. */
  since?: Date;
  until?: Date;
  /** Rows older than this id (the cursor). */
  beforeId?: string;
  limit: number;
}

/** Events newest first, filtered; a page is `limit` rows. */
export async function listAuditEvents(db: Db, filter: AuditFilter): Promise<AuditEventRow[]> {
  const query = db<Columns>(TABLE)
    .select(db.raw(SELECT_COLUMNS.map((c) => (c === 'id' ? 'id::text AS id' : c)).join(', ')))
    .orderBy(`${TABLE}.id`, 'desc')
    .limit(filter.limit);
  if (filter.projectId !== undefined) void query.where('project_id', filter.projectId);
  if (filter.subject !== undefined) void query.where('actor_subject', filter.subject);
  if (filter.action !== undefined) void query.where('action', filter.action);
  if (filter.since !== undefined) void query.where(`${TABLE}.at`, '>=', filter.since);
  if (filter.until !== undefined) void query.where(`${TABLE}.at`, '<', filter.until);
  if (filter.beforeId !== undefined) void query.where(`${TABLE}.id`, '<', filter.beforeId);
  return ((await query) as unknown as Columns[]).map(toRow);
}

/**
 * Removes rows older than `cutoff` from the oldest end only, always keeping the newest row: the first kept row's
 * prev_hash is the chain's anchor from then on. The prune is itself recorded (a `system` row naming how many rows went
 * and the anchor), in the same transaction. Needs DELETE on the table: run as the owner, not the application role.
 */
export async function pruneAuditEvents(db: Db, cutoff: Date): Promise<{ removed: number; anchor?: string }> {
  if (!isTransaction(db)) return db.transaction((trx) => pruneAuditEvents(trx, cutoff));
  await db.raw('SELECT pg_advisory_xact_lock(?)', [AUDIT_CHAIN_LOCK]);
  const newest = await db<Columns>(TABLE).max<{ max: string | null }>('id as max').first();
  const firstKept = await db<Columns>(TABLE)
    .where('at', '>=', cutoff)
    .orWhere('id', newest?.max ?? '0')
    .orderBy('id')
    .first('id', 'prev_hash');
  if (!firstKept) return { removed: 0 };
  const removed = await db(TABLE).where('id', '<', firstKept.id).delete();
  if (removed === 0) return { removed };
  await appendAuditEvent(db, {
    actor: { kind: 'system' },
    action: 'audit.prune',
    outcome: 'ok',
    changes: { removed, before: cutoff.toISOString(), anchor: firstKept.prev_hash, firstKeptId: String(firstKept.id) },
  });
  return { removed, anchor: firstKept.prev_hash };
}

export type AuditChainFault = 'changed' | 'removed' | 'inserted';

export interface AuditChainReport {
  /** Rows read. */
  rows: number;
  /** The last row's hash (the chain's head), to be kept elsewhere: a later verify proves nothing was rewritten before it. */
  head: string;
  /** The first row's prev_hash: the genesis hash, or the hash of a row pruned by retention. */
  anchor: string;
  /** The first fault, if any. */
  fault?: { kind: AuditChainFault; id: string; detail: string };
}

/**
 * Walks the chain in id order and names the first row that was changed (its content no longer gives its hash),
 * inserted out of order (the row after it follows the row before it), or the first row after rows that were removed
 * (it follows no row in the table). The first row anchors the chain: a retention prune removes rows from the oldest end.
 */
export async function verifyAuditChain(db: Db, pageSize = 1000): Promise<AuditChainReport> {
  let rows = 0;
  let earlier: Columns | undefined; // the row before `before`
  let before: Columns | undefined; // the row before `current`
  let current: Columns | undefined;
  let anchor = AUDIT_GENESIS_HASH;
  let head = AUDIT_GENESIS_HASH;
  const check = (row: Columns, next: Columns | undefined): AuditChainReport['fault'] => {
    const linked = before === undefined || row.prev_hash === before.hash;
    const intact = auditRowHash(row) === row.hash;
    if (linked && intact) return undefined;
    // This row follows the one two back: the row between was slipped in.
    if (before !== undefined && earlier !== undefined && row.prev_hash === earlier.hash)
      return inserted(before, row, earlier);
    // The next row follows the one before this: this row was slipped in.
    if (next !== undefined && before !== undefined && next.prev_hash === before.hash)
      return inserted(row, next, before);
    if (!intact)
      return { kind: 'changed', id: row.id, detail: `row ${row.id} was changed: its content does not give its hash` };
    return {
      kind: 'removed',
      id: row.id,
      detail: `rows before row ${row.id} were removed (or row ${before!.id}'s hash was rewritten): it does not follow row ${before!.id}`,
    };
  };
  const inserted = (row: Columns, next: Columns, previous: Columns) => ({
    kind: 'inserted' as const,
    id: row.id,
    detail: `row ${row.id} was inserted out of order: row ${next.id} follows row ${previous.id}`,
  });
  let afterId: string | undefined;
  for (;;) {
    const page = await readPage(db, afterId, pageSize);
    for (const next of page) {
      if (current === undefined) anchor = next.prev_hash;
      else {
        const fault = check(current, next);
        if (fault) return { rows, head, anchor, fault };
        earlier = before;
        before = current;
      }
      current = next;
      rows += 1;
      head = next.hash;
    }
    if (page.length < pageSize) break;
    afterId = page[page.length - 1]!.id;
  }
  const fault = current && check(current, undefined);
  return { rows, head, anchor, ...(fault && { fault }) };
}

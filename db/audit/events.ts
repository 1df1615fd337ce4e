import type { Knex } from 'knex';
import type { Db } from '../connection';
import { writeAuditDigest } from './digests';
import { canonicalJson, chainingKey, hmacHex, journalCommittedRow, sha256Hex } from './chain';

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

export interface AuditColumns {
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
  /** The chain the row belongs to (auditChainOf), its 1-based place in it, and the HMAC key it was chained with. */
  chain: string;
  seq: string;
  key_id: string | null;
  prev_hash: string;
  hash: string;
}
type Columns = AuditColumns;

const TABLE = 'audit_events';
/** A chain's first row follows this. */
export const AUDIT_GENESIS_HASH = '0'.repeat(64);
/** Rows chained before the keyed chains (migration 020): one unkeyed chain in id order, hashed as audit-v1. */
export const LEGACY_CHAIN = 'legacy';
/** Rows of no project (operator CLI, codec, prunes): a chain of their own. */
export const SERVICE_CHAIN = 'service';
const AT_UTC = `to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * Which chain a row joins, so no tenant's writes wait on another's: a project's members' actions, the delivery path's
 * own rows of that project (breaker transitions, a pause's end: actor `system`), and the rest in the service chain.
 */
export function auditChainOf(event: Pick<AuditEventInput, 'projectId' | 'actor'>): string {
  if (event.projectId === undefined) return SERVICE_CHAIN;
  return `${event.actor.kind === 'system' ? 'delivery' : 'project'}:${event.projectId}`;
}

const content = (c: Omit<Columns, 'hash'>) => [
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
];

/** The unkeyed sha256 of audit-v1 (rows before migration 020): anyone who can read a row can compute it. */
export function legacyAuditRowHash(c: Omit<Columns, 'hash' | 'chain' | 'seq' | 'key_id'>): string {
  return sha256Hex(canonicalJson(['audit-v1', ...content(c as Omit<Columns, 'hash'>), c.prev_hash]));
}

/** What a row's HMAC covers (audit-v2): its chain, place, key id, content and the previous row's hash. */
export const auditRowContent = (c: Omit<Columns, 'hash'>): string =>
  canonicalJson(['audit-v2', c.chain, c.seq, c.key_id, ...content(c), c.prev_hash]);

/** The hashes a row may carry: the HMACs of its content under the ring's keys of its key id (none: unknown key). */
export function auditRowHashes(c: Omit<Columns, 'hash'>): string[] {
  return c.key_id === null ? [] : hmacHex(c.key_id, auditRowContent(c));
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

/** Resolves when the transaction commits (rejects on rollback); a savepoint's, when it is released. */
const committed = (trx: Db) => (trx as unknown as { executionPromise?: Promise<unknown> }).executionPromise;

/**
 * Appends one event to its chain, inside the caller's transaction (one is opened when given none), so the row commits
 * or rolls back with the action it records. The chain's head row, locked to the end of that transaction, orders the
 * chain: other chains (other projects, the delivery path) never wait on it. The row is chained with an HMAC whose key
 * the database never holds, and once committed its place leaves the database in this process's signed journal.
 */
export async function appendAuditEvent(db: Db, event: AuditEventInput): Promise<AuditEventRow> {
  if (!isTransaction(db)) return db.transaction((trx) => appendAuditEvent(trx, event));
  const key = chainingKey();
  const chain = auditChainOf(event);
  const { rows: heads } = await db.raw<{ rows: { seq: string; hash: string; trail: string | null }[] }>(
    `INSERT INTO audit_chain_heads (chain, seq, hash) VALUES (?, 0, ?)
     ON CONFLICT (chain) DO UPDATE SET chain = EXCLUDED.chain
     RETURNING seq::text AS seq, hash, (SELECT id FROM audit_trail LIMIT 1) AS trail`,
    [chain, AUDIT_GENESIS_HASH],
  );
  const head = heads[0]!;
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
    chain,
    seq: String(BigInt(head.seq) + 1n),
    key_id: key.id,
    prev_hash: head.hash,
  };
  const hash = hmacHex(key.id, auditRowContent(columns))[0]!;
  await db(TABLE).insert({
    ...columns,
    changes: columns.changes === null ? null : JSON.stringify(columns.changes),
    hash,
  });
  await db('audit_chain_heads').where({ chain }).update({ seq: columns.seq, hash, row_id: id });
  const trail = head.trail;
  if (trail !== null)
    void committed(db)?.then(
      () => journalCommittedRow({ trail, chain, seq: columns.seq, id, hash }),
      () => undefined, // rolled back: nothing to journal
    );
  return toRow({ ...columns, hash });
}

export const SELECT_COLUMNS = [
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
  'chain',
  'seq::text AS seq',
  'key_id',
  'prev_hash',
  'hash',
];

export async function readPage(
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
 * Removes rows older than `cutoff` from the oldest end of every chain, always keeping a chain's newest row, records the
 * prune (a row of the service chain naming the operator who ran it) and writes a signed digest naming where each chain
 * now starts, all in one transaction: the digest is written before the commit, so no prune goes unrecorded outside the
 * database. Needs DELETE on the table: run as the owner, not the application role.
 */
export async function pruneAuditEvents(
  db: Db,
  cutoff: Date,
  operator: AuditActor,
): Promise<{ removed: number; chains: number }> {
  if (!isTransaction(db)) return db.transaction((trx) => pruneAuditEvents(trx, cutoff, operator));
  const { rows: removedRows } = await db.raw<{ rows: { chain: string }[] }>(
    `WITH kept AS (
       SELECT chain, COALESCE(min(seq) FILTER (WHERE at >= ?), max(seq)) AS first_kept FROM ${TABLE} GROUP BY chain
     )
     DELETE FROM ${TABLE} e USING kept WHERE e.chain = kept.chain AND e.seq < kept.first_kept RETURNING e.chain`,
    [cutoff],
  );
  const removed = removedRows.length;
  if (removed === 0) return { removed, chains: 0 };
  const chains = new Set(removedRows.map((row) => row.chain)).size;
  await appendAuditEvent(db, {
    actor: operator,
    action: 'audit.prune',
    outcome: 'ok',
    changes: { removed, chains, before: cutoff.toISOString() },
  });
  await writeAuditDigest(db, 'prune', { before: cutoff.toISOString(), removed, by: operator.subject ?? null });
  return { removed, chains };
}

/** An audit row as a certificate of destruction names it: id, time (UTC, ISO 8601), action, outcome, chain hash. */
export interface AuditEvidence {
  id: string;
  at: string;
  action: string;
  outcome: string;
  hash: string;
}

/** The audit rows `where` picks, as evidence, in the order they were appended. */
export function auditEvidence(
  db: Db,
  where: (query: Knex.QueryBuilder) => Knex.QueryBuilder,
): Promise<AuditEvidence[]> {
  return where(db('audit_events'))
    .orderBy('id')
    .select<AuditEvidence[]>(
      db.raw('id::text AS id'),
      db.raw(`to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`),
      'action',
      'outcome',
      'hash',
    );
}

import {
  AUDIT_GENESIS_HASH,
  LEGACY_CHAIN,
  SELECT_COLUMNS,
  auditRowContent,
  auditRowHashes,
  legacyAuditRowHash,
  type AuditColumns,
} from './events';
import {
  DIGEST_PREFIX,
  GENESIS_DIGEST_HASH,
  auditDigestHash,
  auditTrailId,
  readAuditDigests,
  readAuditJournals,
  type AuditDigest,
} from './digests';
import { readdirSync } from 'node:fs';
import { auditTrail, sha256Hex, signatureTrusted } from './chain';
import type { Db } from '../connection';

export type AuditChainFault = 'changed' | 'removed' | 'inserted' | 'digest';

export interface AuditFault {
  kind: AuditChainFault;
  /** The row named, when the fault is a row's. */
  id?: string;
  chain?: string;
  detail: string;
}

export interface AuditChainReport {
  /** Rows read. */
  rows: number;
  chains: number;
  /** Digests and journal lines of this trail read from the directory. */
  digests: number;
  journalLines: number;
  /** The newest digest's sequence and hash, when there is one. */
  newestDigest?: { sequence: number; hash: string };
  /** What verify could not check, said so (no digest directory, no digest yet). */
  notes: string[];
  /** Every fault found (at most one per chain, the first), and the first of them. */
  faults: AuditFault[];
  fault?: AuditFault;
}

/** The highest place of a chain recorded outside the database, and by what. */
interface Recorded {
  seq: bigint;
  hash: string;
  id: string;
  by: string;
}

/**
 * Checks the trail against what left the database: every row's keyed hash (HMAC) and link in its chain, the digests
 * in `digestDir` (signature by a trusted key, sequence, previous hash; none missing that the database says was
 * written), and every chain's ends against the newest digest and the journals. Names deletions at either end of a
 * chain, rows inserted or edited, and missing or forged digests and journal lines.
 */
export async function verifyAuditChain(
  db: Db,
  options: { digestDir?: string; pageSize?: number } = {},
): Promise<AuditChainReport> {
  const trail = auditTrail();
  const digestDir = options.digestDir ?? trail.digestDir;
  const faults: AuditFault[] = [];
  const notes: string[] = [];
  const trailId = await auditTrailId(db);
  // A few faults a chain, each a separate finding (a chain's rows after an inserted one are still checked).
  const perChain = new Map<string, number>();
  const fault = (f: AuditFault): AuditChainFault => {
    const count = f.chain === undefined ? 0 : (perChain.get(f.chain) ?? 0);
    if (count < 5) faults.push(f);
    if (f.chain !== undefined) perChain.set(f.chain, count + 1);
    return f.kind;
  };

  // Digests: signed by a trusted key, one after another, none missing.
  const { digests, unreadable } = digestDir ? readAuditDigests(digestDir, trailId) : { digests: [], unreadable: [] };
  for (const name of unreadable) fault({ kind: 'digest', detail: `digest file ${name} does not parse` });
  const valid: AuditDigest[] = [];
  let previous: AuditDigest | undefined;
  for (const digest of digests) {
    const { signature, ...body } = digest;
    const signed = signatureTrusted(body.keyId, body.publicKey, body, signature, trail.trustedPublicKeys);
    if (signed !== 'ok') {
      fault({
        kind: 'digest',
        detail:
          signed === 'untrusted-key'
            ? `digest ${digest.sequence} is signed by key ${body.keyId}, which is not a trusted audit signing key`
            : `digest ${digest.sequence} is forged: its signature does not verify`,
      });
      continue;
    }
    const expected = (previous?.sequence ?? 0) + 1;
    if (digest.sequence !== expected)
      fault({
        kind: 'digest',
        detail: `digest ${expected} is missing: digest ${digest.sequence} follows ${expected - 1}`,
      });
    else if (digest.previousDigestHash !== (previous ? auditDigestHash(previous) : GENESIS_DIGEST_HASH))
      fault({ kind: 'digest', detail: `digest ${digest.sequence} does not follow digest ${expected - 1}` });
    valid.push(digest);
    previous = digest;
  }
  const written = await db<{ sequence: number; hash: string }>('audit_digests').orderBy('sequence').select();
  const byHash = new Map(digests.map((digest) => [digest.sequence, auditDigestHash(digest)]));
  for (const row of written) {
    const found = byHash.get(row.sequence);
    if (found === undefined)
      fault({ kind: 'digest', detail: `digest ${row.sequence} is missing from the digest directory` });
    else if (found !== row.hash)
      fault({ kind: 'digest', detail: `digest ${row.sequence} in the directory is not the one written` });
  }
  if (!digestDir) notes.push('no digest directory: the ends of the chains are not checked against digests');
  else if (digests.length === 0) {
    // Another trail's digests and none of this one: the database's trail id was changed to hide from them.
    const others = otherTrails(digestDir, trailId);
    if (others.length > 0)
      fault({
        kind: 'digest',
        detail: `no digest of trail ${trailId} (the database's) in the directory, which holds digests of trail ${others.join(', ')}: the id was changed, or the directory serves another database`,
      });
    else notes.push('no digest of this trail yet: the oldest rows are checked from seq 1 only');
  }

  // What left the database: every chain's extent in each digest, the highest place any digest or journal line names.
  const recorded = new Map<string, Recorded>();
  const record = (chain: string, seq: string, hash: string, id: string, by: string) => {
    const known = recorded.get(chain);
    if (!known || BigInt(seq) > known.seq) recorded.set(chain, { seq: BigInt(seq), hash, id, by });
  };
  // Where each chain may start: seq 1, or where the newest prune a digest records left it (and the hash before it).
  const prunedTo = new Map<string, { seq: bigint; prevHash: string; by: string }>();
  for (const digest of valid) {
    for (const [chain, state] of Object.entries(digest.chains)) {
      record(chain, state.headSeq, state.headHash, state.headId, `digest ${digest.sequence}`);
      const first = BigInt(state.firstSeq);
      if (digest.reason === 'prune' && first > (prunedTo.get(chain)?.seq ?? 1n))
        prunedTo.set(chain, { seq: first, prevHash: state.firstPrevHash, by: `digest ${digest.sequence}` });
      const allowed = prunedTo.get(chain)?.seq ?? 1n;
      if (first > allowed)
        fault({
          kind: 'removed',
          chain,
          detail: `the oldest rows of chain ${chain} (seq ${allowed} to ${first - 1n}) were removed before digest ${digest.sequence}, by no prune`,
        });
    }
  }
  const journal = digestDir ? readAuditJournals(digestDir, trailId) : [];
  for (const { file, line, entry } of journal) {
    const { signature, ...signed } = entry ?? { signature: '' };
    if (!entry || signatureTrusted(entry.keyId, entry.publicKey, signed, signature, trail.trustedPublicKeys) !== 'ok') {
      fault({ kind: 'digest', detail: `journal ${file} line ${line} is forged: its signature does not verify` });
      continue;
    }
    record(entry.chain, entry.seq, entry.hash, entry.id, `journal ${file} line ${line}`);
  }
  const newest = valid.at(-1);

  // The rows, chain by chain, in their order.
  let rows = 0;
  const seen = new Set<string>();
  const pageSize = options.pageSize ?? 1000;
  let after: AuditColumns | undefined;
  /** Checks a row against the one before it in its chain (none: its oldest) and the one after it. */
  const step = (
    prev: AuditColumns | undefined,
    current: AuditColumns,
    next: AuditColumns | undefined,
  ): AuditChainFault | undefined => {
    const chain = current.chain;
    const seq = BigInt(current.seq);
    const legacy = chain === LEGACY_CHAIN;
    const keyed = legacy
      ? current.key_id === null && legacyAuditRowHash(current) === current.hash
      : auditRowHashes(current).includes(current.hash);
    const head = recorded.get(chain);
    const where = `row ${current.id} (chain ${chain}, seq ${current.seq})`;
    if (head && seq === head.seq && head.hash !== current.hash)
      fault({ kind: 'changed', chain, id: current.id, detail: `${where} is not the row ${head.by} recorded` });
    if (prev === undefined) {
      // The chain's oldest row: seq 1 after the genesis hash, or where the newest digest says a prune left it.
      const pruned = prunedTo.get(chain);
      const firstSeq = pruned?.seq ?? 1n;
      const anchor = pruned?.prevHash ?? AUDIT_GENESIS_HASH;
      if (seq > firstSeq)
        fault({
          kind: 'removed',
          chain,
          id: current.id,
          detail: `the oldest rows of chain ${chain} were removed: it starts at ${where}; seq ${firstSeq} to ${seq - 1n} are gone and no prune a digest records removed them`,
        });
      else if (seq === firstSeq && current.prev_hash !== anchor && !(legacy && !pruned))
        fault({
          kind: 'removed',
          chain,
          id: current.id,
          detail: `${where} does not follow the chain's recorded start: rows before it were removed or rewritten`,
        });
    }
    const linked = prev === undefined || (current.prev_hash === prev.hash && seq === BigInt(prev.seq) + 1n);
    const beyond = legacy && newest?.chains[chain] !== undefined && seq > BigInt(newest.chains[chain].headSeq);
    const plainHash = [legacyAuditRowHash(current), sha256Hex(auditRowContent(current))].includes(current.hash);
    const plain = plainHash ? ' (a plain sha256: written without the key)' : '';
    if (!keyed && prev === undefined && !beyond && next !== undefined && next.prev_hash === current.hash)
      return fault({
        kind: 'changed',
        chain,
        id: current.id,
        detail: `${where} was changed: its content does not give its keyed hash${plain}`,
      });
    if (keyed && linked && !beyond) return undefined;
    const skipped = next !== undefined && prev !== undefined && next.prev_hash === prev.hash;
    // Not keyed: inserted when the chain goes around it, it repeats a place, it is past every recorded head, or it is
    // the newest row and carries a hash anyone can compute; otherwise a row in its place was edited.
    const appended = next === undefined && (plainHash || current.key_id === null || !head || seq > head.seq);
    if (beyond || (!keyed && (skipped || (prev !== undefined && seq === BigInt(prev.seq)) || appended)))
      return fault({
        kind: 'inserted',
        chain,
        id: current.id,
        detail: beyond
          ? `${where} was inserted into the legacy chain after digest ${newest.sequence} recorded its head`
          : `${where} was inserted: its hash is not the keyed hash of its content${plain}`,
      });
    if (!keyed)
      return fault({
        kind: 'changed',
        chain,
        id: current.id,
        detail: `${where} was changed: its content does not give its keyed hash${plain}`,
      });
    return fault({
      kind: 'removed',
      chain,
      id: current.id,
      detail: `rows of chain ${chain} before ${where} were removed: it does not follow row ${prev!.id} (seq ${prev!.seq})`,
    });
  };
  const endOfChain = (last: AuditColumns) => {
    const head = recorded.get(last.chain);
    if (head && head.seq > BigInt(last.seq))
      fault({
        kind: 'removed',
        chain: last.chain,
        detail: `the newest rows of chain ${last.chain} were removed: ${head.by} recorded seq ${head.seq} (row ${head.id}), the chain ends at seq ${last.seq} (row ${last.id})`,
      });
  };
  // Each row is checked once the row after it is read: whether that one skips it tells an insertion from an edit.
  let prevRow: AuditColumns | undefined;
  let pending: AuditColumns | undefined;
  const take = (row: AuditColumns | undefined) => {
    if (pending) {
      const next = row?.chain === pending.chain ? row : undefined;
      seen.add(pending.chain);
      const found = step(prevRow, pending, next);
      if (next === undefined) endOfChain(pending);
      // An inserted row is left out: the row after it is checked against the one before it.
      prevRow = next === undefined ? undefined : found === 'inserted' ? prevRow : pending;
    }
    pending = row;
  };
  for (;;) {
    const query = db<AuditColumns>('audit_events')
      .select(db.raw(SELECT_COLUMNS.map((c) => (c === 'id' ? 'id::text AS id' : c)).join(', ')))
      .orderBy([{ column: 'chain' }, { column: 'audit_events.seq' }, { column: 'audit_events.id' }])
      .limit(pageSize);
    if (after)
      void query.whereRaw('(chain, audit_events.seq, audit_events.id) > (?, ?, ?)', [after.chain, after.seq, after.id]);
    const page = (await query) as unknown as AuditColumns[];
    rows += page.length;
    for (const row of page) take(row);
    if (page.length < pageSize) break;
    after = page.at(-1);
  }
  take(undefined);
  for (const [chain, head] of recorded)
    if (!seen.has(chain))
      fault({
        kind: 'removed',
        chain,
        detail: `every row of chain ${chain} was removed: ${head.by} recorded seq ${head.seq} (row ${head.id})`,
      });
  return {
    rows,
    chains: seen.size,
    digests: valid.length,
    journalLines: journal.length,
    ...(newest && { newestDigest: { sequence: newest.sequence, hash: auditDigestHash(newest) } }),
    notes,
    faults,
    ...(faults[0] && { fault: faults[0] }),
  };
}

/** The trail ids whose digests the directory holds, other than `trailId`. */
function otherTrails(dir: string, trailId: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return []; // no directory yet: nothing written
  }
  const ids = names
    .filter((name) => name.startsWith(DIGEST_PREFIX) && !name.startsWith(`${DIGEST_PREFIX}${trailId}-`))
    .map((name) => name.slice(DIGEST_PREFIX.length, name.lastIndexOf('-')));
  return [...new Set(ids)];
}

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from '../connection';
import { auditTrail, canonicalJson, JOURNAL_PREFIX, sha256Hex, signContent, type AuditJournalLine } from './chain';

/** Where one chain stood when a digest was written. */
export interface AuditChainState {
  rows: number;
  firstSeq: string;
  /** The first row's prev_hash: the genesis hash, or the hash of the last row a prune removed. */
  firstPrevHash: string;
  headSeq: string;
  headId: string;
  headHash: string;
}

export type AuditDigestReason = 'start' | 'schedule' | 'prune' | 'cli';

/** What a digest signs: every chain's extent and head, and the previous digest's hash (CloudTrail's digest files). */
export interface AuditDigestBody {
  format: 'webhooks-audit-digest-v1';
  trail: string;
  sequence: number;
  writtenAt: string;
  reason: AuditDigestReason;
  previousDigestHash: string;
  chains: Record<string, AuditChainState>;
  /** A prune's digest: what it removed, before when, and the operator who ran it. */
  prune?: { before: string; removed: number; by: string | null };
  keyId: string;
  publicKey: string;
}

export interface AuditDigest extends AuditDigestBody {
  signature: string;
}

export const DIGEST_PREFIX = 'digest-';
export const GENESIS_DIGEST_HASH = '0'.repeat(64);
const digestFile = (trail: string, sequence: number) =>
  `${DIGEST_PREFIX}${trail}-${String(sequence).padStart(12, '0')}.json`;

/** A digest's hash, as the next one names it: sha256 of its canonical JSON, signature included. */
export const auditDigestHash = (digest: AuditDigest): string => sha256Hex(canonicalJson(digest));

/** This database's trail id (migration 020): digests and journal lines name it, so one directory may serve several. */
export async function auditTrailId(db: Db): Promise<string> {
  const row = await db<{ id: string }>('audit_trail').first('id');
  if (!row) throw new Error('the database has no audit trail id (run the migrations)');
  return row.id;
}

/** Every chain's extent and head as the database holds them now. */
export async function auditChainStates(db: Db): Promise<Record<string, AuditChainState>> {
  const { rows } = await db.raw<{
    rows: { chain: string; rows: number; first_seq: string; head_seq: string }[];
  }>(
    `SELECT chain, count(*)::int AS rows, min(seq)::text AS first_seq, max(seq)::text AS head_seq
       FROM audit_events GROUP BY chain`,
  );
  const { rows: ends } = await db.raw<{
    rows: { chain: string; seq: string; id: string; prev_hash: string; hash: string }[];
  }>(
    `SELECT chain, seq::text AS seq, id::text AS id, prev_hash, hash FROM audit_events e
      WHERE (chain, seq) IN (SELECT chain, min(seq) FROM audit_events GROUP BY chain
                             UNION SELECT chain, max(seq) FROM audit_events GROUP BY chain)`,
  );
  const states: Record<string, AuditChainState> = {};
  for (const chain of rows) {
    const first = ends.find((end) => end.chain === chain.chain && end.seq === chain.first_seq)!;
    const head = ends.find((end) => end.chain === chain.chain && end.seq === chain.head_seq)!;
    states[chain.chain] = {
      rows: chain.rows,
      firstSeq: chain.first_seq,
      firstPrevHash: first.prev_hash,
      headSeq: chain.head_seq,
      headId: head.id,
      headHash: head.hash,
    };
  }
  return states;
}

/** The directory's digests of this trail, in sequence order; a file that does not parse is named by `unreadable`. */
export function readAuditDigests(dir: string, trail: string): { digests: AuditDigest[]; unreadable: string[] } {
  const digests: AuditDigest[] = [];
  const unreadable: string[] = [];
  for (const name of listDir(dir)
    .filter((file) => file.startsWith(`${DIGEST_PREFIX}${trail}-`))
    .sort()) {
    try {
      digests.push(JSON.parse(readFileSync(join(dir, name), 'utf8')) as AuditDigest);
    } catch {
      unreadable.push(name);
    }
  }
  return { digests: digests.sort((a, b) => a.sequence - b.sequence), unreadable };
}

/** The directory's newest digest of this trail by its file name (names sort by sequence), read alone. */
function newestAuditDigest(dir: string, trail: string): AuditDigest | undefined {
  const newest = listDir(dir)
    .filter((file) => file.startsWith(`${DIGEST_PREFIX}${trail}-`))
    .sort()
    .at(-1);
  return newest === undefined ? undefined : (JSON.parse(readFileSync(join(dir, newest), 'utf8')) as AuditDigest);
}

/** Every journal line of this trail in the directory, with its file and line number. */
export function readAuditJournals(
  dir: string,
  trail: string,
): { file: string; line: number; entry: AuditJournalLine | undefined }[] {
  const lines: { file: string; line: number; entry: AuditJournalLine | undefined }[] = [];
  for (const name of listDir(dir).filter((file) => file.startsWith(`${JOURNAL_PREFIX}${trail}-`))) {
    readFileSync(join(dir, name), 'utf8')
      .split('\n')
      .forEach((text, i) => {
        if (text.trim() === '') return;
        let entry: AuditJournalLine | undefined;
        try {
          entry = JSON.parse(text) as AuditJournalLine;
        } catch {
          entry = undefined;
        }
        lines.push({ file: name, line: i + 1, entry });
      });
  }
  return lines;
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/**
 * Writes the next signed digest of this database's trail into the process's digest directory and records its hash in
 * the database. Its file is created exclusively: of two processes writing the same sequence at once, one wins and the
 * other writes the next one.
 */
export async function writeAuditDigest(
  db: Db,
  reason: AuditDigestReason,
  prune?: AuditDigestBody['prune'],
): Promise<AuditDigest> {
  const { signing, digestDir } = auditTrail();
  if (!signing || !digestDir)
    throw new Error('audit digests need AUDIT_SIGNING_KEY and AUDIT_DIGEST_DIR (configureAuditTrail)');
  const trail = await auditTrailId(db);
  const chains = await auditChainStates(db);
  mkdirSync(digestDir, { recursive: true });
  for (let attempt = 0; ; attempt += 1) {
    const previous = newestAuditDigest(digestDir, trail);
    const body: AuditDigestBody = {
      format: 'webhooks-audit-digest-v1',
      trail,
      sequence: (previous?.sequence ?? 0) + 1,
      writtenAt: new Date().toISOString(),
      reason,
      previousDigestHash: previous ? auditDigestHash(previous) : GENESIS_DIGEST_HASH,
      chains,
      ...(prune && { prune }),
      keyId: signing.id,
      publicKey: signing.publicKey,
    };
    const digest: AuditDigest = { ...body, signature: signContent(signing, body) };
    try {
      writeFileSync(join(digestDir, digestFile(trail, body.sequence)), JSON.stringify(digest, null, 2) + '\n', {
        flag: 'wx',
        mode: 0o600,
      });
    } catch (error) {
      // Another process took this sequence: the next one follows its digest.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && attempt < 5) continue;
      throw error;
    }
    await db('audit_digests').insert({ sequence: body.sequence, hash: auditDigestHash(digest), reason });
    return digest;
  }
}

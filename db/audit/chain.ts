import { createHash, createHmac, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** One key of the audit chain's HMAC ring (AUDIT_HMAC_KEYS): the first chains new rows, every one verifies. */
export interface AuditHmacKey {
  id: string;
  key: Buffer;
}

/** The Ed25519 key that signs digests and journal lines (AUDIT_SIGNING_KEY); its public half is published. */
export interface AuditSigningKey {
  id: string;
  privateKey: KeyObject;
  /** The raw 32-byte public key, base64: what digests carry and `webhooks audit public-key` prints. */
  publicKey: string;
}

/** A public key verify trusts: the signing key's own, and retired ones (AUDIT_SIGNING_PUBLIC_KEYS). */
export interface AuditPublicKey {
  id: string;
  publicKey: string;
}

/** What a process chains and signs its audit rows with; none of it is ever written to the database. */
export interface AuditTrailKeys {
  hmacKeys: AuditHmacKey[];
  signing?: AuditSigningKey;
  trustedPublicKeys?: AuditPublicKey[];
  /** Where digests and this process's journal go: a place the database's writers cannot reach. */
  digestDir?: string;
  /** Told when a committed row's journal line could not be written (the row stands; verify still checks its HMAC). */
  onJournalError?: (error: unknown) => void;
  /** Forget the keys installed before (a test that needs a verifier trusting only these). */
  replace?: boolean;
}

/** The trail this process writes with. Keys accumulate: a process verifies every row it chained, whatever installed. */
interface ProcessTrail {
  hmacKeys: AuditHmacKey[];
  signing?: AuditSigningKey;
  trustedPublicKeys: AuditPublicKey[];
  digestDir?: string;
  onJournalError?: (error: unknown) => void;
}

let installed: ProcessTrail | undefined;

/** Sets the keys (and digest directory) this process's audit rows are chained, signed and journaled with. */
export function configureAuditTrail(keys: AuditTrailKeys): void {
  if (keys.hmacKeys.length === 0) throw new Error('the audit HMAC key ring is empty');
  const earlier = keys.replace ? undefined : installed;
  const publicKeys = [
    ...(keys.signing ? [{ id: keys.signing.id, publicKey: keys.signing.publicKey }] : []),
    ...(keys.trustedPublicKeys ?? []),
    ...(earlier?.trustedPublicKeys ?? []),
  ];
  const hmacKeys = [...keys.hmacKeys, ...(earlier?.hmacKeys ?? [])];
  installed = {
    hmacKeys: hmacKeys.filter(
      (key, i) => hmacKeys.findIndex((other) => other.id === key.id && other.key.equals(key.key)) === i,
    ),
    ...((keys.onJournalError ?? earlier?.onJournalError) && {
      onJournalError: keys.onJournalError ?? earlier?.onJournalError,
    }),
    ...((keys.signing ?? earlier?.signing) && { signing: keys.signing ?? earlier?.signing }),
    trustedPublicKeys: publicKeys.filter(
      (key, i) => publicKeys.findIndex((other) => other.id === key.id && other.publicKey === key.publicKey) === i,
    ),
    // Given (even as undefined), the directory replaces the earlier one: a process journals to one place at a time.
    ...(('digestDir' in keys ? keys.digestDir : earlier?.digestDir) !== undefined && {
      digestDir: 'digestDir' in keys ? keys.digestDir : earlier?.digestDir,
    }),
  };
}

/** The process's trail; an audited write without one fails rather than write a row nobody can verify. */
export function auditTrail(): ProcessTrail {
  if (!installed)
    throw new Error('the audit trail has no HMAC key in this process (AUDIT_HMAC_KEYS; configureAuditTrail)');
  return installed;
}

/** JSON with object keys sorted at every depth (jsonb keeps no key order); a Date as the ISO text jsonb stores. */
export function canonicalJson(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

export const sha256Hex = (text: string | Buffer): string => createHash('sha256').update(text).digest('hex');

/** HMAC-SHA256 of `text` under each key of the ring with this id (none: the ring has no such key). */
export function hmacHex(keyId: string, text: string): string[] {
  return auditTrail()
    .hmacKeys.filter((key) => key.id === keyId)
    .map((key) => createHmac('sha256', key.key).update(text).digest('hex'));
}

/** The key new rows are chained with: the ring's first. */
export const chainingKey = (): AuditHmacKey => auditTrail().hmacKeys[0]!;

/** Signs canonical JSON of `content` with the trail's signing key (base64). */
export function signContent(signing: AuditSigningKey, content: unknown): string {
  return sign(null, Buffer.from(canonicalJson(content)), signing.privateKey).toString('base64');
}

/** Whether `signature` over `content` verifies under a trusted public key of this id and value. */
export function signatureTrusted(
  keyId: string,
  publicKey: string,
  content: unknown,
  signature: string,
  trusted: AuditPublicKey[],
): 'ok' | 'untrusted-key' | 'bad-signature' {
  if (!trusted.some((key) => key.id === keyId && key.publicKey === publicKey)) return 'untrusted-key';
  try {
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: base64url(publicKey) }, format: 'jwk' });
    return verify(null, Buffer.from(canonicalJson(content)), key, Buffer.from(signature, 'base64'))
      ? 'ok'
      : 'bad-signature';
  } catch {
    return 'bad-signature';
  }
}

const base64url = (base64: string) => Buffer.from(base64, 'base64').toString('base64url');

/** What a journal line records of a committed row: where its chain's head stood. */
export interface AuditJournalEntry {
  trail: string;
  chain: string;
  seq: string;
  id: string;
  hash: string;
}

/** A journal line: the entry, the signing key's id and public key, and the signature over the rest. */
export interface AuditJournalLine extends AuditJournalEntry {
  keyId: string;
  publicKey: string;
  signature: string;
}

export const JOURNAL_PREFIX = 'journal-';

/** This process's append-only journal per trail: one writer per file, so lines never interleave. */
const journals = new Map<string, number>();
const processTag = `${hostname().replace(/[^A-Za-z0-9.-]/g, '_')}-${process.pid}-${Date.now()}`;

/** Appends one signed line for a committed row to this process's journal of its trail (when a directory is set). */
export function journalCommittedRow(entry: AuditJournalEntry): void {
  const trail = installed;
  if (!trail?.digestDir || !trail.signing) return;
  try {
    appendJournalLine(trail, trail.digestDir, trail.signing, entry);
  } catch (error) {
    // The action has committed: a journal that cannot be written is reported, never turned into the action's failure.
    if (trail.onJournalError) trail.onJournalError(error);
    else process.emitWarning(`audit journal not written: ${(error as Error).message}`);
  }
}

function appendJournalLine(trail: ProcessTrail, digestDir: string, signing: AuditSigningKey, entry: AuditJournalEntry) {
  const file = join(digestDir, `${JOURNAL_PREFIX}${entry.trail}-${processTag}.jsonl`);
  let fd = journals.get(file);
  if (fd === undefined) {
    mkdirSync(digestDir, { recursive: true });
    fd = openSync(file, 'a', 0o600);
    journals.set(file, fd);
  }
  const signed = { ...entry, keyId: signing.id, publicKey: signing.publicKey };
  const line: AuditJournalLine = { ...signed, signature: signContent(signing, signed) };
  writeSync(fd, JSON.stringify(line) + '\n');
}

/** Closes the journal files this process opened (tests; a process's exit closes them too). */
export function closeAuditJournals(): void {
  for (const fd of journals.values()) closeSync(fd);
  journals.clear();
}

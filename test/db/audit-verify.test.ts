// Verifying the audit trail (`webhooks audit verify`): keyed chains, signed digests and journals kept outside the
// database, each kind of tampering named (rows deleted, edited or forged with a plain sha256, digests removed or
// forged, the trail id changed); prunes, the worker's digests, legacy rows, the reseal's row and the SIEM export.
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startAuditDigests } from '../../worker/audit-digests';
import * as store from '../../db';
import { migrationSource } from '../../db/migrations';
import { useTestAuditTrail } from '../support/audit-keys';
import { eventually } from '../support/eventually';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { auditCli, type AuditColumns } from './audit-trail-fixture';

/** Each test's own digest directory: the CLI signs and journals into it, with the test keys. */
let digestDir: string;

/** Runs the operator CLI in process against `url`. */
const cli = (args: string[], url: string, env: Record<string, string> = {}) => auditCli(args, url, digestDir, env);

describe('audit verify: keyed chains, signed digests and journals outside the database', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  const actor: store.AuditActor = { kind: 'member', subject: 'alice' };

  beforeEach(async () => {
    t = await createTestDatabase();
    digestDir = mkdtempSync(join(tmpdir(), 'webhooks-audit-'));
    useTestAuditTrail(digestDir);
    for (let i = 0; i < 5; i += 1) {
      await store.appendAuditEvent(t.db, {
        actor,
        action: 'webhook.update',
        outcome: 'ok',
        projectId: 'pa',
        changes: { n: i },
      });
      // Apart by milliseconds at least: the prune test cuts between rows with a JavaScript Date.
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
  });
  afterEach(async () => {
    useTestAuditTrail();
    await t?.destroy();
  });

  const chainRows = async (chain = 'project:pa') =>
    t
      .db<{ id: string; seq: string; hash: string }>('audit_events')
      .where('chain', chain)
      .orderBy('seq')
      .select('id', 'seq', 'hash');
  const verify = async () => {
    const run = await cli(['audit', 'verify'], t.url);
    return { ...run, report: await store.verifyAuditChain(t.db) };
  };

  /** A row as an attacker with INSERT rights appends it: well linked, hashed with the plain sha256 of its content. */
  async function appendUnkeyed(fields: { actorSubject: string; action: string; keyId: string | null }) {
    const [head] = await t
      .db('audit_events')
      .where({ chain: 'project:pa' })
      .orderBy('seq', 'desc')
      .limit(1)
      .select('seq', 'hash');
    const { rows } = await t.db.raw<{ rows: { id: string }[] }>(
      "SELECT nextval(pg_get_serial_sequence('audit_events', 'id'))::text AS id",
    );
    const columns = {
      id: rows[0]!.id,
      at: '2026-11-28T10:00:00.000000Z',
      actor_kind: 'member' as const,
      actor_subject: fields.actorSubject,
      actor_issuer: null,
      portal_link_id: null,
      portal_capabilities: null,
      request_id: null,
      caller_address: null,
      action: fields.action,
      outcome: 'ok' as const,
      project_id: 'pa',
      registration_id: null,
      delivery_id: null,
      changes: null,
      chain: 'project:pa',
      seq: String(Number(head.seq) + 1),
      key_id: fields.keyId,
      prev_hash: head.hash,
    };
    const hash = createHash('sha256').update(store.auditRowContent(columns)).digest('hex');
    await t.db('audit_events').insert({ ...columns, hash });
    return columns.id;
  }

  it('passes an intact trail: rows, a digest, rows after it (the journal), and says so', async () => {
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    await store.appendAuditEvent(t.db, { actor, action: 'webhook.test', outcome: 'ok', projectId: 'pa' });
    await store.appendAuditEvent(t.db, { actor, action: 'webhook.test', outcome: 'ok', projectId: 'pb' });
    const { code, stdout, stderr, report } = await verify();
    assert.equal(code, 0, stderr);
    assert.deepEqual([report.faults, report.rows, report.chains, report.digests], [[], 7, 2, 1]);
    assert.match(stdout, /^Audit trail intact: 7 rows in 2 chains, 1 digests, 7 journal lines/);
  });

  it('verifies a row whose changes hold a Date: hashed as the ISO text jsonb stores, not as {}', async () => {
    await store.appendAuditEvent(t.db, {
      actor,
      action: 'portal-link.create',
      outcome: 'ok',
      projectId: 'pa',
      changes: { expiresAt: new Date('2026-12-01T00:00:00.000Z') },
    });
    const { code, stderr } = await verify();
    assert.equal(code, 0, stderr);
  });

  it('publishes the digests’ public key (audit public-key, and in each digest) and makes new signing keys (audit keygen)', async () => {
    const made = await cli(['audit', 'keygen', 's9'], t.url);
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stdout, /^s9:[A-Za-z0-9+/]{43}=$/);
    const published = await cli(['audit', 'public-key'], t.url);
    assert.equal(published.code, 0, published.stderr);
    const digest = await store.writeAuditDigest(t.db, 'cli');
    assert.equal(published.stdout, `${digest.keyId}:${digest.publicKey}`);
    const other = await cli(['audit', 'public-key'], t.url, { AUDIT_SIGNING_KEY: made.stdout });
    assert.notEqual(other.stdout, published.stdout);
    assert.match(other.stdout, /^s9:/);
    // A digest signed by the new key is not trusted by a verify that was not given its public key.
    assert.equal((await cli(['audit', 'digest'], t.url, { AUDIT_SIGNING_KEY: made.stdout })).code, 0);
    useTestAuditTrail(digestDir, { replace: true });
    assert.match((await verify()).stderr, /digest 2 is signed by key s9, which is not a trusted audit signing key/);
  });

  it('names the newest rows deleted (the journal recorded them)', async () => {
    const rows = await chainRows();
    await t.db('audit_events').whereIn('id', [rows[3]!.id, rows[4]!.id]).delete();
    const { code, stderr, report } = await verify();
    assert.equal(code, 1);
    assert.equal(report.fault?.kind, 'removed');
    assert.match(
      stderr,
      /the newest rows of chain project:pa were removed: journal .* recorded seq 5 .* ends at seq 3/,
    );
  });

  it('names the oldest rows deleted without a prune, and again once a digest recorded the chain', async () => {
    const rows = await chainRows();
    await t.db('audit_events').whereIn('id', [rows[0]!.id, rows[1]!.id]).delete();
    const { code, stderr } = await verify();
    assert.equal(code, 1);
    assert.match(
      stderr,
      /the oldest rows of chain project:pa were removed: it starts at row \d+ \(chain project:pa, seq 3\)/,
    );
    // A digest written after the deletion records the chain from seq 3, a start no prune explains.
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    assert.match((await verify()).stderr, /oldest rows of chain project:pa were removed/);
  });

  it('names the oldest rows deleted after a digest recorded them, between two digests, by no prune', async () => {
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    const rows = await chainRows();
    await t.db('audit_events').whereIn('id', [rows[0]!.id, rows[1]!.id]).delete();
    assert.match((await verify()).stderr, /oldest rows of chain project:pa were removed/);
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    assert.match(
      (await verify()).stderr,
      /the oldest rows of chain project:pa \(seq 1 to 2\) were removed before digest 2, by no prune/,
    );
  });

  it('names a row appended with INSERT rights and a correct plain sha256 (H1: newest and oldest gone, then a forged delete)', async () => {
    const rows = await chainRows();
    await t.db('audit_events').whereIn('id', [rows[3]!.id, rows[4]!.id]).delete();
    assert.equal((await verify()).code, 1);
    await t.db('audit_events').whereIn('id', [rows[0]!.id, rows[1]!.id]).delete();
    assert.equal((await verify()).code, 1);
    const forged = await appendUnkeyed({ actorSubject: 'ceo-of-hospital', action: 'webhook.delete', keyId: 'test-a1' });
    const { code, stderr } = await verify();
    assert.equal(code, 1);
    // Each finding named: the oldest rows gone, the newest gone (the journal recorded seq 5), the forged row.
    assert.match(stderr, /the oldest rows of chain project:pa were removed/);
    assert.match(stderr, /the newest rows of chain project:pa were removed/);
    assert.match(stderr, new RegExp(`row ${forged} \\(chain project:pa, seq 4\\) was inserted: .*plain sha256`));
  });

  it('names a row appended with a plain sha256 as inserted, with or without a key id', async () => {
    for (const keyId of ['test-a1', null]) {
      const forged = await appendUnkeyed({ actorSubject: 'ceo-of-hospital', action: 'webhook.delete', keyId });
      const { code, stderr, report } = await verify();
      assert.equal(code, 1);
      assert.deepEqual([report.fault?.kind, report.fault?.id], ['inserted', forged]);
      assert.match(stderr, new RegExp(`row ${forged} \\(chain project:pa, seq 6\\) was inserted: .*plain sha256`));
      await t.db('audit_events').where({ id: forged }).delete();
    }
  });

  it('names an edited row', async () => {
    const rows = await chainRows();
    await t
      .db('audit_events')
      .where({ id: rows[2]!.id })
      .update({ changes: JSON.stringify({ n: 99 }) });
    const { code, stderr, report } = await verify();
    assert.equal(code, 1);
    assert.deepEqual([report.fault?.kind, report.fault?.id], ['changed', rows[2]!.id]);
    assert.match(stderr, new RegExp(`row ${rows[2]!.id} \\(chain project:pa, seq 3\\) was changed`));
  });

  it('names a row deleted in the middle', async () => {
    const rows = await chainRows();
    await t.db('audit_events').where({ id: rows[1]!.id }).delete();
    const { report } = await verify();
    assert.deepEqual([report.fault?.kind, report.fault?.id], ['removed', rows[2]!.id]);
  });

  it('names a digest removed (in the middle, and the newest) and a digest forged', async () => {
    for (let i = 0; i < 3; i += 1) assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    assert.equal((await verify()).code, 0);
    const files = readdirSync(digestDir)
      .filter((name) => name.startsWith('digest-'))
      .sort();
    assert.equal(files.length, 3);
    const second = readFileSync(join(digestDir, files[1]!), 'utf8');
    unlinkSync(join(digestDir, files[1]!));
    assert.match((await verify()).stderr, /digest: digest 2 is missing/);
    writeFileSync(join(digestDir, files[1]!), second);
    const third = readFileSync(join(digestDir, files[2]!), 'utf8');
    unlinkSync(join(digestDir, files[2]!));
    assert.match((await verify()).stderr, /digest 3 is missing from the digest directory/);
    // Forged: the head moved back to hide rows, the signature left as it was.
    const forged = JSON.parse(third) as store.AuditDigest;
    forged.chains['project:pa']!.headSeq = '3';
    writeFileSync(join(digestDir, files[2]!), JSON.stringify(forged));
    const { code, stderr } = await verify();
    assert.equal(code, 1);
    assert.match(stderr, /digest 3 is forged: its signature does not verify/);
  });

  it('names a trail id changed to hide from the digests (and their hashes removed from the database)', async () => {
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    const rows = await chainRows();
    await t.db('audit_events').whereIn('id', [rows[3]!.id, rows[4]!.id]).delete();
    await t.db('audit_digests').delete();
    await t.db('audit_trail').update({ id: randomUUID() });
    const { code, stderr } = await verify();
    assert.equal(code, 1);
    assert.match(stderr, /no digest of trail .* \(the database's\) in the directory, which holds digests of trail/);
  });

  it('prunes from the oldest end of each chain as the operator, writes a digest, and still verifies', async () => {
    await store.appendAuditEvent(t.db, { actor, action: 'webhook.test', outcome: 'ok', projectId: 'pb' });
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    const rows = await t
      .db('audit_events')
      .where({ chain: 'project:pa' })
      .orderBy('seq')
      .select<{ id: string; at: Date }[]>('id', 'at');
    const cutoff = rows[3]!.at; // seq 1 to 3 are older
    const pruned = await store.pruneAuditEvents(t.db, cutoff, { kind: 'cli', subject: 'operator-7' });
    // project:pa keeps seq 4 and 5; project:pb keeps its only (newest) row.
    assert.deepEqual(pruned, { removed: 3, chains: 1 });
    const prune = await t.db<AuditColumns>('audit_events').where({ action: 'audit.prune' }).first();
    assert.deepEqual(
      [prune?.actor_kind, prune?.actor_subject, prune?.project_id, prune?.changes],
      ['cli', 'operator-7', null, { removed: 3, chains: 1, before: cutoff.toISOString() }],
    );
    const digests = readdirSync(digestDir).filter((name) => name.startsWith('digest-'));
    assert.equal(digests.length, 2);
    const { code, stderr, report } = await verify();
    assert.equal(code, 0, stderr);
    assert.deepEqual(report.faults, []);
    // Through the CLI: the operator is the OS user.
    const everything = await cli(['audit', 'prune', '--days', '1'], t.url);
    assert.equal(everything.code, 0, everything.stderr);
    assert.match(everything.stdout, /No audit rows past their retention/);
    // Aged by hand (an edit verify would name): only to have rows past one day for the CLI to prune.
    await t.db('audit_events').update({ at: t.db.raw("at - interval '2 days'") });
    const cliPrune = await cli(['audit', 'prune', '--days', '1'], t.url);
    assert.equal(cliPrune.code, 0, cliPrune.stderr);
    const last = await t
      .db<AuditColumns>('audit_events')
      .where({ action: 'audit.prune' })
      .orderBy('id', 'desc')
      .first();
    assert.deepEqual([last?.actor_kind, last?.actor_subject], ['cli', userInfo().username]);
    assert.equal((await cli(['audit', 'prune', '--days', 'x'], t.url)).code, 2);
  });

  it('refuses a prune below six years in production, naming the flag and the variable; development may go lower', async () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
      PAYLOAD_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
    };
    const refused = await cli(['audit', 'prune', '--days', '2189'], t.url, production);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--days must be at least 2190 in production/);
    const variable = await cli(['audit', 'prune'], t.url, { ...production, AUDIT_RETENTION_DAYS: '30' });
    assert.notEqual(variable.code, 0);
    assert.match(variable.stderr, /AUDIT_RETENTION_DAYS must be at least 2190 in production/);
    assert.equal(
      (await t.db('audit_events').count<{ count: string }[]>('* as count'))[0]!.count,
      '5',
      'nothing removed',
    );
    assert.equal((await cli(['audit', 'prune', '--days', '2190'], t.url, production)).code, 0);
    assert.equal((await cli(['audit', 'prune', '--days', '1'], t.url)).code, 0, 'development');
  });

  it('the worker writes a signed digest soon after start and on its schedule, each following the one before', async () => {
    const stop = startAuditDigests(t.db, 1_000, pino({ level: 'silent' }));
    try {
      await eventually(
        'two digests',
        () => readdirSync(digestDir).filter((name) => name.startsWith('digest-')).length >= 2,
      );
    } finally {
      stop();
    }
    const { report, code, stderr } = await verify();
    assert.equal(code, 0, stderr);
    assert.ok(report.digests >= 2);
    assert.equal(report.newestDigest!.sequence, report.digests);
  });

  it('two processes writing digests at once take successive sequences, never one twice', async () => {
    const other = store.createDb(t.url);
    try {
      const written = await Promise.all([store.writeAuditDigest(t.db, 'cli'), store.writeAuditDigest(other, 'cli')]);
      assert.deepEqual(written.map((digest) => digest.sequence).sort(), [1, 2]);
    } finally {
      await other.destroy();
    }
    assert.deepEqual((await verify()).report.faults, []);
  });

  it('keeps rows chained before migration 020 verifiable as the legacy chain, and names a row appended to it later', async () => {
    // Back to the schema before the keyed chains, with rows as the audit-v1 writer chained them (the later migrations
    // touch no audit table: only 020 is undone).
    await t.db.migrate.down({ migrationSource, name: '020_audit_keyed_chain' });
    let prev = store.AUDIT_GENESIS_HASH;
    const legacyRow = (n: number, prevHash: string) => ({
      id: String(1000 + n),
      at: `2026-01-0${n}T00:00:00.000000Z`,
      actor_kind: 'member' as const,
      actor_subject: 'alice',
      actor_issuer: null,
      portal_link_id: null,
      portal_capabilities: null,
      request_id: null,
      caller_address: null,
      action: 'webhook.update',
      outcome: 'ok' as const,
      project_id: 'pa',
      registration_id: null,
      delivery_id: null,
      changes: { n },
      prev_hash: prevHash,
    });
    await t.db('audit_events').delete();
    for (let n = 1; n <= 3; n += 1) {
      const row = legacyRow(n, prev);
      prev = store.legacyAuditRowHash(row);
      await t.db('audit_events').insert({ ...row, changes: JSON.stringify(row.changes), hash: prev });
    }
    await store.migrateToLatest(t.db);
    await store.appendAuditEvent(t.db, { actor, action: 'webhook.test', outcome: 'ok', projectId: 'pa' });
    assert.equal((await cli(['audit', 'digest'], t.url)).code, 0);
    const intact = await verify();
    assert.equal(intact.code, 0, intact.stderr);
    assert.equal(intact.report.chains, 2);
    // With INSERT rights only, the unkeyed legacy chain is extended: named once a digest has recorded its head.
    const appended = legacyRow(4, prev);
    await t.db('audit_events').insert({
      ...appended,
      changes: JSON.stringify(appended.changes),
      chain: 'legacy',
      seq: 4,
      hash: store.legacyAuditRowHash(appended),
    });
    const { code, report } = await verify();
    assert.equal(code, 1);
    assert.deepEqual([report.fault?.kind, report.fault?.id], ['inserted', '1004']);
  });

  it('records a key reseal through the CLI: counts and the key id, as the OS user', async () => {
    const resealed = await cli(['secrets', 'reseal'], t.url, {
      WEBHOOK_SECRET_KEYS: `k7:${randomBytes(32).toString('hex')}`,
    });
    assert.equal(resealed.code, 0, resealed.stderr);
    const row = await t.db<AuditColumns>('audit_events').orderBy('id', 'desc').first();
    assert.deepEqual(
      [row?.action, row?.actor_kind, row?.actor_subject, row?.changes],
      ['secrets.reseal', 'cli', userInfo().username, { total: 0, resealed: 0, keyId: 'k7' }],
    );
  });

  it('exports a window of rows as JSON lines, oldest first, for a SIEM', async () => {
    const all = await t.db('audit_events').orderBy('id').select<{ id: string; at: Date }[]>('id', 'at');
    const everything = await cli(['audit', 'export'], t.url);
    assert.equal(everything.code, 0, everything.stderr);
    const lines = everything.stdout.split('\n').map((line) => JSON.parse(line) as store.AuditEventRow);
    assert.deepEqual(
      lines.map((row) => row.id),
      all.map((row) => String(row.id)),
    );
    assert.deepEqual(lines[0]?.changes, { n: 0 });
    assert.equal(lines[0]?.actor.subject, 'alice');
    const window = await cli(
      ['audit', 'export', '--since', all[1]!.at.toISOString(), '--until', all[3]!.at.toISOString()],
      t.url,
    );
    assert.deepEqual(
      window.stdout.split('\n').map((line) => (JSON.parse(line) as store.AuditEventRow).id),
      [String(all[1]!.id), String(all[2]!.id)],
    );
    const bad = await cli(['audit', 'export', '--since', 'yesterday'], t.url);
    assert.equal(bad.code, 2);
  });
});

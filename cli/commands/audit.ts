import { auditEventsInWindow, pruneAuditEvents, verifyAuditChain, writeAuditDigest } from '../../db';
import { dateTimeProblem } from '../../api/deliveries/schemas';
import { auditTrailKeysFromConfig, generateAuditSigningKey } from '../../common/crypto/audit-keys';
import { AUDIT_RETENTION_FLOOR_DAYS, isDevelopment } from '../../common/config';
import { KEY_ID_PATTERN } from '../../common/crypto/key-ring';
import { CliError, UsageError, cliActor, commandConfig, type CliCommand, parseCommandArgs, withDb } from '../command';

export const auditVerify: CliCommand = {
  usage: 'audit verify [--dir <digest-dir>]',
  summary:
    'check every audit chain (keyed hashes, links), the signed digests and journals of AUDIT_DIGEST_DIR, and both ends of each chain',
  async run(args, io) {
    const { values } = parseCommandArgs(args, { dir: { type: 'string' } }, []);
    const report = await withDb(io, (db) => verifyAuditChain(db, { ...(values.dir && { digestDir: values.dir }) }), {
      audit: true,
    });
    for (const note of report.notes) io.err(`note: ${note}`);
    const summary = `${report.rows} rows in ${report.chains} chains, ${report.digests} digests, ${report.journalLines} journal lines`;
    if (report.faults.length > 0) {
      for (const fault of report.faults) io.err(`${fault.kind}: ${fault.detail}`);
      throw new CliError(`Audit trail broken: ${report.faults.length} faults (${summary})`, 1);
    }
    io.out(`Audit trail intact: ${summary}`);
    if (report.newestDigest) io.out(`newest digest ${report.newestDigest.sequence} ${report.newestDigest.hash}`);
  },
};

export const auditPrune: CliCommand = {
  usage: 'audit prune [--days <n>]',
  summary:
    'remove audit rows older than AUDIT_RETENTION_DAYS (default 2190, the least production takes) from the oldest end of each chain, and write a digest; run as the table owner',
  async run(args, io) {
    const { values } = parseCommandArgs(args, { days: { type: 'string' } }, []);
    if (values.days !== undefined && !/^[1-9]\d{0,4}$/.test(values.days))
      throw new UsageError('--days must be a whole number of days from 1 to 99999');
    const pruned = await withDb(
      io,
      (db, config) => {
        const days = values.days === undefined ? config.AUDIT_RETENTION_DAYS : Number(values.days);
        if (!isDevelopment(config) && days < AUDIT_RETENTION_FLOOR_DAYS)
          throw new UsageError(
            `--days must be at least ${AUDIT_RETENTION_FLOOR_DAYS} in production (six years: HIPAA documentation retention)`,
          );
        return pruneAuditEvents(db, new Date(Date.now() - days * 86_400_000), cliActor(io));
      },
      // The owner's command (the only role with DELETE on the trail): it opens no secret, so production asks no keys.
      { audit: true, withoutKeys: true },
    );
    io.out(
      pruned.removed === 0
        ? 'No audit rows past their retention'
        : `Removed ${pruned.removed} audit rows from ${pruned.chains} chains; a digest records where each now starts`,
    );
  },
};

export const auditDigest: CliCommand = {
  usage: 'audit digest',
  summary: 'write a signed digest of every audit chain into AUDIT_DIGEST_DIR now (the worker writes one on a schedule)',
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    const digest = await withDb(io, (db) => writeAuditDigest(db, 'cli'), { audit: true });
    io.out(`Digest ${digest.sequence} written: ${Object.keys(digest.chains).length} chains`);
  },
};

export const auditPublicKey: CliCommand = {
  usage: 'audit public-key',
  summary:
    'print the public key that verifies the audit digests (id:base64, for AUDIT_SIGNING_PUBLIC_KEYS after rotation)',
  run(args, io) {
    parseCommandArgs(args, {}, []);
    const { signing } = auditTrailKeysFromConfig(commandConfig(io, { audit: true }));
    if (!signing) throw new CliError('AUDIT_SIGNING_KEY is not set');
    io.out(`${signing.id}:${signing.publicKey}`);
    return Promise.resolve();
  },
};

export const auditKeygen: CliCommand = {
  usage: 'audit keygen <keyId>',
  summary: 'print a new Ed25519 digest signing key for AUDIT_SIGNING_KEY',
  run(args, io) {
    const [keyId] = parseCommandArgs(args, {}, ['keyId']).positionals as [string];
    if (!new RegExp(KEY_ID_PATTERN).test(keyId)) throw new UsageError('<keyId> must be 1 to 64 of A-Z a-z 0-9 . _ -');
    io.out(generateAuditSigningKey(keyId));
    return Promise.resolve();
  },
};

export const auditExport: CliCommand = {
  usage: 'audit export [--since <iso>] [--until <iso>]',
  summary: 'print the audit rows of the window, oldest first, one JSON object a line (for a SIEM)',
  async run(args, io) {
    const { values } = parseCommandArgs(args, { since: { type: 'string' }, until: { type: 'string' } }, []);
    const time = (name: string, value: string | undefined) => {
      if (value === undefined) return undefined;
      const problem = dateTimeProblem(value);
      if (problem) throw new UsageError(`--${name} ${problem}`);
      return new Date(value);
    };
    const since = time('since', values.since);
    const until = time('until', values.until);
    await withDb(io, async (db) => {
      for await (const row of auditEventsInWindow(db, { ...(since && { since }), ...(until && { until }) }))
        io.out(JSON.stringify(row));
    });
  },
};

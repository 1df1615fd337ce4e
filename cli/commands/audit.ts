import { auditEventsInWindow, pruneAuditEvents, verifyAuditChain } from '../../db';
import { dateTimeProblem } from '../../api/delivery-schemas';
import { CliError, UsageError, type CliCommand, parseCommandArgs, withDb } from '../command';

export const auditVerify: CliCommand = {
  usage: 'audit verify',
  summary: 'walk the audit trail hash chain; name the first row changed, removed or inserted out of order',
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    const report = await withDb(io, (db) => verifyAuditChain(db));
    if (report.fault)
      throw new CliError(`Audit trail broken after ${report.rows} intact rows: ${report.fault.detail}`, 1);
    io.out(`Audit trail intact: ${report.rows} rows`);
    io.out(`anchor ${report.anchor}`);
    // Kept elsewhere, the head lets a later verify prove nothing before it was rewritten as a whole.
    io.out(`head ${report.head}`);
  },
};

export const auditPrune: CliCommand = {
  usage: 'audit prune [--days <n>]',
  summary:
    'remove audit rows older than AUDIT_RETENTION_DAYS (default 2190) from the oldest end; run as the table owner',
  async run(args, io) {
    const { values } = parseCommandArgs(args, { days: { type: 'string' } }, []);
    if (values.days !== undefined && !/^[1-9]\d{0,4}$/.test(values.days))
      throw new UsageError('--days must be a whole number of days from 1 to 99999');
    const pruned = await withDb(
      io,
      (db, config) => {
        const days = values.days === undefined ? config.AUDIT_RETENTION_DAYS : Number(values.days);
        return pruneAuditEvents(db, new Date(Date.now() - days * 86_400_000));
      },
      // The owner's command (the only role with DELETE on the trail): it opens no secret, so production asks no keys.
      { withoutKeys: true },
    );
    io.out(
      pruned.removed === 0
        ? 'No audit rows past their retention'
        : `Removed ${pruned.removed} audit rows; the chain now starts after ${pruned.anchor}`,
    );
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

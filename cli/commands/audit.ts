import { verifyAuditChain } from '../../db';
import { CliError, type CliCommand, parseCommandArgs, withDb } from '../command';

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

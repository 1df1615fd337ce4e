// The audit trail as tests read it: the row type of db/, and the operator CLI run in process with the test keys.
import { main } from '../../cli';
import { testAuditEnv } from '../support/audit-keys';

/** An audit_events row as PostgreSQL returns it. */
export type { AuditColumns } from '../../db';

/** Runs the operator CLI in process against the database at `url`, signing and journaling into `digestDir`. */
export async function auditCli(args: string[], url: string, digestDir: string, env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: url, ...testAuditEnv(digestDir), ...env },
    out: (line) => void out.push(line),
    err: (line) => void err.push(line),
  });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

// The audit trail as tests read it: the columns of its rows, and the operator CLI run in process with the test keys.
import { main } from '../../cli';
import { testAuditEnv } from '../support/audit-keys';

/** An audit_events row as PostgreSQL returns it (the chain's own columns aside). */
export interface AuditColumns {
  id: string;
  actor_kind: string;
  actor_subject: string | null;
  actor_issuer: string | null;
  portal_link_id: string | null;
  portal_capabilities: string[] | null;
  request_id: string | null;
  caller_address: string | null;
  action: string;
  outcome: string;
  project_id: string | null;
  registration_id: string | null;
  delivery_id: string | null;
  changes: Record<string, unknown> | null;
}

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

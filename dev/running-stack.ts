// Where a running `npm start` tells the CLI in another terminal what it serves: DATA_DIR/dev-stack.json, written once
// its embedded services are up, removed when they stop. A file left by a process that died is recognised and ignored.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive } from './processes';

const RECORD_FILE = 'dev-stack.json';

/** The addresses of the embedded services a running stack started (only those it started). */
export interface RunningStackAddresses {
  DATABASE_URL?: string;
  TEMPORAL_ADDRESS?: string;
}

interface RunningStackRecord extends RunningStackAddresses {
  /** The Node process that runs the stack, and its start time: a pid the system reused later is another process. */
  pid: number;
  pidStartedAt: string | undefined;
}

/** Clock ticks since boot at which the process started (proc(5) stat field 22); undefined without /proc. */
function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Records this process's stack in dataDir; returns the function that removes the record. */
export function recordRunningStack(dataDir: string, addresses: RunningStackAddresses): () => void {
  const file = join(dataDir, RECORD_FILE);
  const record: RunningStackRecord = { ...addresses, pid: process.pid, pidStartedAt: processStartTime(process.pid) };
  writeFileSync(file, JSON.stringify(record, null, 2) + '\n', { mode: 0o600 });
  return () => rmSync(file, { force: true });
}

/** The addresses of the stack running on dataDir, or undefined when none runs (no record, or its process is gone). */
export function readRunningStack(dataDir: string): RunningStackAddresses | undefined {
  let record: Partial<RunningStackRecord>;
  try {
    record = JSON.parse(readFileSync(join(dataDir, RECORD_FILE), 'utf8')) as Partial<RunningStackRecord>;
  } catch {
    return undefined;
  }
  const { pid, pidStartedAt, DATABASE_URL, TEMPORAL_ADDRESS } = record;
  if (typeof pid !== 'number' || !isAlive(pid)) return undefined;
  if (pidStartedAt !== undefined && processStartTime(pid) !== pidStartedAt) return undefined;
  return {
    ...(typeof DATABASE_URL === 'string' && { DATABASE_URL }),
    ...(typeof TEMPORAL_ADDRESS === 'string' && { TEMPORAL_ADDRESS }),
  };
}

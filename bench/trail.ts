// The audit trail under contention: 20 loops PATCH project A's webhook (each a real change, so each writes a row)
// while project B's member PATCHes B's one at a time and B's breaker goes open → half-open → closed through the
// worker's own database functions (each transition a row too). Every row takes the trail's chain lock, so A's loops
// are what B's changes and transitions queue behind. As in production, the callers reach separate processes: A's loops
// run in a load process of their own (bench/trail-load.ts) against one API process (dist/api/server.js, production
// config), B's PATCHes go to a second API process, and B's breaker transitions run in the bench's process, as a
// worker's would; so B's figures are what the database makes it wait, not one saturated event loop. A's 429s
// (AUDITED_WRITES_PER_MINUTE) are counted, not hidden.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import jwt from 'jsonwebtoken';
import { createSecretBox } from '../common/crypto/secrets';
import { freePort } from '../dev/ports';
import { addMember, addProject, admitAttempt, createDb, createRegistration, recordFailure, recordSuccess } from '../db';
import { startNodeService, track, type BenchProcess } from './processes';
import { ratePerSecond, summarize, type LatencySummary } from './stats';
import type { TrailLoadCounts, TrailLoadLine, TrailLoadTask } from './trail-load';

export type BreakerTransition = 'open' | 'half-open' | 'close';

export interface TrailStageResult {
  seconds: number;
  loops: number;
  /** AUDITED_WRITES_PER_MINUTE of the stage's API processes (per caller; all of A's loops are one member). */
  writesPerMinute: number;
  /** API processes the stage ran: one for A's loops, one for B's PATCHes. */
  apiProcesses: number;
  /** Project A's loops: PATCHes answered 200 (a row each), 429 (the write limit), and anything else. */
  a: { accepted: number; refused: number; other: number; acceptedPerSecond: number };
  /** Project B's PATCHes, one at a time, while A's loops run. */
  b: { latencyMs: LatencySummary; failures: number };
  /** Each breaker transition's statement (with its audit row), by transition. */
  breaker: Record<BreakerTransition, LatencySummary> & { cycles: number };
}

const MEMBER_A = 'bench-trail-member-a';
const MEMBER_B = 'bench-trail-member-b';
const BREAKER = { failureThreshold: 1, openMs: 20, maxOpenMs: 20 };
const PROBE_LEASE_MS = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A's load generator (bench/trail-load.ts through tsx); its stderr to <logDir>/trail-load.log. */
function startLoad(task: TrailLoadTask, logDir: string) {
  const logFd = openSync(join(logDir, 'trail-load.log'), 'a');
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', join(__dirname, 'trail-load.ts')], {
    cwd: join(__dirname, '..'),
    env: { ...process.env, BENCH_TRAIL_LOAD: JSON.stringify(task) },
    stdio: ['pipe', 'pipe', logFd],
  });
  closeSync(logFd);
  const load = track('trail-load', child);
  // Gone before its start line (its exit is reported below): no EPIPE crash of the bench.
  child.stdin!.on('error', () => undefined);
  const lines = createInterface({ input: child.stdout! });
  /** The first line `accept` takes; rejects when the process exits first or after `timeoutMs`. */
  const line = <T>(what: string, timeoutMs: number, accept: (line: TrailLoadLine) => T | undefined) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`trail load: no ${what} within ${timeoutMs} ms`)), timeoutMs);
      const onLine = (text: string) => {
        let value: T | undefined;
        try {
          value = accept(JSON.parse(text) as TrailLoadLine);
        } catch {
          value = undefined;
        }
        if (value !== undefined) done(undefined, value);
      };
      const onExit = (code: number | null) =>
        done(new Error(`trail load exited (${code}) before its ${what}; see ${join(logDir, 'trail-load.log')}`));
      function done(error?: Error, value?: T) {
        clearTimeout(timer);
        lines.off('line', onLine);
        child.off('exit', onExit);
        if (error) reject(error);
        else resolve(value!);
      }
      lines.on('line', onLine);
      child.once('exit', onExit);
    });
  const ready = line('ready line', 60_000, (l) => ('ready' in l ? true : undefined));
  const counts = line<TrailLoadCounts>('counts', task.seconds * 1000 + 60_000, (l) =>
    'counts' in l ? l.counts : undefined,
  );
  // Awaited after the stage's own loops; a failure before then is not left unhandled meanwhile.
  counts.catch(() => undefined);
  return { load, ready, counts, go: () => child.stdin!.end('go\n') };
}

export async function trailStage(
  databaseUrl: string,
  options: {
    seconds: number;
    loops: number;
    writesPerMinute: number;
    /** The run's production environment (bench/index.ts): database, audit keys, JWT_SECRET, WEBHOOK_SECRET_KEY. */
    env: NodeJS.ProcessEnv;
    logDir: string;
    cpuProfDir?: string;
    log: (message: string) => void;
  },
): Promise<TrailStageResult> {
  const { env } = options;
  const runId = randomBytes(4).toString('hex');
  const secretBox = createSecretBox(Buffer.from(env.WEBHOOK_SECRET_KEY!, 'hex'));
  const db = createDb(databaseUrl, { max: 2 });
  // B's breaker, as a worker's pool would run it: this process does nothing else meanwhile but B's one PATCH at a time.
  const breakerDb = createDb(databaseUrl, { max: 2 });
  const services: BenchProcess[] = [];
  let load: BenchProcess | undefined;
  try {
    const project = async (name: string, member: string) => {
      const id = `bench-trail-${runId}-${name}`;
      await addProject(db, id);
      await addMember(db, id, member);
      const made = await createRegistration(db, secretBox, {
        projectId: id,
        url: 'https://receiver.example.com/hooks',
        types: ['FALL_DETECTION'],
      });
      return { id, registrationId: made!.row.id };
    };
    const a = await project('a', MEMBER_A);
    const b = await project('b', MEMBER_B);

    // Two API processes as the 'api' stage starts one, each on its own port: A's callers reach one, B's the other.
    const ports = { a: await freePort(), b: await freePort() };
    const started = await Promise.allSettled(
      (['a', 'b'] as const).map((which) =>
        startNodeService({
          name: 'api',
          label: `trail-api-${which}`,
          env: { ...env, PORT: String(ports[which]), AUDITED_WRITES_PER_MINUTE: String(options.writesPerMinute) },
          logDir: options.logDir,
          cpuProfDir: options.cpuProfDir,
        }),
      ),
    );
    for (const result of started) if (result.status === 'fulfilled') services.push(result.value);
    for (const result of started) if (result.status === 'rejected') throw result.reason;
    const url = (which: 'a' | 'b') => `http://127.0.0.1:${ports[which]}`;
    const token = (sub: string) => jwt.sign({ sub }, env.JWT_SECRET!, { algorithm: 'HS256', expiresIn: 3600 });

    const loadRun = startLoad(
      { url: url('a'), token: token(MEMBER_A), projectId: a.id, loops: options.loops, seconds: options.seconds },
      options.logDir,
    );
    load = loadRun.load;
    await loadRun.ready;

    const tokenB = token(MEMBER_B);
    const patchB = (body: object) =>
      fetch(`${url('b')}/webhooks`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${tokenB}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(
        async (reply) => {
          await reply.arrayBuffer();
          return reply.status;
        },
        () => 0,
      );

    let deadline = 0;
    const running = () => performance.now() < deadline;
    const bLatencies: number[] = [];
    let bFailures = 0;
    const bLoop = async () => {
      let flip = false;
      while (running()) {
        flip = !flip;
        const started = performance.now();
        const status = await patchB({
          projectId: b.id,
          types: flip ? ['FALL_DETECTION', 'VITAL_THRESHOLD'] : ['FALL_DETECTION'],
        });
        if (status === 200) bLatencies.push(performance.now() - started);
        else bFailures += 1;
      }
    };
    const transitions: Record<BreakerTransition, number[]> = { open: [], 'half-open': [], close: [] };
    let cycles = 0;
    const timed = async <T>(transition: BreakerTransition, step: () => Promise<T>): Promise<T> => {
      const started = performance.now();
      const result = await step();
      transitions[transition].push(performance.now() - started);
      return result;
    };
    // As the worker does: a failure opens B's breaker, the first admission after its period probes, a 2xx closes it.
    const breakerLoop = async () => {
      while (running()) {
        await timed('open', () =>
          recordFailure(breakerDb, b.registrationId, BREAKER, { message: 'HTTP 503', statusCode: 503 }),
        );
        for (;;) {
          await sleep(BREAKER.openMs);
          const started = performance.now();
          const admission = await admitAttempt(breakerDb, b.registrationId, PROBE_LEASE_MS);
          if (admission.state === 'probe') {
            transitions['half-open'].push(performance.now() - started);
            break;
          }
        }
        await timed('close', () => recordSuccess(breakerDb, b.registrationId));
        cycles += 1;
      }
    };
    options.log(
      `trail: ${options.loops} loops PATCH project A (a load process → API process 1), B PATCHes (→ API process 2) ` +
        `and its breaker cycles (this process), ${options.seconds} s (AUDITED_WRITES_PER_MINUTE ${options.writesPerMinute})`,
    );
    loadRun.go();
    deadline = performance.now() + options.seconds * 1000;
    await Promise.all([bLoop(), breakerLoop()]);
    const aCounts = await loadRun.counts;
    return {
      seconds: options.seconds,
      loops: options.loops,
      writesPerMinute: options.writesPerMinute,
      apiProcesses: services.length,
      a: {
        accepted: aCounts.accepted,
        refused: aCounts.refused,
        other: aCounts.other,
        acceptedPerSecond: ratePerSecond(aCounts.accepted, aCounts.spanMs),
      },
      b: { latencyMs: summarize(bLatencies), failures: bFailures },
      breaker: {
        open: summarize(transitions.open),
        'half-open': summarize(transitions['half-open']),
        close: summarize(transitions.close),
        cycles,
      },
    };
  } finally {
    await Promise.all([load?.stop(1_000), ...services.map((service) => service.stop())]);
    await Promise.all([db.destroy(), breakerDb.destroy()]);
  }
}

/** What the stage's figures say is wrong: B refused, or a loop that got nothing done. */
export function trailStageProblems(result: TrailStageResult): string[] {
  const problems: string[] = [];
  if (result.b.failures) problems.push(`trail: ${result.b.failures} of project B's PATCHes not answered 200`);
  if (result.a.other) problems.push(`trail: ${result.a.other} of project A's PATCHes answered neither 200 nor 429`);
  if (result.breaker.cycles === 0) problems.push("trail: B's breaker never went open → half-open → closed");
  return problems;
}

// The audit trail under contention: 20 loops PATCH project A's webhook (each a real change, so each writes a row)
// while project B's member PATCHes B's one at a time and B's breaker goes open → half-open → closed through the
// worker's own database functions (each transition a row too). Every row takes the trail's chain lock, so A's loops
// are what B's changes and transitions queue behind. The real API (createApp) in the bench's process, on the run's
// PostgreSQL with the production pool's size; A's 429s (AUDITED_WRITES_PER_MINUTE) are counted, not hidden.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import jwt from 'jsonwebtoken';
import pino from 'pino';
import { createApp } from '../api/app';
import { createSecretBox } from '../common/secrets';
import { addMember, addProject, admitAttempt, createDb, createRegistration, recordFailure, recordSuccess } from '../db';
import { ratePerSecond, summarize, type LatencySummary } from './stats';

export type BreakerTransition = 'open' | 'half-open' | 'close';

export interface TrailStageResult {
  seconds: number;
  loops: number;
  /** AUDITED_WRITES_PER_MINUTE of the stage's API (per caller; all of A's loops are one member). */
  writesPerMinute: number;
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

export async function trailStage(
  databaseUrl: string,
  options: { seconds: number; loops: number; writesPerMinute: number; log: (message: string) => void },
): Promise<TrailStageResult> {
  const runId = randomBytes(4).toString('hex');
  const jwtSecret = randomBytes(32).toString('hex');
  const secretBox = createSecretBox(randomBytes(32));
  // The production pool's size: 10 connections, shared by the API and B's breaker, as in one process of each.
  const db = createDb(databaseUrl, { max: 10 });
  const breakerDb = createDb(databaseUrl, { max: 2 });
  let server: Server | undefined;
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
    const app = createApp({
      db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: jwtSecret },
      sendTestEvent: () => Promise.reject(new Error('the trail stage sends no test event')),
      writeLimits: { perMinute: options.writesPerMinute },
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server!.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const token = (sub: string) => jwt.sign({ sub }, jwtSecret, { algorithm: 'HS256', expiresIn: 3600 });
    const patch = (bearer: string, body: object) =>
      fetch(`${url}/webhooks`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(async (reply) => {
        await reply.arrayBuffer();
        return reply.status;
      });

    const deadline = performance.now() + options.seconds * 1000;
    const running = () => performance.now() < deadline;
    const aCounts = { accepted: 0, refused: 0, other: 0 };
    // Each PATCH a new path, so each is a real change and writes its row.
    let aChange = 0;
    const aLoop = async (tokenA: string) => {
      while (running()) {
        const status = await patch(tokenA, {
          projectId: a.id,
          url: `https://receiver.example.com/hooks/${aChange++}`,
        });
        if (status === 200) aCounts.accepted += 1;
        else if (status === 429) aCounts.refused += 1;
        else aCounts.other += 1;
        // A refused loop would spin: it comes back at the pace a client honouring Retry-After would, roughly.
        if (status === 429) await sleep(50);
      }
    };
    const bLatencies: number[] = [];
    let bFailures = 0;
    const bLoop = async (tokenB: string) => {
      let flip = false;
      while (running()) {
        flip = !flip;
        const started = performance.now();
        const status = await patch(tokenB, {
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
      `trail: ${options.loops} loops PATCH project A, B PATCHes and its breaker cycles, ${options.seconds} s ` +
        `(AUDITED_WRITES_PER_MINUTE ${options.writesPerMinute})`,
    );
    const started = performance.now();
    await Promise.all([
      ...Array.from({ length: options.loops }, () => aLoop(token(MEMBER_A))),
      bLoop(token(MEMBER_B)),
      breakerLoop(),
    ]);
    const spanMs = performance.now() - started;
    return {
      seconds: options.seconds,
      loops: options.loops,
      writesPerMinute: options.writesPerMinute,
      a: { ...aCounts, acceptedPerSecond: ratePerSecond(aCounts.accepted, spanMs) },
      b: { latencyMs: summarize(bLatencies), failures: bFailures },
      breaker: {
        open: summarize(transitions.open),
        'half-open': summarize(transitions['half-open']),
        close: summarize(transitions.close),
        cycles,
      },
    };
  } finally {
    if (server) await new Promise((resolve) => server!.close(resolve));
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

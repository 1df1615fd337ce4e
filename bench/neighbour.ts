// Isolation stages: a neighbour whose receiver fails (hangs, refuses, answers 503 with Retry-After: 0) beside a
// healthy project's falls, and a flood of vitals beyond the engine's limit beside falls. Latencies of the healthy
// project per window; attempts against the failing receiver; how long its backlog takes once it recovers.
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { emitWebhookEvent, eventWorkflowId, type WebhookEvent } from '../client/emit';
import type { SubscribableType } from '../common/contract';
import type { Accounting } from './processes';
import type { StageContext } from './stages';
import { summarize, wallClockMs, type LatencySummary } from './stats';

export type NeighbourFault = 'hang' | 'refuse' | '503';
type ReceiverMode = NeighbourFault | 'healthy';

/**
 * The failing neighbour's receiver, in the bench process: counts every request, answers per mode, and records the
 * first 2xx of each event id. `refuse` closes the port (connections are refused); the others keep it open.
 */
export class NeighbourReceiver {
  private server: Server | undefined;
  private hanging = new Set<ServerResponse>();
  private mode: ReceiverMode = 'healthy';
  port = 0;
  /** Arrival times of every request, whatever the answer. */
  readonly requests: number[] = [];
  /** Event id → [first 2xx time, userUUIDs seen]. */
  readonly delivered = new Map<string, { at: number; users: Set<string> }>();

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks/neighbour`;
  }

  async start(): Promise<void> {
    await this.listen();
  }

  async setMode(mode: ReceiverMode): Promise<void> {
    this.mode = mode;
    if (mode !== 'hang') this.releaseHanging();
    if (mode === 'refuse') await this.close();
    else if (!this.server) await this.listen();
  }

  async stop(): Promise<void> {
    this.releaseHanging();
    await this.close();
  }

  private listen(): Promise<void> {
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const at = wallClockMs();
        this.requests.push(at);
        if (this.mode === 'hang') {
          this.hanging.add(response);
          response.once('close', () => this.hanging.delete(response));
          return;
        }
        if (this.mode === '503') {
          response.writeHead(503, { 'retry-after': '0' }).end();
          return;
        }
        const id = String(request.headers['x-webhook-id'] ?? '');
        const user = userOf(Buffer.concat(chunks));
        const entry = this.delivered.get(id) ?? { at, users: new Set<string>() };
        entry.users.add(user);
        this.delivered.set(id, entry);
        response.writeHead(200).end('ok');
      });
    });
    server.keepAliveTimeout = 60_000;
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => {
        this.port = (server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  private releaseHanging(): void {
    for (const response of this.hanging) response.destroy();
    this.hanging.clear();
  }

  private async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

function userOf(body: Buffer): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { userUUID?: unknown };
    return typeof parsed.userUUID === 'string' ? parsed.userUUID : '';
  } catch {
    return '';
  }
}

export interface WindowRow {
  /** Seconds from the start of the load to the start of this window. */
  fromSecond: number;
  count: number;
  p50: number;
  p99: number;
}

export interface NeighbourRow {
  fault: NeighbourFault;
  seconds: number;
  windowSeconds: number;
  neighbourRate: number;
  healthyRate: number;
  /** The healthy project's FALL_DETECTION, emit → verified receipt, per window of the load. */
  windows: WindowRow[];
  healthy: LatencySummary;
  healthyAccounting: Accounting;
  /**
   * Attempts against the failing receiver per second while it failed, averaged over the whole fault, and the most in
   * any one window (windowSeconds) of it. Counted where requests arrive; a refused connection never arrives, so then
   * from the delivery log (one row per attempt that went out, at its end); null when neither could count.
   */
  neighbourAttemptsPerSecond: number | null;
  neighbourPeakAttemptsPerSecond: number | null;
  /** Attempts per window while failing, the fault's first window first. */
  neighbourAttemptWindows: number[] | null;
  attemptsCountedFrom: 'receiver' | 'delivery log' | null;
  /** From the receiver's recovery to the arrival of the neighbour's last event (null when some never arrived). */
  backlogRecoverySeconds: number | null;
  neighbourSent: number;
  neighbourDelivered: number;
  /** Neighbour events delivered under more than one id (the same body twice). */
  neighbourUnderTwoIds: number;
}

export interface FloodResult {
  seconds: number;
  windowSeconds: number;
  /** How vitalRate was chosen: a multiple of the engine limit measured in this run, or of the assumed one. */
  vitalRateBasis: string;
  vitalRate: number;
  fallRate: number;
  windows: WindowRow[];
  falls: LatencySummary;
  vitals: LatencySummary;
  /** Emit → the start accepted by Temporal (the client's call returned): the part of the latency at the engine's door. */
  fallStarts: LatencySummary;
  vitalStarts: LatencySummary;
  /** From the falls' histories: the first workflow task's wait in the task queue (scheduled → picked up by a worker). */
  fallTaskQueueWait: LatencySummary;
  /** The worker picked the first workflow task up → the receiver had the POST (the activation, lookup and attempt). */
  fallInWorker: LatencySummary;
  accounting: Accounting;
}

interface Emitted {
  eventId: string;
  id: string;
  user: string;
  /** When it is due, from the start of the stage's load. */
  dueMs: number;
  startedAt: number;
  /** When the client's start call returned. */
  acceptedAt?: number;
  projectId: string;
  webhookType: SubscribableType;
}

function payloadOf(webhookType: SubscribableType, userUUID: string): WebhookEvent['payload'] {
  const person = { userUUID, email: 'bench@example.com', firstName: 'Bench', lastName: 'Resident' };
  return webhookType === 'FALL_DETECTION'
    ? { ...person, reasons: ['fall'], happenedAt: new Date().toISOString() }
    : {
        ...person,
        triggeredVitals: [
          { vitalType: 'heartrate', badValue: 180, thresholdValue: 150, vital_id: randomUUID(), reason: 'high' },
        ],
      };
}

/** The events of several streams, each at its own rate, for `seconds`, in the order they are due. */
function planStreams(
  ctx: StageContext,
  label: string,
  seconds: number,
  streams: { projectId: string; webhookType: SubscribableType; rate: number }[],
): Emitted[] {
  return streams
    .flatMap((stream, s) =>
      Array.from({ length: Math.round(stream.rate * seconds) }, (_, i) => {
        const eventId = `bench-${ctx.runId}-${label}-${s}-${i}`;
        return {
          eventId,
          id: eventWorkflowId(eventId),
          user: randomUUID(),
          dueMs: (i * 1000) / stream.rate,
          startedAt: 0,
          projectId: stream.projectId,
          webhookType: stream.webhookType,
        };
      }),
    )
    .sort((a, b) => a.dueMs - b.dueMs);
}

/** Emits planned events on their schedule (open loop) from `t0`. */
async function emitPlanned(ctx: StageContext, planned: Emitted[], t0: number): Promise<void> {
  const starts: Promise<unknown>[] = [];
  for (const event of planned) {
    const wait = t0 + event.dueMs - wallClockMs();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    event.startedAt = wallClockMs();
    const { projectId, webhookType, user } = event;
    starts.push(
      emitWebhookEvent(
        ctx.client,
        { projectId, webhookType, userUUID: user, payload: payloadOf(webhookType, user) },
        { eventId: event.eventId, taskQueue: ctx.deliveryTaskQueue },
      ).then(() => (event.acceptedAt = wallClockMs())),
    );
  }
  await Promise.all(starts);
}

/** p50/p99 of the latencies of events started within each window. */
function perWindow(events: Emitted[], receivedAt: (id: string) => number | undefined, t0: number, windowS: number) {
  const rows: WindowRow[] = [];
  const last = Math.max(...events.map((event) => event.startedAt), t0);
  for (let from = t0; from <= last; from += windowS * 1000) {
    const latencies = events
      .filter((event) => event.startedAt >= from && event.startedAt < from + windowS * 1000)
      .flatMap((event) => {
        const at = receivedAt(event.id);
        return at === undefined ? [] : [at - event.startedAt];
      });
    const summary = summarize(latencies);
    rows.push({ fromSecond: Math.round((from - t0) / 1000), count: summary.count, p50: summary.p50, p99: summary.p99 });
  }
  return rows;
}

/** Requests per window of `windowS` from t0 to `end`; a last window shorter than a second is left out of rates. */
function attemptsPerWindow(times: number[], t0: number, end: number, windowS: number) {
  const rows: { count: number; perSecond: number }[] = [];
  for (let from = t0; from < end; from += windowS * 1000) {
    const to = Math.min(end, from + windowS * 1000);
    const count = times.filter((at) => at >= from && at < to).length;
    rows.push({ count, perSecond: to - from >= 1000 ? count / ((to - from) / 1000) : 0 });
  }
  return rows;
}

export interface NeighbourPlan {
  seconds: number;
  windowSeconds: number;
  neighbourRate: number;
  healthyRate: number;
  /** How long the neighbour's backlog may take to arrive after its receiver recovers. */
  recoveryDeadlineSeconds: number;
}

/**
 * One fault: the neighbour's receiver fails while both projects emit; then it recovers and its backlog drains.
 * The healthy project's events go to the verifying receiver (ctx.ledger), the neighbour's to `neighbour`.
 */
export async function neighbourStage(
  ctx: StageContext,
  neighbour: NeighbourReceiver,
  projects: { failing: string; healthy: string },
  fault: NeighbourFault,
  plan: NeighbourPlan,
  /** Times (epoch ms) of the failing project's logged attempts between two instants: counts a refusing receiver. */
  loggedAttempts?: (projectId: string, from: number, to: number) => Promise<number[]>,
): Promise<NeighbourRow> {
  await neighbour.setMode(fault);
  const requestsBefore = neighbour.requests.length;
  const planned = planStreams(ctx, `neighbour-${fault}`, plan.seconds, [
    { projectId: projects.failing, webhookType: 'VITAL_THRESHOLD', rate: plan.neighbourRate },
    { projectId: projects.healthy, webhookType: 'FALL_DETECTION', rate: plan.healthyRate },
  ]);
  const healthy = planned.filter((event) => event.projectId === projects.healthy);
  const failing = planned.filter((event) => event.projectId === projects.failing);
  ctx.ledger.expect(healthy);
  const t0 = wallClockMs();
  await emitPlanned(ctx, planned, t0);
  await ctx.ledger.settle(Date.now() + 30_000 + plan.seconds * 1000);
  const recoveredAt = wallClockMs();
  const failingFor = (recoveredAt - t0) / 1000;
  const countedFrom = fault !== 'refuse' ? 'receiver' : loggedAttempts ? 'delivery log' : null;
  const attemptTimes =
    fault !== 'refuse'
      ? neighbour.requests.slice(requestsBefore).filter((at) => at < recoveredAt)
      : ((await loggedAttempts?.(projects.failing, t0, recoveredAt)) ?? []);
  const attemptWindows = attemptsPerWindow(attemptTimes, t0, recoveredAt, plan.windowSeconds);

  await neighbour.setMode('healthy');
  const deadline = Date.now() + plan.recoveryDeadlineSeconds * 1000;
  const arrived = () => failing.filter((event) => neighbour.delivered.has(event.id)).length;
  while (arrived() < failing.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  const lastArrival = Math.max(...failing.map((event) => neighbour.delivered.get(event.id)?.at ?? Infinity));
  const idsPerUser = new Map<string, number>();
  for (const event of failing)
    for (const user of neighbour.delivered.get(event.id)?.users ?? [])
      idsPerUser.set(user, (idsPerUser.get(user) ?? 0) + 1);

  const healthyLatencies = healthy.flatMap((event) => {
    const at = ctx.ledger.receivedAt(event.id);
    return at === undefined ? [] : [at - event.startedAt];
  });
  return {
    fault,
    seconds: plan.seconds,
    windowSeconds: plan.windowSeconds,
    neighbourRate: plan.neighbourRate,
    healthyRate: plan.healthyRate,
    windows: perWindow(healthy, (id) => ctx.ledger.receivedAt(id), t0, plan.windowSeconds),
    healthy: summarize(healthyLatencies),
    healthyAccounting: ctx.ledger.account(),
    neighbourAttemptsPerSecond: countedFrom && Math.round((attemptTimes.length / failingFor) * 10) / 10,
    neighbourPeakAttemptsPerSecond:
      countedFrom && Math.round(Math.max(0, ...attemptWindows.map((w) => w.perSecond)) * 10) / 10,
    neighbourAttemptWindows: countedFrom && attemptWindows.map((w) => w.count),
    attemptsCountedFrom: countedFrom,
    backlogRecoverySeconds: Number.isFinite(lastArrival)
      ? Math.round(Math.max(0, lastArrival - recoveredAt) / 100) / 10
      : null,
    neighbourSent: failing.length,
    neighbourDelivered: arrived(),
    neighbourUnderTwoIds: [...idsPerUser.values()].filter((count) => count > 1).length,
  };
}

/** VITAL_THRESHOLD beyond the engine's limit with FALL_DETECTION alongside, both to the verifying receiver. */
export async function floodStage(
  ctx: StageContext,
  projects: { vitals: string; falls: string },
  plan: { seconds: number; windowSeconds: number; vitalRate: number; vitalRateBasis: string; fallRate: number },
): Promise<FloodResult> {
  const emitted = planStreams(ctx, 'flood', plan.seconds, [
    { projectId: projects.vitals, webhookType: 'VITAL_THRESHOLD', rate: plan.vitalRate },
    { projectId: projects.falls, webhookType: 'FALL_DETECTION', rate: plan.fallRate },
  ]);
  ctx.ledger.expect(emitted);
  const t0 = wallClockMs();
  await emitPlanned(ctx, emitted, t0);
  // The vitals' backlog drains at the engine's pace after the flood: wait for all of it, bounded.
  await ctx.ledger.settle(Date.now() + 120_000 + emitted.length * 50);
  /** From emit to `at` (when it happened) for the events of one type; those it never happened to are left out. */
  const sinceEmit = (type: SubscribableType, at: (event: Emitted) => number | undefined) =>
    summarize(
      emitted.flatMap((event) => {
        const time = event.webhookType === type ? at(event) : undefined;
        return time === undefined ? [] : [time - event.startedAt];
      }),
    );
  const received = (event: Emitted) => ctx.ledger.receivedAt(event.id);
  const accepted = (event: Emitted) => event.acceptedAt;
  const falls = emitted.filter((event) => event.webhookType === 'FALL_DETECTION');
  const queueWaits: number[] = [];
  const inWorker: number[] = [];
  for (const fall of falls) {
    const { events } = await ctx.client.workflow.getHandle(fall.id).fetchHistory();
    const at = (type: temporal.api.enums.v1.EventType) => {
      const event = events?.find((e) => e.eventType === type);
      return event?.eventTime ? tsToMs(event.eventTime) : undefined;
    };
    const scheduled = at(temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED);
    const started = at(temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
    if (scheduled !== undefined && started !== undefined) queueWaits.push(started - scheduled);
    const arrived = received(fall);
    if (started !== undefined && arrived !== undefined) inWorker.push(arrived - started);
  }
  return {
    seconds: plan.seconds,
    windowSeconds: plan.windowSeconds,
    vitalRateBasis: plan.vitalRateBasis,
    vitalRate: plan.vitalRate,
    fallRate: plan.fallRate,
    windows: perWindow(falls, (id) => ctx.ledger.receivedAt(id), t0, plan.windowSeconds),
    falls: sinceEmit('FALL_DETECTION', received),
    vitals: sinceEmit('VITAL_THRESHOLD', received),
    fallStarts: sinceEmit('FALL_DETECTION', accepted),
    vitalStarts: sinceEmit('VITAL_THRESHOLD', accepted),
    fallTaskQueueWait: summarize(queueWaits),
    fallInWorker: summarize(inWorker),
    accounting: ctx.ledger.account(),
  };
}

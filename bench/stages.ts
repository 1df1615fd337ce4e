// The measurements of one bench run. Each stage is bounded: it sends a fixed number of events and waits for
// them until a deadline, then accounts for every one.
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import type { Client } from '@temporalio/client';
import { createWebhookHttpClient } from '../activities';
import { emitWebhookEvent, eventWorkflowId, type WebhookEvent } from '../client/emit';
import { signPayload } from '../common/crypto/signature';
import type { Accounting, ReceiptLedger } from './processes';
import { ratePerSecond, summarize, wallClockMs, type LatencySummary } from './stats';

/** In-flight start calls while saturating: enough to keep the server busy, bounded so the client stays fair. */
export const START_CONCURRENCY = 64;
/** In-flight raw POSTs: the delivery client's connection pool size (activities/http/client.ts). */
export const RAW_CONCURRENCY = 32;

export interface StageContext {
  client: Client;
  ledger: ReceiptLedger;
  receiverUrl: string;
  /** The webhook secret of the bench project, as the receiver knows it. */
  secret: string;
  projectId: string;
  deliveryTaskQueue: string;
  emptyTaskQueue: string;
  runId: string;
}

/** Runs fn(0..n-1) with at most `concurrency` in flight. */
export async function runPool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < n) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, lane));
}

/** How long a stage may wait for its last event: generous, but bounded. */
const deadlineFor = (n: number, perEventMs = 25) => Date.now() + 60_000 + n * perEventMs;

export interface EngineResult {
  n: number;
  completedPerSecond: number;
  startsPerSecond: number;
  /** Server-side start→close of each workflow. */
  latencyMs: LatencySummary;
  completed: number;
}

/** N empty workflows started as fast as the client can: the engine's own limit on this machine. */
export async function engineLimit(
  ctx: Pick<StageContext, 'client' | 'emptyTaskQueue' | 'runId'>,
  n: number,
  label: string,
): Promise<EngineResult> {
  const prefix = `bench-empty-${ctx.runId}-${label}-`;
  const query = `TaskQueue = '${ctx.emptyTaskQueue}' AND ExecutionStatus = 'Completed'`;
  const count = () => ctx.client.workflow.count(query).then((result) => result.count);
  // Earlier stages share the task queue: wait for this stage's n on top of what had completed before.
  const before = await count();
  const firstStart = wallClockMs();
  await runPool(n, START_CONCURRENCY, async (i) => {
    await ctx.client.workflow.start('benchEmpty', { taskQueue: ctx.emptyTaskQueue, workflowId: `${prefix}${i}` });
  });
  const startsDone = wallClockMs();
  const deadline = deadlineFor(n);
  let completed = 0;
  while (Date.now() < deadline) {
    completed = (await count()) - before;
    if (completed >= n) {
      let lastClose = 0;
      const latencies: number[] = [];
      for await (const execution of ctx.client.workflow.list({ query })) {
        if (!execution.workflowId.startsWith(prefix) || !execution.closeTime) continue;
        lastClose = Math.max(lastClose, execution.closeTime.getTime());
        latencies.push(execution.closeTime.getTime() - execution.startTime.getTime());
      }
      return {
        n,
        completed: latencies.length,
        completedPerSecond: ratePerSecond(latencies.length, lastClose - firstStart),
        startsPerSecond: ratePerSecond(n, startsDone - firstStart),
        latencyMs: summarize(latencies),
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`engine limit: only ${completed} of ${n} empty workflows completed before the deadline`);
}

export interface DeliveryStageResult {
  n: number;
  /** Verified deliveries per second, first start call (or send) to last receipt. */
  deliveredPerSecond: number;
  /** Start calls (or sends) per second. */
  startsPerSecond: number;
  latencyMs: LatencySummary;
  accounting: Accounting;
}

function finishStage(ctx: StageContext, events: { id: string; startedAt: number }[], startsDone: number) {
  const accounting = ctx.ledger.account();
  const latencies: number[] = [];
  let lastReceipt = 0;
  for (const event of events) {
    const receivedAt = ctx.ledger.receivedAt(event.id);
    if (receivedAt === undefined) continue;
    latencies.push(receivedAt - event.startedAt);
    lastReceipt = Math.max(lastReceipt, receivedAt);
  }
  const firstStart = events[0]?.startedAt ?? 0;
  return {
    n: events.length,
    deliveredPerSecond: ratePerSecond(accounting.delivered, lastReceipt - firstStart),
    startsPerSecond: ratePerSecond(events.length, startsDone - firstStart),
    latencyMs: summarize(latencies),
    accounting,
  };
}

/** The same N signed POSTs straight from Node with the delivery activity's HTTP client: no Temporal, no DB. */
export async function rawSendLimit(ctx: StageContext, n: number): Promise<DeliveryStageResult> {
  const http = createWebhookHttpClient({ timeoutMs: 10_000, allowPrivate: true });
  const url = new URL(ctx.receiverUrl);
  const events = Array.from({ length: n }, (_, i) => ({
    id: `bench-raw-${ctx.runId}-${i}`,
    user: randomUUID(),
    startedAt: 0,
  }));
  ctx.ledger.expect(events);
  try {
    await runPool(n, RAW_CONCURRENCY, async (i) => {
      const event = events[i]!;
      event.startedAt = wallClockMs();
      const body = JSON.stringify(fallPayload(event.user));
      const timestamp = String(Date.now());
      await http.post(
        url,
        {
          'content-type': 'application/json',
          'user-agent': 'webhook-delivery-service',
          'x-timestamp': timestamp,
          'x-signature': signPayload(ctx.secret, timestamp, body),
          'x-webhook-id': event.id,
        },
        body,
      );
    });
    const startsDone = wallClockMs();
    await ctx.ledger.settle(deadlineFor(n, 5));
    return finishStage(ctx, events, startsDone);
  } finally {
    await http.close();
  }
}

const fallPayload = (userUUID: string) => ({
  userUUID,
  reasons: ['fall'],
  happenedAt: new Date().toISOString(),
  email: 'bench@example.com',
  firstName: 'Bench',
  lastName: 'Resident',
});

function fallEvent(projectId: string, userUUID: string): WebhookEvent {
  return { projectId, webhookType: 'FALL_DETECTION', userUUID, payload: fallPayload(userUUID) };
}

function pipelineEvents(ctx: StageContext, label: string, n: number) {
  return Array.from({ length: n }, (_, i) => {
    const eventId = `bench-${ctx.runId}-${label}-${i}`;
    return { eventId, id: eventWorkflowId(eventId), user: randomUUID(), startedAt: 0 };
  });
}

/** N FALL_DETECTION events through emitWebhookEvent as fast as the client can start them. */
export async function pipelineSaturation(ctx: StageContext, n: number, label: string): Promise<DeliveryStageResult> {
  const events = pipelineEvents(ctx, label, n);
  ctx.ledger.expect(events);
  await runPool(n, START_CONCURRENCY, async (i) => {
    const event = events[i]!;
    event.startedAt = wallClockMs();
    await emitWebhookEvent(ctx.client, fallEvent(ctx.projectId, event.user), {
      eventId: event.eventId,
      taskQueue: ctx.deliveryTaskQueue,
    });
  });
  const startsDone = wallClockMs();
  await ctx.ledger.settle(deadlineFor(n));
  return finishStage(ctx, events, startsDone);
}

export interface SteadyResult extends DeliveryStageResult {
  ratePerSecond: number;
  seconds: number;
}

/** `rate` events per second for `seconds`, each started on its own schedule (open loop). */
export async function pipelineSteady(
  ctx: StageContext,
  rate: number,
  seconds: number,
  label: string,
): Promise<SteadyResult> {
  const n = Math.round(rate * seconds);
  const events = pipelineEvents(ctx, label, n);
  ctx.ledger.expect(events);
  const intervalMs = 1000 / rate;
  const t0 = wallClockMs();
  const starts: Promise<string>[] = [];
  for (let i = 0; i < n; i += 1) {
    const wait = t0 + i * intervalMs - wallClockMs();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const event = events[i]!;
    event.startedAt = wallClockMs();
    starts.push(
      emitWebhookEvent(ctx.client, fallEvent(ctx.projectId, event.user), {
        eventId: event.eventId,
        taskQueue: ctx.deliveryTaskQueue,
      }),
    );
  }
  await Promise.all(starts);
  const startsDone = wallClockMs();
  await ctx.ledger.settle(deadlineFor(n));
  return { ...finishStage(ctx, events, startsDone), ratePerSecond: rate, seconds };
}

export interface ApiResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  requests: number;
  non2xx: number;
  errors: number;
  connections: number;
  seconds: number;
  /** Responses per status code. */
  statusCodes: Record<string, number>;
}

export const apiResult = (result: autocannon.AutocannonResult, connections: number, seconds: number): ApiResult => ({
  requestsPerSecond: Math.round(result.requests.average),
  p50Ms: result.latency.p50,
  p99Ms: result.latency.p99,
  maxMs: result.latency.max,
  requests: result.requests.total,
  non2xx: result.non2xx,
  errors: result.errors + result.timeouts,
  connections,
  seconds,
  statusCodes: Object.fromEntries(
    Object.entries(result.statusCodeStats ?? {}).map(([code, stats]) => [code, stats.count]),
  ),
});

export const API_CONNECTIONS = 10;

/** GET /webhooks/project/:id under autocannon. */
export async function apiGet(apiUrl: string, token: string, projectId: string, seconds: number): Promise<ApiResult> {
  const result = await autocannon({
    url: `${apiUrl}/webhooks/project/${encodeURIComponent(projectId)}`,
    connections: API_CONNECTIONS,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
  });
  return apiResult(result, API_CONNECTIONS, seconds);
}

/**
 * POST /webhooks/register then DELETE /webhooks/project/:id, in a cycle. Each cycle takes the next project of
 * a pool larger than the number of connections, so no two connections ever hold the same project.
 */
export async function apiRegisterDeleteCycle(
  apiUrl: string,
  token: string,
  projectIds: string[],
  seconds: number,
): Promise<ApiResult> {
  if (projectIds.length <= API_CONNECTIONS) throw new Error('the project pool must outnumber the connections');
  let next = 0;
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const result = await autocannon({
    url: apiUrl,
    connections: API_CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: '/webhooks/register',
        headers,
        setupRequest(request, context) {
          const projectId = projectIds[next++ % projectIds.length]!;
          context.projectId = projectId;
          const body = JSON.stringify({
            projectId,
            url: 'https://receiver.example.com/hooks',
            types: ['FALL_DETECTION'],
          });
          return { ...request, body };
        },
      },
      {
        method: 'DELETE',
        headers: { authorization: headers.authorization },
        setupRequest(request, context) {
          return { ...request, path: `/webhooks/project/${encodeURIComponent(context.projectId as string)}` };
        },
      },
    ],
  });
  return apiResult(result, API_CONNECTIONS, seconds);
}

export interface TestRoundTripResult {
  /** Round trips measured (after `warmup` unmeasured ones). */
  n: number;
  warmup: number;
  /** POST /webhooks/test/project/:id → the outcome of the delivery, one at a time, ms. */
  latencyMs: LatencySummary;
  /** Calls that did not answer 200 with `delivered: true` and a 2xx from the receiver. */
  failures: number;
  /** Responses per HTTP status and delivered receiver status, e.g. `200/200`. */
  outcomes: Record<string, number>;
}

/**
 * The test button's round trip: POST /webhooks/test/project/:id, which starts a TEST delivery and answers with its
 * outcome, against a receiver that answers 2xx, one call at a time (a customer clicking the button).
 */
export async function apiTestRoundTrip(
  apiUrl: string,
  token: string,
  projectId: string,
  n: number,
  warmup: number,
): Promise<TestRoundTripResult> {
  const latencies: number[] = [];
  const outcomes: Record<string, number> = {};
  let failures = 0;
  for (let i = 0; i < warmup + n; i += 1) {
    const started = performance.now();
    const response = await fetch(`${apiUrl}/webhooks/test/project/${encodeURIComponent(projectId)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await response.json().catch(() => ({}))) as { delivered?: boolean; statusCode?: number };
    const elapsed = performance.now() - started;
    if (i < warmup) continue;
    latencies.push(elapsed);
    const outcome = `${response.status}/${body.statusCode ?? '-'}`;
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    const delivered = body.delivered === true && body.statusCode !== undefined && body.statusCode < 300;
    if (response.status !== 200 || !delivered) failures += 1;
  }
  return { n, warmup, latencyMs: summarize(latencies), failures, outcomes };
}

// Fault-injection harness: a real worker process, a real Temporal dev server, a real PostgreSQL and a receiver on
// 127.0.0.1 that can be taken down and brought back on the same port.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { emitWebhookEvent, eventWorkflowId } from '../../client/emit';
import { independentSignatureValid, type ReceivedRequest } from '../support/receiver';
import { fallEvent } from '../support/deliveries';

/** How long one scenario may wait for its backlog; each scenario is bounded by this and mocha's timeout. */
export const DELIVERY_WAIT_MS = 120_000;

export interface FaultReceiver {
  url: string;
  requests: ReceivedRequest[];
  /** Wait this long before answering each request (a slow receiver keeps attempts in flight). */
  delayMs: number;
  /** Requests that arrived and are still waiting for their answer. */
  inFlight(): number;
  /**
   * Holds every request unanswered until release(): a receiver the test answers at a moment it chooses, e.g. after
   * killing a sender, so no answer can race the kill (a fixed delay can end as the kill lands).
   */
  hold(): void;
  /** Answers the held requests whose sender is still connected, and answers the next ones as they come. */
  release(): void;
  /** Closes the port: connections are refused until up(). */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A receiver on a fixed 127.0.0.1 port that records every request with its raw body; https with `tls`. */
export async function startFaultReceiver(tls?: Pick<ServerOptions, 'key' | 'cert'>): Promise<FaultReceiver> {
  const requests: ReceivedRequest[] = [];
  let pending = 0;
  let held: (() => void)[] | undefined;
  let server: Server | undefined;
  let port = 0;
  const receiver = {
    delayMs: 0,
    requests,
    url: '',
    inFlight: () => pending,
    hold() {
      held ??= [];
    },
    release() {
      const answers = held ?? [];
      held = undefined;
      for (const answer of answers) answer();
    },
    async up() {
      const listener = (request: IncomingMessage, response: ServerResponse) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          pending++;
          const record = {
            method: request.method ?? '',
            path: request.url ?? '',
            headers: request.headers,
            rawBody: Buffer.concat(chunks),
            receivedAt: Date.now(),
          };
          // A sender killed while its request is held closes its end of the connection; Node's server keeps such a
          // socket half-open to write the answer anyway, so that answer would reach nobody yet look delivered.
          let cut = false;
          const markCut = () => void (cut = true);
          request.socket.once('end', markCut);
          request.socket.once('close', markCut);
          const answer = () => {
            pending--;
            request.socket.off('end', markCut);
            request.socket.off('close', markCut);
            if (cut || response.destroyed) return;
            // Recorded when answered: a request whose answer never left did not deliver anything.
            requests.push(record);
            response.end('ok');
          };
          if (held) held.push(answer);
          else setTimeout(answer, receiver.delayMs);
        });
      };
      server = tls ? createHttpsServer(tls, listener) : createServer(listener);
      const listening = server;
      await new Promise<void>((resolve) => listening.listen(port, '127.0.0.1', resolve));
      port = (listening.address() as AddressInfo).port;
      receiver.url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}/hooks/receive`;
    },
    async down() {
      const closing = server;
      server = undefined;
      if (!closing) return;
      closing.closeAllConnections();
      await new Promise<void>((resolve) => closing.close(() => resolve()));
    },
    close: () => receiver.down(),
  };
  await receiver.up();
  return receiver;
}

export interface WorkerProcess {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** The delivery worker as its own process (`worker/main.ts` from sources), as production runs it. */
export function spawnWorker(env: Record<string, string>): WorkerProcess {
  // A standalone worker runs as production unless told otherwise: these workers use development keys and http.
  return spawnProcess(process.execPath, ['--require', 'tsx/cjs', join(__dirname, '..', '..', 'worker', 'main.ts')], {
    NODE_ENV: 'development',
    ...env,
  });
}

/** `webhooks event emit`, the CLI as the monitoring system runs it, in its own process from sources. */
export function spawnEmit(
  event: { projectId: string; type: string; userUUID: string; data: object; id?: string },
  env: Record<string, string>,
): WorkerProcess {
  const cli = join(__dirname, '..', '..', 'cli', 'index.ts');
  const args = [
    'event',
    'emit',
    event.projectId,
    event.type,
    '--user',
    event.userUUID,
    '--data',
    JSON.stringify(event.data),
  ];
  return spawnProcess(
    process.execPath,
    ['--require', 'tsx/cjs', cli, ...args, ...(event.id ? ['--id', event.id] : [])],
    {
      NODE_ENV: 'development',
      ...env,
    },
  );
}

/** A service process with only this environment (and PATH, HOME), its output kept for failure messages. */
export function spawnProcess(command: string, args: string[], env: Record<string, string>): WorkerProcess {
  const lines: string[] = [];
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => lines.join('').slice(-4_000) };
}

/** Stops a worker that is still running (after a failed test), so no process outlives the suite. */
export async function killWorker(worker: WorkerProcess | undefined): Promise<void> {
  if (!worker || worker.child.exitCode !== null || worker.child.signalCode !== null) return;
  worker.child.kill('SIGKILL');
  await worker.exited;
}

/** Emits `count` FALL_DETECTION events for the project; resolves to their workflow ids (= X-Webhook-Id). */
export async function emitEvents(
  client: Client,
  projectId: string,
  count: number,
  taskQueue: string,
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const eventId = `fault-${randomUUID()}`;
    await emitWebhookEvent(client, fallEvent(projectId), { eventId, taskQueue });
    ids.push(eventWorkflowId(eventId));
  }
  return ids;
}

/** Resolves once every id has arrived at least once, or fails naming the missing ones. */
export async function untilDelivered(
  receiver: FaultReceiver,
  ids: string[],
  timeoutMs = DELIVERY_WAIT_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = new Set(receiver.requests.map((r) => r.headers['x-webhook-id']));
    const missing = ids.filter((id) => !seen.has(id));
    if (missing.length === 0) return;
    if (Date.now() > deadline)
      assert.fail(`${missing.length} of ${ids.length} events never arrived: ${missing.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export interface DeliveryFigures {
  emitted: number;
  delivered: number;
  duplicates: number;
  lost: number;
}

/**
 * Every emitted event arrived exactly once (an attempt cut off by the fault is not recorded: the receiver never
 * answered it), each with one X-Webhook-Id and a valid signature, and nothing else arrived. Returns the figures
 * the README's Reliability section reports.
 */
export function assertAllDelivered(receiver: FaultReceiver, ids: string[], secret: string): DeliveryFigures {
  const emitted = new Set(ids);
  for (const request of receiver.requests) {
    const id = request.headers['x-webhook-id'];
    assert.equal(typeof id, 'string', 'every request carries one X-Webhook-Id');
    assert.ok(emitted.has(id as string), `an event nobody emitted arrived: ${String(id)}`);
    assert.ok(independentSignatureValid(secret, request), `the signature of ${String(id)} is valid`);
  }
  const counts = copiesById(receiver);
  const lost = ids.filter((id) => !counts.has(id)).length;
  assert.equal(lost, 0, 'no event is lost');
  const delivered = counts.size;
  const duplicates = receiver.requests.length - delivered;
  // Each doubled event with when its copies arrived (ms after the first request) and the timestamps they were signed
  // with: the gap tells a retry after a timeout (the attempt's or a workflow task's) from an answer sent again.
  const start = Math.min(...receiver.requests.map((r) => r.receivedAt));
  const doubled = doubledIds(receiver).map((id) => {
    const copies = receiver.requests.filter((r) => r.headers['x-webhook-id'] === id);
    const when = copies.map((r) => `+${r.receivedAt - start} ms signed ${String(r.headers['x-timestamp'])}`);
    return `${id} ×${copies.length} (${when.join('; ')})`;
  });
  assert.equal(duplicates, 0, `no event is answered twice: ${doubled.join(', ')}`);
  return { emitted: ids.length, delivered, duplicates, lost };
}

/** How many times the receiver answered each X-Webhook-Id. */
function copiesById(receiver: FaultReceiver): Map<string, number> {
  const counts = new Map<string, number>();
  for (const request of receiver.requests) {
    const id = String(request.headers['x-webhook-id']);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** The X-Webhook-Ids the receiver answered more than once. */
export function doubledIds(receiver: FaultReceiver): string[] {
  return [...copiesById(receiver)].filter(([, times]) => times > 1).map(([id]) => id);
}

/** One line per scenario, for the Reliability section (read from the test output). */
export function reportFigures(scenario: string, figures: DeliveryFigures & { recoverMs?: number }): void {
  process.stdout.write(`      fault figures: ${scenario}: ${JSON.stringify(figures)}\n`);
}

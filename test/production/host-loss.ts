// Falls and vital signs flowing at a steady rate while the test takes a Temporal host away, and what the receiver saw:
// how long deliveries paused after the loss, and how late the falls emitted during it arrived.
import { randomUUID } from 'node:crypto';
import { WebhookEventAlreadyEmittedError, eventWorkflowId } from '../../client/emit';
import type { SubscribableType } from '../../common/contract';
import type { FaultReceiver } from '../faults/support';

export interface EmittedEvent {
  workflowId: string;
  type: SubscribableType;
  /** When the monitoring system first tried to emit it (ms since the epoch). */
  at: number;
}

export interface EventFlow {
  emitted: EmittedEvent[];
  /** Emits still being tried when asked to stop (a frontend lost mid-call): retried until they are accepted. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Emits `perSecond` events, every other one a fall, each tried again with its own event id until the frontend
 * accepts it (an emit cut off with its frontend may have started the delivery: the retry then finds it emitted).
 */
export function startEventFlow(
  emit: (type: SubscribableType, eventId: string) => Promise<unknown>,
  perSecond: number,
): EventFlow {
  const emitted: EmittedEvent[] = [];
  const pending = new Set<Promise<void>>();
  let count = 0;
  const emitOne = async (type: SubscribableType) => {
    const eventId = `loss-${randomUUID()}`;
    const event = { workflowId: eventWorkflowId(eventId), type, at: Date.now() };
    for (let tries = 1; ; tries += 1) {
      try {
        await emit(type, eventId);
        break;
      } catch (error) {
        if (error instanceof WebhookEventAlreadyEmittedError) break;
        if (tries >= 300) throw error;
        await sleep(200);
      }
    }
    emitted.push(event);
  };
  const timer = setInterval(() => {
    count += 1;
    const emitting = emitOne(count % 2 ? 'FALL_DETECTION' : 'VITAL_THRESHOLD');
    pending.add(emitting);
    void emitting.finally(() => pending.delete(emitting)).catch(() => undefined);
  }, 1000 / perSecond);
  return {
    emitted,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
    },
  };
}

export interface LossFigures {
  events: number;
  /** The longest pause in receipts from the kill until the host was back: the kill to the next receipt at least. */
  recoveryMs: number;
  /** Falls emitted while the host was down: p99 of emit to receipt. */
  fallsDuringLoss: number;
  fallsP99DuringLossMs: number;
  /** The same before the kill, for comparison. */
  fallsP99BeforeMs: number;
  /** The slowest event (fall or vital) emitted while the host was down: a lost history host's shards wait for the move. */
  slowestDuringLossMs: number;
}

/** p99 by nearest rank. */
const p99 = (values: number[]): number => {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]!;
};

export function lossFigures(
  receiver: FaultReceiver,
  emitted: EmittedEvent[],
  killedAt: number,
  backAt: number,
): LossFigures {
  const receipts = receiver.requests.map((request) => request.receivedAt).sort((a, b) => a - b);
  let recoveryMs = 0;
  let previous = killedAt;
  for (const at of receipts) {
    if (at <= killedAt) continue;
    recoveryMs = Math.max(recoveryMs, at - previous);
    previous = at;
    if (at > backAt) break;
  }
  const arrived = new Map<string, number>();
  for (const request of receiver.requests) {
    const id = String(request.headers['x-webhook-id']);
    arrived.set(id, Math.min(arrived.get(id) ?? Infinity, request.receivedAt));
  }
  const latencies = (from: number, to: number, types: SubscribableType[] = ['FALL_DETECTION']) =>
    emitted
      .filter((event) => types.includes(event.type) && event.at >= from && event.at < to)
      .map((event) => arrived.get(event.workflowId)! - event.at);
  const during = latencies(killedAt, backAt);
  return {
    events: emitted.length,
    recoveryMs,
    fallsDuringLoss: during.length,
    fallsP99DuringLossMs: p99(during),
    fallsP99BeforeMs: p99(latencies(0, killedAt)),
    slowestDuringLossMs: Math.max(...latencies(killedAt, backAt, ['FALL_DETECTION', 'VITAL_THRESHOLD'])),
  };
}

/** The figures as a small table, one row per lost host, for docs/operators.md. */
export function lossTable(rows: Record<string, LossFigures & { rejoinedMs: number }>): string {
  const header = [
    'host lost',
    'events',
    'deliveries again after',
    'falls p99 during loss',
    'falls p99 before',
    'slowest during loss',
    'rejoined after restart',
  ];
  const lines = Object.entries(rows).map(([host, f]) => [
    host,
    String(f.events),
    `${(f.recoveryMs / 1000).toFixed(1)} s`,
    `${(f.fallsP99DuringLossMs / 1000).toFixed(1)} s (${f.fallsDuringLoss} falls)`,
    `${(f.fallsP99BeforeMs / 1000).toFixed(1)} s`,
    `${(f.slowestDuringLossMs / 1000).toFixed(1)} s`,
    `${(f.rejoinedMs / 1000).toFixed(1)} s`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)));
  const format = (cells: string[]) => `      | ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`;
  return [format(header), format(widths.map((w) => '-'.repeat(w))), ...lines.map(format)].join('\n') + '\n';
}

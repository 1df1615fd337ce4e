import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { RESUME_DELIVERY_SIGNAL } from '../common/contract';
import type { Logger } from '../common/logger';
import { addBreakerWaiter, takeWaitersToWake, type Db } from '../db';

export interface BreakerResumerOptions {
  namespace: string;
  /** Waiters woken per registration per second once its breaker has closed. */
  ratePerSecond: number;
  /** How long a woken probe may take to start before another waiter is woken to probe instead. */
  probeLeaseMs: number;
  intervalMs?: number;
}

/**
 * Wakes deliveries waiting for an open circuit breaker, every second: one waiter to probe once a breaker is
 * half-open, and all of them at `ratePerSecond` per registration once it has closed. Waiting deliveries cost nothing
 * meanwhile, whatever the backlog. Every worker may run it: each takes disjoint waiters. Returns the stop.
 */
export function startBreakerResumer(
  db: Db,
  connection: NativeConnection,
  options: BreakerResumerOptions,
  logger: Logger,
): () => Promise<void> {
  const client = new Client({ connection, namespace: options.namespace });
  let running: Promise<void> | undefined;
  const tick = async () => {
    const waiters = await takeWaitersToWake(db, options.ratePerSecond, options.probeLeaseMs);
    // Every signal settles before the next round, so two rounds never wake the same waiter twice.
    const outcomes = await Promise.allSettled(
      waiters.map(async (waiter) => {
        try {
          await client.workflow.getHandle(waiter.workflowId).signal(RESUME_DELIVERY_SIGNAL, waiter.waitToken);
        } catch (error) {
          // Ended meanwhile (its safety timer woke it, or it gave up): nothing to wake.
          if (error instanceof WorkflowNotFoundError) return;
          // Temporal unreachable: listed again for the next round.
          await addBreakerWaiter(db, waiter.registrationId, waiter.workflowId, waiter.waitToken);
          throw error;
        }
      }),
    );
    const failed = outcomes.filter((outcome) => outcome.status === 'rejected');
    if (waiters.length > failed.length)
      logger.debug({ woken: waiters.length - failed.length }, 'deliveries waiting for a breaker woken');
    if (failed.length > 0) throw (failed[0] as PromiseRejectedResult).reason;
  };
  const timer = setInterval(() => {
    if (running) return;
    running = tick()
      .catch((error: unknown) => logger.warn({ err: error }, 'could not wake deliveries waiting for a breaker'))
      .finally(() => (running = undefined));
  }, options.intervalMs ?? 1_000);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

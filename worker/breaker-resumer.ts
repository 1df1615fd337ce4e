import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { NativeConnection } from '@temporalio/worker';
import { RESUME_DELIVERY_SIGNAL, type ResumeDeliverySignal } from '../common/contract';
import type { Logger } from '../common/telemetry/logger';
import { forgetWokenWaiters, takeWaitersToWake, type BreakerWaiter, type Db } from '../db';

export interface BreakerResumerOptions {
  namespace: string;
  /** The worker's (encryptedDataConverter): a production worker ignores a signal not encrypted with its key. */
  dataConverter: DataConverter;
  /** Waiters woken per registration per second once its breaker has closed, across all workers. */
  ratePerSecond: number;
  /** How long a woken probe may take to start before another waiter is woken to probe instead. */
  probeLeaseMs: number;
  /** How long waiters whose signal failed (Temporal unreachable, this worker killed) stay taken: 10 s by default. */
  wakeLeaseMs?: number;
  intervalMs?: number;
}

/**
 * Wakes deliveries waiting for an open circuit breaker, every second: one waiter to probe once a breaker is
 * half-open, and all of them at `ratePerSecond` per registration once it has closed, falls first (a round wakes one
 * priority key, and vitals only once the falls' attempts have ended: takeWaitersToWake). Waiting deliveries cost
 * nothing meanwhile, whatever the backlog. Every worker may run it: each takes disjoint waiters, and a waiter leaves
 * the list only once its signal went through, so one that a dead or cut-off worker took is woken by the next round
 * after the lease. Returns the stop.
 */
export function startBreakerResumer(
  db: Db,
  connection: NativeConnection,
  options: BreakerResumerOptions,
  logger: Logger,
): () => Promise<void> {
  const client = new Client({ connection, namespace: options.namespace, dataConverter: options.dataConverter });
  let running: Promise<void> | undefined;
  const tick = async () => {
    const waiters = await takeWaitersToWake(db, {
      perSecond: options.ratePerSecond,
      probeLeaseMs: options.probeLeaseMs,
      wakeLeaseMs: options.wakeLeaseMs ?? 10_000,
    });
    const woken: BreakerWaiter[] = [];
    const ended: BreakerWaiter[] = [];
    const failed: unknown[] = [];
    // Every signal settles before the next round, so two rounds never wake the same waiter twice.
    await Promise.all(
      waiters.map(async (waiter) => {
        try {
          await client.workflow.getHandle(waiter.workflowId).signal(RESUME_DELIVERY_SIGNAL, {
            workflowId: waiter.workflowId,
            waitToken: waiter.waitToken,
          } satisfies ResumeDeliverySignal);
          woken.push(waiter);
        } catch (error) {
          // Ended meanwhile (its safety timer woke it, or it gave up): nothing to wake.
          if (error instanceof WorkflowNotFoundError) ended.push(waiter);
          // Temporal unreachable: the waiter stays listed, taken again after the lease.
          else failed.push(error);
        }
      }),
    );
    await forgetWokenWaiters(db, woken, ended);
    if (woken.length > 0) logger.debug({ woken: woken.length }, 'deliveries waiting for a breaker woken');
    if (failed.length > 0) throw failed[0];
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

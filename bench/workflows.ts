// The engine-limit workflow: no activities, no timers, a single workflow task. Run only by bench/empty-worker.ts.

export function benchEmpty(): Promise<void> {
  return Promise.resolve();
}

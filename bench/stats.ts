// Latency percentiles and rates, computed the same way for every stage.

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

const round1 = (value: number) => Math.round(value * 10) / 10;

/** Percentiles of latencies in ms, rounded to 0.1 ms. */
export function summarize(latenciesMs: readonly number[]): LatencySummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  const sum = sorted.reduce((total, value) => total + value, 0);
  return {
    count: sorted.length,
    p50: round1(percentile(sorted, 50)),
    p95: round1(percentile(sorted, 95)),
    p99: round1(percentile(sorted, 99)),
    max: round1(sorted.at(-1) ?? Number.NaN),
    mean: round1(sorted.length ? sum / sorted.length : Number.NaN),
  };
}

/** Events per second over a span in ms, rounded to 0.1. */
export const ratePerSecond = (count: number, spanMs: number): number =>
  spanMs > 0 ? round1((count * 1000) / spanMs) : Number.NaN;

/** Wall-clock time in ms with sub-ms resolution, comparable across processes on one machine. */
export const wallClockMs = (): number => performance.timeOrigin + performance.now();

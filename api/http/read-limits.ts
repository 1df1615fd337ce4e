import { SendRateLimitedError } from './send-limits';

/**
 * How often a project's delivery log and health may be read, through a member's token or a portal link: a token
 * bucket per project holding one second's worth of reads, refilled at `perSecond`.
 *
 * Held in each API process, not in PostgreSQL like the send limits: what it protects is the process's own pool of
 * database connections, and a limit that needed a statement (and a row lock) per read would spend that pool on the
 * very reads it refuses. N API processes admit up to N times the rate in all.
 */
export interface ReadLimits {
  /** READ_CALLS_PER_SECOND (default 10). */
  perSecond: number;
  /** Milliseconds since some fixed time; replaces the process's clock (tests move time with it). */
  clock?: () => number;
}

export const DEFAULT_READ_LIMITS: ReadLimits = { perSecond: 10 };

/** Counts one read of the project's log, or throws a 429 with Retry-After. */
export type ReadLimiter = (projectId: string) => void;

/** Keys whose buckets are kept before full ones (as good as none) are dropped. */
const SWEEP_ABOVE = 10_000;

/**
 * Token buckets by key, each holding up to `capacity` tokens and refilled at `perSecond`: take() spends one, and
 * waitMs() tells without spending whether one is there (undefined) or how long until one is.
 */
export function createTokenBuckets(capacity: number, perSecond: number, clock: () => number = () => performance.now()) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const refilled = (bucket: { tokens: number; at: number }, now: number) =>
    Math.min(capacity, bucket.tokens + ((now - bucket.at) * perSecond) / 1000);
  const tokensOf = (key: string, now: number) => {
    const bucket = buckets.get(key);
    return bucket ? refilled(bucket, now) : capacity;
  };
  const waitMs = (tokens: number) => (tokens < 1 ? ((1 - tokens) * 1000) / perSecond : undefined);
  return {
    waitMs: (key: string): number | undefined => waitMs(tokensOf(key, clock())),
    /** Spends a token, or answers how long until one is there (and spends nothing). */
    take(key: string): number | undefined {
      const now = clock();
      if (buckets.size > SWEEP_ABOVE)
        for (const [id, bucket] of buckets) if (refilled(bucket, now) >= capacity) buckets.delete(id);
      const tokens = tokensOf(key, now);
      if (tokens < 1) return waitMs(tokens);
      buckets.set(key, { tokens: tokens - 1, at: now });
      return undefined;
    },
  };
}

export function createReadLimiter(limits: ReadLimits = DEFAULT_READ_LIMITS): ReadLimiter {
  const { perSecond } = limits;
  const buckets = createTokenBuckets(perSecond, perSecond, limits.clock);
  return (projectId) => {
    const waitMs = buckets.take(projectId);
    if (waitMs !== undefined)
      throw new SendRateLimitedError(
        `At most ${perSecond} reads a second per project: project ${projectId} reached the limit`,
        waitMs,
      );
  };
}

import { policyDelay, type RetrySchedule } from '../../common/contract';

// RFC 9110 §5.6.7 HTTP-date: IMF-fixdate, then the obsolete RFC 850 and asctime forms recipients must accept.
const HTTP_DATE =
  /^(?:[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})$/;

/**
 * A receiver's Retry-After (delta-seconds or HTTP-date) as a positive delay in ms, or undefined when it asks for
 * no wait at all: zero, negative, fractional, unparseable and past values all count as absent.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  const trimmed = value?.trim();
  if (!trimmed) return undefined;
  let ms: number;
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000;
  else if (HTTP_DATE.test(trimmed)) ms = Date.parse(trimmed) - now;
  else return undefined;
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/**
 * The `nextRetryDelay` to hand Temporal after `attempt` failed: Retry-After is a floor above the policy's own
 * backoff, never an accelerator, and never beyond the maximum interval. Undefined leaves the policy in charge, so
 * a delay of zero or less is never handed over (the server would treat it as the end of the retries).
 */
export function nextRetryDelay(
  schedule: RetrySchedule,
  attempt: number,
  retryAfterMs: number | undefined,
): number | undefined {
  if (retryAfterMs === undefined) return undefined;
  const floor = policyDelay(schedule, attempt);
  const capped = Math.min(retryAfterMs, schedule.maximumIntervalMs);
  return capped > floor ? Math.ceil(capped) : undefined;
}

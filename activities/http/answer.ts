import { policyDelay, type RetrySchedule } from '../../common/contract';
import { nextRetryDelay, parseRetryAfter } from './retry-after';

/**
 * What a receiver's status asks of the service, decided once for the attempt, the endpoint and the workflow:
 * - `delivered`: 2xx.
 * - `gone`: 410 (Standard Webhooks: the endpoint is gone): no retry; the registration's deliveries are held until a
 *   member resumes.
 * - `slow-down`: 429, 502, 503 and 504 (too many requests, a gateway's failure or timeout, overloaded): retried no sooner
 *   than `retryDelayMs` (Retry-After as a floor above the schedule's interval, when longer; undefined leaves the
 *   schedule in charge), and the endpoint's other deliveries wait `slowForMs`, the longer of the two.
 * - `failed`: any other status (500 and 3xx included): retried on the schedule, as before.
 */
export type ReceiverAnswer =
  | { kind: 'delivered' }
  | { kind: 'gone' }
  | { kind: 'slow-down'; retryDelayMs: number | undefined; slowForMs: number }
  | { kind: 'failed' };

/** The statuses that slow the whole endpoint down, not only the delivery that got one. */
export const SLOW_DOWN_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

export const GONE_STATUS = 410;

/** The answer to attempt number `attempt` (1-based) of a delivery, read at `now`. */
export function classifyStatus(
  statusCode: number,
  retryAfter: string | undefined,
  schedule: RetrySchedule,
  attempt: number,
  now: number,
): ReceiverAnswer {
  if (statusCode >= 200 && statusCode < 300) return { kind: 'delivered' };
  if (statusCode === GONE_STATUS) return { kind: 'gone' };
  if (!SLOW_DOWN_STATUSES.has(statusCode)) return { kind: 'failed' };
  const retryDelayMs = nextRetryDelay(schedule, attempt, parseRetryAfter(retryAfter, now));
  return { kind: 'slow-down', retryDelayMs, slowForMs: retryDelayMs ?? policyDelay(schedule, attempt) };
}

// The retry schedule of one delivery, shared by the workflow (which hands Temporal its policy) and the attempt
// (which sets a receiver's Retry-After against it). Sandbox-safe.

/** The retry schedule an attempt runs under, in ms (worker config: DELIVERY_*). */
export interface RetrySchedule {
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
}

/** The wait the policy itself puts after `attempt` (1-based) of a delivery: initial × coefficient^(attempt−1), capped. */
export function policyDelay(schedule: RetrySchedule, attempt: number): number {
  const raw = schedule.initialIntervalMs * schedule.backoffCoefficient ** Math.max(0, attempt - 1);
  return Math.min(raw, schedule.maximumIntervalMs);
}

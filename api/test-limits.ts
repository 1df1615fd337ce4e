import { ApiError } from './errors';
import type { SendTestEvent } from './test-event';

/** How often a project may send TEST events: one in flight, and at most `perMinute` in any 60 s. */
export interface TestEventLimits {
  /** TEST_EVENTS_PER_MINUTE (default 10). */
  perMinute: number;
  /** TEST_DELIVERY_WAIT_MS: a test in flight has its outcome by then, so that is when to try again. */
  waitMs: number;
}

export const DEFAULT_TEST_EVENT_LIMITS: TestEventLimits = { perMinute: 10, waitMs: 15_000 };

const WINDOW_MS = 60_000;

/** 429 with Retry-After (whole seconds): the project sends tests too often. */
export class TestEventRateLimitedError extends ApiError {
  constructor(detail: string, retryAfterS: number) {
    super(429, detail);
    this.headers = { 'Retry-After': String(retryAfterS) };
  }
}

/**
 * Wraps the test sender so the test endpoint cannot be used to hold the workers' slots: per project at most one TEST
 * event in flight and `perMinute` in a sliding minute, else a 429 naming the limit. Kept in this API process
 * (the compose stack runs one API; several would each allow the limit).
 */
export function limitTestEvents(
  send: SendTestEvent,
  limits: TestEventLimits = DEFAULT_TEST_EVENT_LIMITS,
  now: () => number = Date.now,
): SendTestEvent {
  const inFlight = new Set<string>();
  const sentAt = new Map<string, number[]>();
  return async (projectId) => {
    if (inFlight.has(projectId))
      throw new TestEventRateLimitedError(
        `A test event for project ${projectId} is already in flight: one at a time per project`,
        Math.ceil(limits.waitMs / 1000),
      );
    const at = now();
    const recent = (sentAt.get(projectId) ?? []).filter((t) => t > at - WINDOW_MS);
    const [oldest] = recent;
    if (recent.length >= limits.perMinute && oldest !== undefined)
      throw new TestEventRateLimitedError(
        `At most ${limits.perMinute} test events a minute per project: project ${projectId} reached the limit`,
        Math.max(1, Math.ceil((oldest + WINDOW_MS - at) / 1000)),
      );
    recent.push(at);
    sentAt.set(projectId, recent);
    inFlight.add(projectId);
    try {
      return await send(projectId);
    } finally {
      inFlight.delete(projectId);
      // Projects that stop testing do not keep an entry.
      if ((sentAt.get(projectId) ?? []).every((t) => t <= now() - WINDOW_MS)) sentAt.delete(projectId);
    }
  };
}

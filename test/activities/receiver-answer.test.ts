import assert from 'node:assert/strict';
import { classifyStatus } from '../../activities/http/answer';
import { heldWaitMs, pausedDeferral } from '../../activities/endpoint/pause';
import { slowedDeferral } from '../../activities/endpoint/slow-down';
import { DELIVERY_DEFERRED, type RetrySchedule } from '../../common/contract';

describe('what a receiver’s status asks of the service (activities/http/answer.ts)', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const schedule: RetrySchedule = { initialIntervalMs: 1_000, backoffCoefficient: 2, maximumIntervalMs: 60_000 };
  const answer = (status: number, retryAfter?: string, attempt = 1) =>
    classifyStatus(status, retryAfter, schedule, attempt, now);

  it('2xx is delivered, whatever Retry-After says', () => {
    for (const status of [200, 201, 202, 204, 299]) assert.deepEqual(answer(status, '30'), { kind: 'delivered' });
  });

  it('410 Gone ends the retries and holds the endpoint: not a plain failure, not a slow-down', () => {
    assert.deepEqual(answer(410), { kind: 'gone' });
    assert.deepEqual(answer(410, '30', 7), { kind: 'gone' }, 'Retry-After does not make it a slow-down');
  });

  it('429, 502, 503 and 504 slow the endpoint down for the longer of Retry-After and the schedule’s next interval', () => {
    for (const status of [429, 502, 503, 504]) {
      // Retry-After above the schedule's interval: the delivery's retry and the endpoint both wait for it.
      assert.deepEqual(answer(status, '3'), { kind: 'slow-down', retryDelayMs: 3_000, slowForMs: 3_000 }, `${status}`);
      // An HTTP-date is read against `now`.
      assert.deepEqual(answer(status, 'Thu, 01 Jan 2026 00:00:05 GMT'), {
        kind: 'slow-down',
        retryDelayMs: 5_000,
        slowForMs: 5_000,
      });
      // Without one, or with one below the schedule: the schedule's own interval for this attempt (no override).
      assert.deepEqual(answer(status), { kind: 'slow-down', retryDelayMs: undefined, slowForMs: 1_000 });
      assert.deepEqual(answer(status, '1', 3), { kind: 'slow-down', retryDelayMs: undefined, slowForMs: 4_000 });
      // Never beyond the schedule's maximum interval.
      assert.deepEqual(answer(status, '86400'), { kind: 'slow-down', retryDelayMs: 60_000, slowForMs: 60_000 });
    }
  });

  it('every other status is a plain failure, retried on the schedule: 500 behaves as before', () => {
    for (const status of [500, 501, 505, 400, 401, 403, 404, 408, 409, 411, 301, 302, 399, 100])
      assert.deepEqual(answer(status, '30'), { kind: 'failed' }, `${status}`);
  });

  it('a 410’s hold has no end: its wait is the margin alone, and its deferral names the status for a later give-up', () => {
    assert.equal(heldWaitMs(null, 5_000, 43_200_000), 43_200_001);
    assert.equal(heldWaitMs(null, 5_000, 0), 1);
    const failure = pausedDeferral(3, 1_000, 410);
    assert.deepEqual([failure.type, failure.nonRetryable], [DELIVERY_DEFERRED, true]);
    const message = 'Receiver answered HTTP 410 Gone: deliveries held until a member resumes the webhook';
    assert.equal(failure.message, message);
    assert.deepEqual(failure.details, [
      { reason: 'paused', waitMs: 1_000, attempt: 3, lastError: message, statusCode: 410 },
    ]);
    // A member's pause is unchanged.
    assert.deepEqual(pausedDeferral(3, 1_000).details, [{ reason: 'paused', waitMs: 1_000, attempt: 3 }]);
  });

  it('an attempt deferred by the slow-down says so, with the status that asked for it', () => {
    const failure = slowedDeferral(2, 3_000, 429);
    assert.deepEqual([failure.type, failure.nonRetryable], [DELIVERY_DEFERRED, true]);
    assert.deepEqual(failure.details, [
      {
        reason: 'slowed-down',
        waitMs: 3_000,
        attempt: 2,
        lastError: 'Receiver answered HTTP 429: its deliveries wait',
        statusCode: 429,
      },
    ]);
  });
});

import assert from 'node:assert/strict';
import { nextRetryDelay, parseRetryAfter } from '../../activities/http/retry-after';
import { policyDelay, type RetrySchedule } from '../../common/contract';

describe('Retry-After is a floor above the retry policy, never an accelerator', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const schedule: RetrySchedule = { initialIntervalMs: 1_000, backoffCoefficient: 2, maximumIntervalMs: 600_000 };

  it('reads delta-seconds and the three HTTP-date forms as a positive delay', () => {
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter(' 5 ', now), 5_000);
    assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Thursday, 01-Jan-26 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Thu Jan  1 00:00:30 2026', now), 30_000);
  });

  it('treats zero, negative, fractional, unparseable, past and empty values as absent', () => {
    for (const value of [
      '0',
      '-1',
      '1.5',
      '0.9',
      'abc',
      '',
      '   ',
      'Wed, 31 Dec 2025 23:59:00 GMT',
      '2026-01-01',
      '1e3',
    ])
      assert.equal(parseRetryAfter(value, now), undefined, `Retry-After: ${JSON.stringify(value)}`);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });

  it('gives the policy backoff per attempt, capped at the maximum interval', () => {
    assert.deepEqual(
      [1, 2, 3, 10, 11, 40].map((attempt) => policyDelay(schedule, attempt)),
      [1_000, 2_000, 4_000, 512_000, 600_000, 600_000],
    );
  });

  it('hands Temporal a delay only when Retry-After asks for more than the policy, and caps it', () => {
    assert.equal(nextRetryDelay(schedule, 1, undefined), undefined);
    assert.equal(nextRetryDelay(schedule, 1, 500), undefined, 'shorter than the backoff: the policy applies');
    assert.equal(nextRetryDelay(schedule, 3, 4_000), undefined, 'equal to the backoff: the policy applies');
    assert.equal(nextRetryDelay(schedule, 3, 30_000), 30_000);
    assert.equal(nextRetryDelay(schedule, 1, 99_999_999_000), 600_000, 'a huge value is capped at the maximum');
    assert.equal(nextRetryDelay(schedule, 20, 99_999_999_000), undefined, 'at the cap the policy already waits');
  });

  it('never hands Temporal zero or less, whatever the header says', () => {
    const values = ['0', '-1', '1.5', 'abc', '', '99999999999', 'Thu, 01 Jan 1970 00:00:00 GMT', '1', '600'];
    for (const value of values)
      for (const attempt of [1, 2, 5, 30]) {
        const delay = nextRetryDelay(schedule, attempt, parseRetryAfter(value, now));
        assert.ok(delay === undefined || delay >= policyDelay(schedule, attempt), `${value} at attempt ${attempt}`);
        assert.ok(delay === undefined || (delay > 0 && delay <= schedule.maximumIntervalMs));
      }
  });
});

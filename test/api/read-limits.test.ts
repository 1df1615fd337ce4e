// Token buckets by key (api/http/read-limits.ts): the read limits per project and the refused-call limits per caller.
import assert from 'node:assert/strict';
import { createReadLimiter, createTokenBuckets } from '../../api/http/read-limits';

describe('token buckets (pure): capacity, refill, and a look that spends nothing', () => {
  it('spends up to the capacity at once, then answers how long until the next token', () => {
    let now = 0;
    const buckets = createTokenBuckets(3, 0.05, () => now);
    for (let i = 0; i < 3; i += 1) assert.equal(buckets.take('a'), undefined, `token ${i + 1}`);
    assert.equal(buckets.take('a'), 20_000, 'one token every 20 s at 3 a minute');
    assert.equal(buckets.take('b'), undefined, 'another key has a bucket of its own');
    now = 5_000;
    assert.equal(buckets.waitMs('a'), 15_000);
    now = 20_000;
    assert.equal(buckets.waitMs('a'), undefined, 'refilled');
    assert.equal(buckets.take('a'), undefined);
    assert.equal(buckets.take('a'), 20_000);
  });

  it('waitMs only looks: it never spends a token', () => {
    const buckets = createTokenBuckets(1, 1, () => 0);
    for (let i = 0; i < 5; i += 1) assert.equal(buckets.waitMs('a'), undefined);
    assert.equal(buckets.take('a'), undefined);
    assert.equal(buckets.waitMs('a'), 1_000);
  });

  it('refills no further than the capacity, however long a key was idle', () => {
    let now = 0;
    const buckets = createTokenBuckets(2, 1, () => now);
    assert.equal(buckets.take('a'), undefined);
    now = 3_600_000;
    assert.equal(buckets.take('a'), undefined);
    assert.equal(buckets.take('a'), undefined);
    assert.equal(buckets.take('a'), 1_000, 'two, not thousands, after an hour');
  });

  it('drops full buckets once more than 10,000 keys are kept, and keeps the ones still spent', () => {
    let now = 0;
    const buckets = createTokenBuckets(1, 1, () => now);
    for (let i = 0; i <= 10_000; i += 1) buckets.take(`k${i}`);
    now = 500;
    // k0..k10000 are half refilled: still spent, kept (a sweep would forget they were spent).
    buckets.take('sweeper-1');
    assert.equal(buckets.take('k0'), 500);
    now = 5_000;
    buckets.take('sweeper-2');
    assert.equal(buckets.waitMs('k0'), undefined);
  });

  it('createReadLimiter: READ_CALLS_PER_SECOND a second per project, then 429 naming the project', () => {
    let now = 0;
    const limiter = createReadLimiter({ perSecond: 2, clock: () => now });
    limiter('p1');
    limiter('p1');
    assert.throws(
      () => limiter('p1'),
      (error: { status: number; detail: string; headers: Record<string, string> }) =>
        error.status === 429 &&
        error.detail === 'At most 2 reads a second per project: project p1 reached the limit' &&
        error.headers['Retry-After'] === '1',
    );
    limiter('p2');
    now = 500;
    limiter('p1');
  });
});

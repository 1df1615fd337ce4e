import assert from 'node:assert/strict';
import { decideSend, type SendLimitRule } from '../db/send-limits';

/** The sliding window and the in-flight lease as a pure decision (the database only locks and stores). */
describe('send limits: the decision', () => {
  const t0 = Date.parse('2026-11-24T00:00:00Z');
  const at = (ms: number) => new Date(t0 + ms);
  const perMinute: SendLimitRule = { perWindow: 3, windowMs: 60_000 };
  const withSlot: SendLimitRule = { ...perMinute, leaseMs: 16_000 };

  it('admits while fewer than perWindow sends fall in the window, and keeps only those with the new one', () => {
    const decision = decideSend({ sentAt: [at(-60_000), at(-30_000), at(-1)], leaseUntil: null }, perMinute, at(0));
    assert.deepEqual(decision, { admitted: true, sentAt: [at(-30_000), at(-1), at(0)] });
  });

  it('refuses a full window until its oldest send is windowMs old, to the millisecond', () => {
    const state = { sentAt: [at(0), at(10_000), at(20_000)], leaseUntil: null };
    assert.deepEqual(decideSend(state, perMinute, at(30_000)), {
      admitted: false,
      limit: 'rate',
      retryAfterMs: 30_000,
    });
    assert.deepEqual(decideSend(state, perMinute, at(59_999)), { admitted: false, limit: 'rate', retryAfterMs: 1 });
    assert.deepEqual(decideSend(state, perMinute, at(60_000)), {
      admitted: true,
      sentAt: [at(10_000), at(20_000), at(60_000)],
    });
  });

  it('after perWindow was lowered, waits until enough sends have left the window, in any stored order', () => {
    const state = { sentAt: [at(20_000), at(0), at(30_000), at(10_000)], leaseUntil: null };
    const two: SendLimitRule = { perWindow: 2, windowMs: 60_000 };
    // Four in the window, room for two: the third oldest (20 s) must leave.
    assert.deepEqual(decideSend(state, two, at(40_000)), { admitted: false, limit: 'rate', retryAfterMs: 40_000 });
  });

  it('refuses while an unexpired lease holds the slot, before counting; an expired or released one does not', () => {
    assert.deepEqual(decideSend({ sentAt: [], leaseUntil: at(16_000) }, withSlot, at(0)), {
      admitted: false,
      limit: 'in-flight',
      retryAfterMs: 16_000,
    });
    const full = { sentAt: [at(-3), at(-2), at(-1)], leaseUntil: at(5) };
    assert.deepEqual(decideSend(full, withSlot, at(0)), { admitted: false, limit: 'in-flight', retryAfterMs: 5 });
    assert.equal(decideSend({ sentAt: [], leaseUntil: at(16_000) }, withSlot, at(16_000)).admitted, true);
    assert.equal(decideSend({ sentAt: [], leaseUntil: null }, withSlot, at(0)).admitted, true);
    // A rule without a slot ignores a lease left in the row.
    assert.equal(decideSend({ sentAt: [], leaseUntil: at(16_000) }, perMinute, at(0)).admitted, true);
  });
});

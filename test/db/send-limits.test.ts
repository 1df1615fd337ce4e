import assert from 'node:assert/strict';
import knex, { type Knex } from 'knex';
import { addProject } from '../../db';
import { admitSend, decideSend, extendSendSlot, type SendLimitRule } from '../../db/send-limits';
import { newProjectId } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

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

/** The limits on a database whose clock is an hour ahead of this process's: every time is the database's. */
describe('send limits: on the database’s clock, not the process’s', () => {
  let t: TestDatabase;
  let skewed: Knex;
  before(async () => {
    t = await createTestDatabase();
    // now() in this pool's statements resolves to skew.now(), an hour ahead (pg_catalog listed after skew).
    await t.db.raw(`CREATE SCHEMA skew;
      CREATE FUNCTION skew.now() RETURNS timestamptz LANGUAGE sql STABLE AS $$ SELECT pg_catalog.now() + interval '1 hour' $$`);
    skewed = knex({ client: 'pg', connection: t.url, searchPath: ['skew', 'pg_catalog', 'public'], pool: { max: 2 } });
  });
  after(async () => {
    await skewed?.destroy();
    await t?.destroy();
  });

  const secondsFromDbNow = async (column: string, projectId: string, kind: string) => {
    const { rows } = await skewed.raw<{ rows: { s: number }[] }>(
      `SELECT extract(epoch FROM ${column} - now())::float AS s FROM webhook_send_limits WHERE project_id = ? AND kind = ?`,
      [projectId, kind],
    );
    return rows[0]!.s;
  };

  it('stamps sends and leases with the database’s now(), and a lease kept for 0 ms ends on that clock', async () => {
    const ahead = (await skewed.raw<{ rows: { s: number }[] }>(`SELECT extract(epoch FROM now())::float AS s`))
      .rows[0]!;
    assert.ok(Math.abs(ahead.s - Date.now() / 1000 - 3_600) < 60, 'the database runs an hour ahead');
    const projectId = newProjectId();
    await addProject(skewed, projectId);
    const rule: SendLimitRule = { perWindow: 5, windowMs: 60_000, leaseMs: 16_000 };
    const first = await admitSend(skewed, projectId, 'test', rule);
    assert.equal(first.admitted, true);
    const leaseIn = await secondsFromDbNow('lease_until', projectId, 'test');
    assert.ok(leaseIn > 14 && leaseIn <= 16, `lease ends ${leaseIn} s from the database's now`);
    const sentAgo = await secondsFromDbNow('sent_at[1]', projectId, 'test');
    assert.ok(sentAgo > -2 && sentAgo <= 0, `sent ${-sentAgo} s before the database's now`);
    if (!first.admitted) return;
    // Kept 10 s more (a recovery's starts still due): held until then, as the database tells time.
    await extendSendSlot(skewed, projectId, 'test', first.holder, 10_000);
    const keptIn = await secondsFromDbNow('lease_until', projectId, 'test');
    assert.ok(keptIn > 8 && keptIn <= 10, `kept until ${keptIn} s from the database's now`);
    const held = await admitSend(skewed, projectId, 'test', rule);
    assert.equal(held.admitted, false);
    // Kept for 0 ms (a recovery with nothing left to start) the slot is free again.
    await extendSendSlot(skewed, projectId, 'test', first.holder, 0);
    const second = await admitSend(skewed, projectId, 'test', rule);
    assert.equal(second.admitted, true, JSON.stringify(second));
  });
});

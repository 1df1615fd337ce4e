// The circuit breaker's state in PostgreSQL (db/breakers.ts): no Temporal, a scratch database of its own.
import assert from 'node:assert/strict';
import {
  addBreakerWaiter,
  admitAttempt,
  findBreaker,
  forgetWokenWaiters,
  recordFailure,
  recordSuccess,
  takeWaitersToWake,
  type BreakerThresholds,
  type WakeLimits,
} from '../db';
import { Registrations, newProjectId } from './support/deliveries';
import { createTestDatabase, type TestDatabase } from './support/postgres';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The least time between two rounds of wakes of one registration's waiters. */
const ROUND_MS = 950;

describe('circuit breaker per registration: its state in Postgres', function () {
  this.timeout(30_000);
  const fx = {} as { database: TestDatabase; registrations: Registrations };
  before(async () => {
    fx.database = await createTestDatabase();
    fx.registrations = new Registrations(fx.database.db);
  });
  after(() => fx.database?.destroy());
  const thresholds: BreakerThresholds = { failureThreshold: 3, openMs: 1_000, maxOpenMs: 3_000, probeLeaseMs: 5_000 };
  const http500 = { message: 'Receiver answered HTTP 500', statusCode: 500 };

  async function registrationId(): Promise<string> {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, 'https://receiver.example/hooks', ['FALL_DETECTION']);
    const row = await fx.database.db('webhook_registrations').where({ project_id: projectId }).first<{ id: string }>();
    return row.id;
  }

  /** Makes the open period end now, as if BREAKER_OPEN_MS had passed. */
  const endOpenPeriod = (id: string) =>
    fx.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: id })
      .update({ open_until: fx.database.db.fn.now() });

  /** The waiters a resumer's round takes now, of this registration only (other tests' waiters are taken too). */
  const takeOf = async (id: string, limits: WakeLimits) =>
    (await takeWaitersToWake(fx.database.db, limits)).filter((w) => w.registrationId === id);

  it('opens at BREAKER_FAILURE_THRESHOLD consecutive failures, not before, and refuses attempts while open', async () => {
    const id = await registrationId();
    assert.deepEqual(await admitAttempt(fx.database.db, id, 5_000), { state: 'closed', failures: 0 });
    await recordFailure(fx.database.db, id, thresholds, http500);
    const second = await recordFailure(fx.database.db, id, thresholds, http500);
    assert.equal(second.consecutiveFailures, 2);
    assert.equal(second.openUntil, null);
    assert.deepEqual(await admitAttempt(fx.database.db, id, 5_000), { state: 'closed', failures: 2 });

    const third = await recordFailure(fx.database.db, id, thresholds, http500);
    assert.ok(third.openUntil, 'open after the third failure');
    const admission = await admitAttempt(fx.database.db, id, 5_000);
    assert.equal(admission.state, 'open');
    assert.ok(
      admission.state === 'open' && admission.waitMs > 500 && admission.waitMs <= 1_000,
      JSON.stringify(admission),
    );
    assert.deepEqual(admission.state === 'open' && admission.lastFailure, http500);
  });

  it('waiters: none woken while open, one to probe once half-open (once per lease), the oldest at the rate once closed', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 5_000, wakeLeaseMs: 60_000 });
    for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
    for (let i = 1; i <= 5; i++) {
      await addBreakerWaiter(db, id, `webhook-event-waiter-${i}`, i);
      await sleep(5);
    }
    assert.deepEqual(await take(), [], 'open: nobody is woken');
    await endOpenPeriod(id);
    const probe = await take();
    assert.deepEqual(
      probe.map((w) => [w.workflowId, w.waitToken]),
      [['webhook-event-waiter-1', 1]],
      'half-open: the oldest, to probe',
    );
    await sleep(ROUND_MS);
    assert.deepEqual(await take(), [], 'not a second probe within the lease');
    await forgetWokenWaiters(db, probe);
    await recordSuccess(db, id);
    const first = await take();
    assert.deepEqual(
      first.map((w) => w.workflowId),
      ['webhook-event-waiter-2', 'webhook-event-waiter-3'],
      'closed: the oldest, at the rate',
    );
    // Two resumers (two workers) asking at once share one round.
    assert.deepEqual(await Promise.all([take(), take()]), [[], []], 'one round per second, across resumers');
    await sleep(ROUND_MS);
    const [a, b] = await Promise.all([take(), take()]);
    assert.equal(a.length + b.length, 2, 'the next round: two more, to one resumer or the other');
    await sleep(ROUND_MS);
    assert.equal((await take()).length, 0, 'every waiter woken once');
  });

  it('waiters stay listed until their signal went through: taken again after the lease, never after a new wait', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const limits = { perSecond: 10, probeLeaseMs: 5_000, wakeLeaseMs: 1_500 };
    const take = () => takeOf(id, limits);
    await recordFailure(db, id, thresholds, http500); // closed, one failure: a row to hold the rounds
    await addBreakerWaiter(db, id, 'webhook-event-signalled', 1);
    await addBreakerWaiter(db, id, 'webhook-event-lost', 1);
    await addBreakerWaiter(db, id, 'webhook-event-waits-again', 1);
    const taken = await take();
    assert.equal(taken.length, 3);
    // One signal went through; one resumer died before the other's; the third delivery waits again meanwhile.
    await addBreakerWaiter(db, id, 'webhook-event-waits-again', 2);
    await forgetWokenWaiters(
      db,
      taken.filter((w) => w.workflowId !== 'webhook-event-lost'),
    );
    await sleep(ROUND_MS);
    const again = await take();
    assert.deepEqual(
      again.map((w) => [w.workflowId, w.waitToken]).sort(),
      [['webhook-event-waits-again', 2]],
      'within the lease: only the new wait',
    );
    await forgetWokenWaiters(db, again);
    await sleep(limits.wakeLeaseMs);
    assert.deepEqual(
      (await take()).map((w) => [w.workflowId, w.waitToken]),
      [['webhook-event-lost', 1]],
      'after the lease: the one whose signal never went through',
    );
  });

  it('a probe round whose only waiter is locked (listing itself again) is not spent: the next round wakes it', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 });
    for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
    await addBreakerWaiter(db, id, 'webhook-event-relisting', 1);
    await endOpenPeriod(id);
    await db.transaction(async (trx) => {
      await trx('webhook_breaker_waiters').where({ registration_id: id }).forUpdate();
      assert.deepEqual(await take(), [], 'its row is locked: nobody to wake this round');
    });
    await sleep(ROUND_MS);
    assert.deepEqual(
      (await take()).map((w) => w.workflowId),
      ['webhook-event-relisting'],
      'the next round wakes it to probe, not a probe lease later',
    );
  });

  it("a delivery waiting for the endpoint's attempts in flight: woken once they have ended, if the breaker lets it through", async () => {
    const db = fx.database.db;
    const limits = { perSecond: 10, probeLeaseMs: 5_000, wakeLeaseMs: 60_000 };
    const [healthy, failing] = [await registrationId(), await registrationId()];
    const take = (id: string) => takeOf(id, limits);
    await addBreakerWaiter(db, healthy, 'webhook-event-busy-1', 1, 400);
    await addBreakerWaiter(db, failing, 'webhook-event-busy-2', 1, 400);
    assert.deepEqual(await take(healthy), [], 'not before the attempts in flight have ended');
    // The attempts in flight to the second endpoint fail meanwhile: its breaker opens.
    for (let i = 0; i < 3; i++) await recordFailure(db, failing, thresholds, http500);
    await sleep(Math.max(ROUND_MS, 500));
    assert.deepEqual(
      (await take(healthy)).map((w) => w.workflowId),
      ['webhook-event-busy-1'],
      'then woken (its breaker never failed)',
    );
    assert.deepEqual(await take(failing), [], 'the breaker opened meanwhile: it waits on for the probe');
  });

  it('a success in between resets the count: only consecutive failures open it', async () => {
    const id = await registrationId();
    await recordFailure(fx.database.db, id, thresholds, http500);
    await recordFailure(fx.database.db, id, thresholds, http500);
    await recordSuccess(fx.database.db, id);
    const after = await recordFailure(fx.database.db, id, thresholds, http500);
    assert.equal(after.consecutiveFailures, 1);
    assert.equal(after.openUntil, null);
  });

  it('half-open: exactly one of many concurrent attempts gets the probe; the others wait for its lease', async () => {
    const id = await registrationId();
    for (let i = 0; i < 3; i += 1) await recordFailure(fx.database.db, id, thresholds, http500);
    await endOpenPeriod(id);
    const admissions = await Promise.all(Array.from({ length: 20 }, () => admitAttempt(fx.database.db, id, 5_000)));
    assert.equal(admissions.filter((a) => a.state === 'probe').length, 1);
    for (const other of admissions.filter((a) => a.state !== 'probe')) {
      assert.equal(other.state, 'open');
      assert.ok(other.state === 'open' && other.waitMs > 4_000 && other.waitMs <= 5_000, JSON.stringify(other));
    }
  });

  it('a failed probe reopens for twice as long, capped at BREAKER_MAX_OPEN_MS; a successful one closes it', async () => {
    const id = await registrationId();
    const openFor = async () => {
      const row = await fx.database
        .db('webhook_circuit_breakers')
        .where({ registration_id: id })
        .first<{ ms: string }>(fx.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
      return Math.round(Number(row.ms));
    };
    for (let i = 0; i < 3; i += 1) await recordFailure(fx.database.db, id, thresholds, http500);
    assert.equal(await openFor(), 1_000);
    for (const expected of [2_000, 3_000, 3_000]) {
      await endOpenPeriod(id);
      assert.equal((await admitAttempt(fx.database.db, id, 5_000)).state, 'probe');
      await recordFailure(fx.database.db, id, thresholds, http500);
      assert.equal(await openFor(), expected);
    }
    await endOpenPeriod(id);
    assert.equal((await admitAttempt(fx.database.db, id, 5_000)).state, 'probe');
    await recordSuccess(fx.database.db, id);
    const closed = await findBreaker(fx.database.db, id);
    assert.deepEqual(
      { failures: closed?.consecutiveFailures, openUntil: closed?.openUntil, opens: closed?.consecutiveOpens },
      { failures: 0, openUntil: null, opens: 0 },
    );
    assert.deepEqual(await admitAttempt(fx.database.db, id, 5_000), { state: 'closed', failures: 0 });
  });

  it("a receiver's Retry-After lengthens the open period, never shortens it", async () => {
    const id = await registrationId();
    await recordFailure(fx.database.db, id, thresholds, http500, 0);
    await recordFailure(fx.database.db, id, thresholds, http500, 0);
    const opened = await recordFailure(fx.database.db, id, thresholds, http500, 2_500);
    const row = await fx.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: id })
      .first<{ ms: string }>(fx.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
    assert.ok(opened.openUntil);
    assert.equal(Math.round(Number(row.ms)), 2_500);
  });
});

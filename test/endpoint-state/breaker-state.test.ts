// The circuit breaker's state in PostgreSQL (db/endpoints/breakers.ts): no Temporal, a scratch database of its own. Periods
// and leases are minutes long and the tests move the database's timestamps instead of sleeping (a controlled clock):
// a loaded machine cannot make a window pass or close early.
import assert from 'node:assert/strict';
import {
  addBreakerWaiter,
  admitAttempt,
  findBreaker,
  forgetAttemptedWaiter,
  forgetWokenWaiters,
  listAuditEvents,
  verifyAuditChain,
  recordFailure,
  recordSuccess,
  takeWaitersToWake,
  type BreakerThresholds,
  type WakeLimits,
} from '../../db';
import { Registrations, newProjectId } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { useTestAuditTrail } from '../support/audit-keys';

describe('circuit breaker per registration: its state in Postgres', function () {
  this.timeout(30_000);
  const fx = {} as { database: TestDatabase; registrations: Registrations };
  before(async () => {
    fx.database = await createTestDatabase();
    fx.registrations = new Registrations(fx.database.db);
  });
  after(() => fx.database?.destroy());
  const thresholds: BreakerThresholds = {
    failureThreshold: 3,
    openMs: 60_000,
    maxOpenMs: 180_000,
    probeLeaseMs: 60_000,
  };
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

  /** The next round of wakes may start: as if the 0.9 s between two rounds of a registration had passed. */
  const nextRound = (id: string) =>
    fx.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: id })
      .update({ resumed_at: fx.database.db.raw(`now() - interval '1 second'`) });

  /** Moves a registration's waiters' timestamps `seconds` back, as if that much time had passed. */
  const age = (id: string, column: 'woken_at' | 'eligible_at' | 'signalled_at', seconds: number) =>
    fx.database
      .db('webhook_breaker_waiters')
      .where({ registration_id: id })
      .whereNotNull(column)
      .update({ [column]: fx.database.db.raw(`?? - make_interval(secs => ?)`, [column, seconds]) });

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
      admission.state === 'open' && admission.waitMs > 50_000 && admission.waitMs <= 60_000,
      JSON.stringify(admission),
    );
    assert.deepEqual(admission.state === 'open' && admission.lastFailure, http500);
  });

  it('waiters: none woken while open, one to probe once half-open (once per lease), the oldest at the rate once closed', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 });
    for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
    for (let i = 1; i <= 5; i++) await addBreakerWaiter(db, id, `webhook-event-waiter-${i}`, i);
    // Listed in this order (since: oldest first), a millisecond apart.
    for (let i = 1; i <= 5; i++)
      await db('webhook_breaker_waiters')
        .where({ registration_id: id, workflow_id: `webhook-event-waiter-${i}` })
        .update({ since: db.raw(`now() - make_interval(secs => ?)`, [(10 - i) / 1000]) });
    assert.deepEqual(await take(), [], 'open: nobody is woken');
    await endOpenPeriod(id);
    const probe = await take();
    assert.deepEqual(
      probe.map((w) => [w.workflowId, w.waitToken]),
      [['webhook-event-waiter-1', 1]],
      'half-open: the oldest, to probe',
    );
    await nextRound(id);
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
    await nextRound(id);
    const [a, b] = await Promise.all([take(), take()]);
    assert.equal(a.length + b.length, 2, 'the next round: two more, to one resumer or the other');
    await nextRound(id);
    assert.equal((await take()).length, 0, 'every waiter woken once');
  });

  it('a woken probe that fails reopens the breaker, and the next probe is woken when that period ends, not a lease later', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 });
    for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
    for (let i = 1; i <= 2; i++) await addBreakerWaiter(db, id, `webhook-event-probe-${i}`, i);
    await endOpenPeriod(id);
    const [woken] = await take();
    assert.equal(woken?.workflowId, 'webhook-event-probe-1');
    await forgetWokenWaiters(db, [woken]);
    // The woken delivery probes and fails: the breaker opens again.
    assert.equal((await admitAttempt(db, id, 60_000)).state, 'probe');
    assert.ok((await recordFailure(db, id, thresholds, http500)).openUntil);
    await nextRound(id);
    assert.deepEqual(await take(), [], 'open again: nobody is woken');
    await endOpenPeriod(id);
    await nextRound(id);
    assert.deepEqual(
      (await take()).map((w) => w.workflowId),
      ['webhook-event-probe-2'],
      'the next probe, within the first probe’s lease',
    );
  });

  it('waiters are woken falls first (their priority key), then oldest first, the vitals once the falls were sent', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const take = () => takeOf(id, { perSecond: 2, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 });
    // Oldest first by listing order: a vital, a vital without a key (listed before keys: a vital), then two falls.
    await addBreakerWaiter(db, id, 'webhook-event-vital', 1, 0, 3);
    await addBreakerWaiter(db, id, 'webhook-event-unkeyed', 1);
    await addBreakerWaiter(db, id, 'webhook-event-fall-1', 1, 0, 1);
    await addBreakerWaiter(db, id, 'webhook-event-fall-2', 1, 0, 3);
    await addBreakerWaiter(db, id, 'webhook-event-fall-2', 2, 0, 1);
    for (const [i, workflowId] of ['vital', 'unkeyed', 'fall-1', 'fall-2'].entries())
      await db('webhook_breaker_waiters')
        .where({ registration_id: id, workflow_id: `webhook-event-${workflowId}` })
        .update({ since: db.raw(`now() - make_interval(secs => ?)`, [(10 - i) / 1000]) });
    const rows = await db('webhook_breaker_waiters').where({ registration_id: id }).orderBy('since');
    assert.deepEqual(
      rows.map((row: { priority: number }) => row.priority),
      [3, 3, 1, 1],
    );
    const falls = await take();
    assert.deepEqual(
      falls.map((w) => w.workflowId),
      ['webhook-event-fall-1', 'webhook-event-fall-2'],
    );
    await nextRound(id);
    assert.deepEqual(await take(), [], 'the falls are being woken: the vitals wait');
    // One fall's signal went through (its attempt runs), the other's delivery had ended.
    await forgetWokenWaiters(db, [falls[0]!], [falls[1]!]);
    const kept = await db('webhook_breaker_waiters')
      .where({ registration_id: id })
      .whereNotNull('signalled_at')
      .select<{ workflow_id: string }[]>('workflow_id');
    assert.deepEqual(
      kept.map((row) => row.workflow_id),
      ['webhook-event-fall-1'],
      'the woken fall stays listed, signalled; the ended one is forgotten',
    );
    await nextRound(id);
    assert.deepEqual(await take(), [], 'a fall is still being sent: the vitals wait');
    await forgetAttemptedWaiter(db, id, 'webhook-event-fall-1', 1);
    await nextRound(id);
    assert.deepEqual(await take(), [], 'an attempt under the same wait token ends nothing');
    // The attempt after its wait (the next wait token) has ended.
    await forgetAttemptedWaiter(db, id, 'webhook-event-fall-1', 3);
    await nextRound(id);
    const vitals = await take();
    assert.deepEqual(
      vitals.map((w) => w.workflowId),
      ['webhook-event-vital', 'webhook-event-unkeyed'],
    );
    await forgetWokenWaiters(db, vitals);
    assert.equal((await db('webhook_breaker_waiters').where({ registration_id: id })).length, 0, 'nothing behind them');
  });

  it('a woken fall whose attempt never says it ended holds the vitals back for a probe and a wake lease at most', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const take = () => takeOf(id, { perSecond: 5, probeLeaseMs: 60_000, wakeLeaseMs: 30_000 });
    await addBreakerWaiter(db, id, 'webhook-event-lost-fall', 1, 0, 1);
    await addBreakerWaiter(db, id, 'webhook-event-late-vital', 1, 0, 3);
    const [fall] = await take();
    assert.equal(fall?.workflowId, 'webhook-event-lost-fall');
    await forgetWokenWaiters(db, [fall]);
    await age(id, 'signalled_at', 89);
    await nextRound(id);
    assert.deepEqual(await take(), [], 'within the leases');
    await age(id, 'signalled_at', 2);
    await nextRound(id);
    assert.deepEqual(
      (await take()).map((w) => w.workflowId),
      ['webhook-event-late-vital'],
      'after them: the vital goes',
    );
    assert.deepEqual(
      (await db('webhook_breaker_waiters').where({ registration_id: id }).select('workflow_id')).map(
        (row: { workflow_id: string }) => row.workflow_id,
      ),
      ['webhook-event-late-vital'],
      'the fall is forgotten: its wake went through long ago',
    );
    // A fall listed again (held or deferred again) is due again, and first.
    await addBreakerWaiter(db, id, 'webhook-event-lost-fall', 2, 0, 1);
    await nextRound(id);
    assert.deepEqual(
      (await take()).map((w) => [w.workflowId, w.waitToken]),
      [['webhook-event-lost-fall', 2]],
    );
  });

  it('waiters stay listed until their signal went through: taken again after the lease, never after a new wait', async () => {
    const id = await registrationId();
    const db = fx.database.db;
    const limits = { perSecond: 10, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 };
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
    await nextRound(id);
    const again = await take();
    assert.deepEqual(
      again.map((w) => [w.workflowId, w.waitToken]).sort(),
      [['webhook-event-waits-again', 2]],
      'within the lease: only the new wait',
    );
    await forgetWokenWaiters(db, again);
    await nextRound(id);
    assert.deepEqual(await take(), [], 'still within the lease');
    await nextRound(id);
    await age(id, 'woken_at', 61);
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
    await nextRound(id);
    assert.deepEqual(
      (await take()).map((w) => w.workflowId),
      ['webhook-event-relisting'],
      'the next round wakes it to probe, not a probe lease later',
    );
  });

  it("a delivery waiting for the endpoint's attempts in flight: woken once they have ended, if the breaker lets it through", async () => {
    const db = fx.database.db;
    const limits = { perSecond: 10, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 };
    const [healthy, failing] = [await registrationId(), await registrationId()];
    const take = (id: string) => takeOf(id, limits);
    await addBreakerWaiter(db, healthy, 'webhook-event-busy-1', 1, 60_000);
    await addBreakerWaiter(db, failing, 'webhook-event-busy-2', 1, 60_000);
    assert.deepEqual(await take(healthy), [], 'not before the attempts in flight have ended');
    // The attempts in flight to the second endpoint fail meanwhile: its breaker opens.
    for (let i = 0; i < 3; i++) await recordFailure(db, failing, thresholds, http500);
    for (const id of [healthy, failing]) {
      await nextRound(id);
      await age(id, 'eligible_at', 61);
    }
    assert.deepEqual(
      (await take(healthy)).map((w) => w.workflowId),
      ['webhook-event-busy-1'],
      'then woken (its breaker never failed)',
    );
    assert.deepEqual(await take(failing), [], 'the breaker opened meanwhile: it waits on for the probe');
  });

  it('a failure without a status (a timeout) is reported as such, and a success forgets it; a healthy one has no row', async () => {
    const db = fx.database.db;
    const id = await registrationId();
    assert.equal(await findBreaker(db, id), undefined, 'never failed: no breaker row');
    const timeout = { message: 'Receiver did not answer within 10000 ms' };
    await recordFailure(db, id, thresholds, http500);
    await recordFailure(db, id, thresholds, http500);
    const opened = await recordFailure(db, id, thresholds, timeout);
    assert.deepEqual(opened.lastFailure, timeout, 'the last failure, with no status code');
    const admission = await admitAttempt(db, id, 5_000);
    assert.deepEqual(admission.state === 'open' && admission.lastFailure, timeout);
    await endOpenPeriod(id);
    assert.equal((await admitAttempt(db, id, 5_000)).state, 'probe');
    await recordSuccess(db, id);
    assert.deepEqual(await findBreaker(db, id), {
      registrationId: id,
      consecutiveFailures: 0,
      openUntil: null,
      probeUntil: null,
      consecutiveOpens: 0,
    });
  });

  it("a success resets its own registration's breaker only, and on a healthy one writes nothing (never waits on its lock)", async () => {
    const db = fx.database.db;
    const [id, other] = [await registrationId(), await registrationId()];
    for (const r of [id, other]) await recordFailure(db, r, thresholds, http500);
    await recordSuccess(db, id);
    assert.equal((await findBreaker(db, id))?.consecutiveFailures, 0);
    assert.equal((await findBreaker(db, other))?.consecutiveFailures, 1, "another registration's count is kept");
    // A resumer's round holds the healthy breaker's row: the success of an attempt does not wait for it.
    await db.transaction(async (round) => {
      await round('webhook_circuit_breakers').where({ registration_id: id }).forUpdate();
      await db.transaction(async (attempt) => {
        await attempt.raw(`SET LOCAL lock_timeout = '200ms'`);
        await recordSuccess(attempt, id);
      });
    });
  });

  it('a half-open breaker whose probe is held waits for that lease, whatever lease the asking attempt would take', async () => {
    const db = fx.database.db;
    const id = await registrationId();
    for (let i = 0; i < 3; i += 1) await recordFailure(db, id, thresholds, http500);
    await endOpenPeriod(id);
    assert.equal((await admitAttempt(db, id, 60_000)).state, 'probe');
    const other = await admitAttempt(db, id, 5_000);
    assert.ok(other.state === 'open' && other.waitMs > 50_000 && other.waitMs <= 60_000, JSON.stringify(other));
  });

  it('probe rounds of several half-open breakers at once: one not spent gives back its own probe lease only', async () => {
    const db = fx.database.db;
    const [locked, woken] = [await registrationId(), await registrationId()];
    const limits = { perSecond: 2, probeLeaseMs: 60_000, wakeLeaseMs: 60_000 };
    for (const id of [locked, woken]) {
      for (let i = 0; i < 3; i++) await recordFailure(db, id, thresholds, http500);
      await addBreakerWaiter(db, id, `webhook-event-${id}-1`, 1);
      await addBreakerWaiter(db, id, `webhook-event-${id}-2`, 1);
      await endOpenPeriod(id);
    }
    await db.transaction(async (trx) => {
      await trx('webhook_breaker_waiters').where({ registration_id: locked }).forUpdate();
      // One round for both: the second one's oldest waiter is woken to probe, the first has none to wake.
      const round = await takeWaitersToWake(db, limits);
      assert.deepEqual(
        round.filter((w) => [locked, woken].includes(w.registrationId)).map((w) => w.workflowId),
        [`webhook-event-${woken}-1`],
      );
    });
    for (const id of [locked, woken]) await nextRound(id);
    const next = await takeWaitersToWake(db, limits);
    assert.deepEqual(
      next.filter((w) => [locked, woken].includes(w.registrationId)).map((w) => w.workflowId),
      [`webhook-event-${locked}-1`],
      'the first probes now; the second, whose probe was woken, not again within its lease',
    );
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
    const admissions = await Promise.all(Array.from({ length: 20 }, () => admitAttempt(fx.database.db, id, 60_000)));
    assert.equal(admissions.filter((a) => a.state === 'probe').length, 1);
    for (const other of admissions.filter((a) => a.state !== 'probe')) {
      assert.equal(other.state, 'open');
      // The lease from the claim's clock, read by statements that started before it (blocked on its lock) and so
      // may see a few ms more than 60 s.
      assert.ok(other.state === 'open' && other.waitMs > 50_000 && other.waitMs < 61_000, JSON.stringify(other));
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
    assert.equal(await openFor(), 60_000);
    for (const expected of [120_000, 180_000, 180_000]) {
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

  /** The breaker's rows in the audit trail, oldest first: action, actor, registration and what changed. */
  const transitions = async (id: string) =>
    (await listAuditEvents(fx.database.db, { limit: 100 }))
      .filter((row) => row.registrationId === id)
      .reverse()
      .map((row) => [row.action, row.actor.kind, row.changes]);

  it('each transition (open, half-open, close) leaves one system audit row, however many attempts race for it', async () => {
    // The test keys without a digest directory: an API an earlier suite started in this process may have left its own.
    useTestAuditTrail();
    const db = fx.database.db;
    const id = await registrationId();
    const projectId = (await db('webhook_registrations').where({ id }).first<{ project_id: string }>()).project_id;
    await recordFailure(db, id, thresholds, http500);
    await recordFailure(db, id, thresholds, http500);
    assert.deepEqual(await transitions(id), [], 'failures below the threshold are no transition');
    // Six failures at once past the threshold: the breaker opens once.
    await Promise.all(Array.from({ length: 6 }, () => recordFailure(db, id, thresholds, http500)));
    const opened = (await findBreaker(db, id))!;
    assert.equal(opened.consecutiveFailures, 8);
    assert.equal((await admitAttempt(db, id, 60_000)).state, 'open', 'refused while open: no row');
    await endOpenPeriod(id);
    const admissions = await Promise.all(Array.from({ length: 10 }, () => admitAttempt(db, id, 60_000)));
    assert.equal(admissions.filter((a) => a.state === 'probe').length, 1);
    // The probe's lease lapsed without an outcome: another attempt probes, still half-open (no transition).
    await db('webhook_circuit_breakers').where({ registration_id: id }).update({ probe_until: db.fn.now() });
    assert.equal((await admitAttempt(db, id, 60_000)).state, 'probe');
    const reopened = await recordFailure(db, id, thresholds, { message: 'Receiver did not answer within 300 ms' });
    await endOpenPeriod(id);
    assert.equal((await admitAttempt(db, id, 60_000)).state, 'probe');
    await Promise.all(Array.from({ length: 4 }, () => recordSuccess(db, id)));
    // A closed breaker's count forgotten by a success is no transition either.
    await recordFailure(db, id, thresholds, http500);
    await recordSuccess(db, id);
    assert.deepEqual(await transitions(id), [
      [
        'breaker.open',
        'system',
        {
          from: 'closed',
          consecutiveFailures: 3,
          consecutiveOpens: 1,
          openUntil: opened.openUntil!.toISOString(),
          statusCode: 500,
        },
      ],
      ['breaker.half-open', 'system', { consecutiveFailures: 8, consecutiveOpens: 1 }],
      [
        'breaker.open',
        'system',
        {
          from: 'half-open',
          consecutiveFailures: 9,
          consecutiveOpens: 2,
          openUntil: reopened.openUntil!.toISOString(),
        },
      ],
      ['breaker.half-open', 'system', { consecutiveFailures: 9, consecutiveOpens: 2 }],
      ['breaker.close', 'system', {}],
    ]);
    const rows = (await listAuditEvents(db, { projectId, limit: 100 })).filter((row) =>
      row.action.startsWith('breaker'),
    );
    assert.equal(rows.length, 5, 'each on the registration’s project');
    assert.ok(rows.every((row) => row.outcome === 'ok' && row.actor.subject === undefined));
    assert.equal((await verifyAuditChain(db)).fault, undefined);
  });

  it('a transition whose audit row cannot be written does not happen: the breaker stays as it was', async () => {
    const db = fx.database.db;
    const id = await registrationId();
    await recordFailure(db, id, thresholds, http500);
    await recordFailure(db, id, thresholds, http500);
    await db.raw(`CREATE FUNCTION refuse_breaker_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await db.raw(
      'CREATE TRIGGER refuse_breaker_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_breaker_audit()',
    );
    const dropTrigger = () => db.raw('DROP TRIGGER refuse_breaker_audit ON audit_events');
    try {
      await assert.rejects(recordFailure(db, id, thresholds, http500), /audit refused/);
      assert.deepEqual(
        {
          failures: (await findBreaker(db, id))?.consecutiveFailures,
          openUntil: (await findBreaker(db, id))?.openUntil,
        },
        { failures: 2, openUntil: null },
        'not opened, not counted',
      );
      await dropTrigger();
      await recordFailure(db, id, thresholds, http500);
      await endOpenPeriod(id);
      await db.raw(
        'CREATE TRIGGER refuse_breaker_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_breaker_audit()',
      );
      await assert.rejects(admitAttempt(db, id, 60_000), /audit refused/);
      assert.equal((await findBreaker(db, id))?.probeUntil, null, 'the probe is not claimed');
      await assert.rejects(recordSuccess(db, id), /audit refused/);
      assert.notEqual((await findBreaker(db, id))?.openUntil, null, 'not closed');
    } finally {
      await db.raw('DROP TRIGGER IF EXISTS refuse_breaker_audit ON audit_events');
      await db.raw('DROP FUNCTION IF EXISTS refuse_breaker_audit()');
    }
    assert.deepEqual(
      (await transitions(id)).map(([action]) => action),
      ['breaker.open'],
    );
  });

  it("a receiver's Retry-After lengthens the open period, never shortens it", async () => {
    const id = await registrationId();
    await recordFailure(fx.database.db, id, thresholds, http500, 0);
    await recordFailure(fx.database.db, id, thresholds, http500, 0);
    const opened = await recordFailure(fx.database.db, id, thresholds, http500, 150_000);
    const row = await fx.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: id })
      .first<{ ms: string }>(fx.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
    assert.ok(opened.openUntil);
    assert.equal(Math.round(Number(row.ms)), 150_000);
    const other = await registrationId();
    for (let i = 0; i < 3; i++) await recordFailure(fx.database.db, other, thresholds, http500, 1_000);
    const shorter = await fx.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: other })
      .first<{ ms: string }>(fx.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
    assert.equal(Math.round(Number(shorter.ms)), 60_000, 'a shorter Retry-After leaves BREAKER_OPEN_MS');
  });
});

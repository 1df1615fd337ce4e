// The circuit breaker as the attempt activity drives it: the real activity (MockActivityEnvironment gives it its
// context), real HTTP to receivers on 127.0.0.1, the breaker in a real PostgreSQL. No Temporal server: each attempt
// is one call, so what opens the breaker and for how long is read from the database's clock, not from sleeps.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityConfig } from '../../activities';
import { createEndpointGuard } from '../../activities/endpoint/breaker';
import { DELIVERY_DEFERRED, FailureType, type DeliveryDeferredDetails } from '../../common/contract';
import { findBreaker, listAuditEvents } from '../../db';
import { captureLogger, fallPayload, fastConfig, newProjectId } from '../support/deliveries';
import { runAttempt, useAttemptSuite } from './fixture';

const config: ActivityConfig = {
  ...fastConfig,
  WEBHOOK_TIMEOUT_MS: 300,
  // Long enough that a receiver's Retry-After is not capped before it reaches the breaker.
  DELIVERY_MAX_INTERVAL_MS: 60_000,
  BREAKER_FAILURE_THRESHOLD: 3,
  BREAKER_OPEN_MS: 1_000,
  BREAKER_MAX_OPEN_MS: 4_000,
  // One attempt in flight per endpoint: an attempt that kept its slot would leave the next one refused.
  ENDPOINT_MAX_CONCURRENT_ATTEMPTS: 1,
  ENDPOINT_QUEUE_WAIT_MS: 50,
  BREAKER_RESUME_SPREAD_MS: 2_000,
  BREAKER_WAIT_MAX_MS: 60_000,
};

/** A TCP server that accepts connections and never answers: a receiver hanging before its status line. */
async function startSilentReceiver(): Promise<{ url: string; connections: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const silent = { connections: 0 };
  const server: Server = createServer((socket) => {
    silent.connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(silent, {
    url: `http://127.0.0.1:${port}/hooks/receive`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  });
}

/** A port nothing listens on: every connection is refused. */
async function refusingUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/hooks/receive`;
}

describe('circuit breaker, driven by the attempt activity (real HTTP, real PostgreSQL)', function () {
  this.timeout(30_000);
  const suite = useAttemptSuite(config.WEBHOOK_TIMEOUT_MS);

  /**
   * A registration to `url`, and one attempt of a fall delivery to it per call, as the worker would run it; `settings`
   * overrides the file's config (e.g. an open period long enough to outlast what a test checks in it).
   */
  async function deliveryTo(url: string, settings: Partial<ActivityConfig> = {}) {
    const projectId = newProjectId();
    await suite.registrations.register(projectId, url, ['FALL_DETECTION']);
    const { id } = await suite.database
      .db('webhook_registrations')
      .where({ project_id: projectId })
      .first<{ id: string }>();
    const logs = captureLogger();
    const deliverWebhookAttempt = suite.attemptActivity({ ...config, ...settings }, logs.logger);
    const workflowId = `webhook-event-${randomUUID()}`;
    let attempt = 0;
    return {
      registrationId: id,
      /** The messages logged so far, each once per line. */
      logged: () => logs.lines.map((line) => line.msg),
      logs: logs.lines,
      /**
       * The next attempt's outcome, or the failure it threw. `listed: false` is a workflow from before the waiter
       * list: it has no wait token, and waits on a timer of its own.
       */
      attempt: ({ listed = true }: { listed?: boolean } = {}) => {
        attempt += 1;
        return runAttempt(
          deliverWebhookAttempt,
          {
            projectId,
            webhookType: 'FALL_DETECTION',
            body: JSON.stringify(fallPayload),
            ...(listed && { waitToken: attempt }),
          },
          { attempt, workflowId },
        );
      },
    };
  }

  /** The registration's audit rows, oldest first: action and actor. */
  const auditActions = async (registrationId: string) =>
    (await listAuditEvents(suite.database.db, { limit: 200 }))
      .filter((row) => row.registrationId === registrationId)
      .reverse()
      .map((row) => [row.action, row.actor.kind]);

  const failureType = (thrown: unknown) => (thrown instanceof ApplicationFailure ? thrown.type : String(thrown));

  /** BREAKER_FAILURE_THRESHOLD attempts that each fail with ReceiverUnreachable open the breaker; the next waits. */
  async function assertUnreachableOpens(
    delivery: Awaited<ReturnType<typeof deliveryTo>>,
    message: RegExp,
    /** What reached the receiver so far (requests, connections), where there is a receiver to ask. */
    sent: () => number = () => 0,
  ) {
    for (let i = 1; i <= 3; i += 1) {
      const thrown = await delivery.attempt();
      assert.equal(failureType(thrown), FailureType.ReceiverUnreachable, `attempt ${i}: ${String(thrown)}`);
    }
    const breaker = await findBreaker(suite.database.db, delivery.registrationId);
    assert.equal(breaker?.consecutiveFailures, 3);
    assert.ok(breaker?.openUntil, 'open after three unreachable attempts');
    assert.match(breaker.lastFailure?.message ?? '', message);
    const before = sent();
    const deferred = await delivery.attempt();
    assert.equal(sent(), before, 'nothing sent while open');
    assert.equal(failureType(deferred), DELIVERY_DEFERRED, String(deferred));
    const details = (deferred as ApplicationFailure).details?.[0] as DeliveryDeferredDetails;
    assert.equal(details.reason, 'circuit-open');
    assert.match(details.lastError ?? '', message);
    assertDeferral(deferred, 'Circuit breaker open for this webhook');
    const waiter = await suite.database
      .db('webhook_breaker_waiters')
      .where({ registration_id: delivery.registrationId });
    assert.deepEqual(
      waiter.map((row: { priority: number }) => row.priority),
      [1],
      'listed with the fall’s priority key',
    );
    // Listed as a waiter: the resumer's signal ends the wait; its own timer is a safety net of ½ to 1 BREAKER_WAIT_MAX_MS.
    assert.ok(
      details.waitMs >= config.BREAKER_WAIT_MAX_MS! / 2 && details.waitMs <= config.BREAKER_WAIT_MAX_MS!,
      `safety net ${details.waitMs} ms`,
    );
    // Operators see the breaker open once, with its count and until when.
    const opened = delivery.logs.filter((line) => line.msg === 'circuit breaker open: deliveries to this webhook wait');
    assert.equal(opened.length, 1, delivery.logged().join('\n'));
    assert.deepEqual(
      { level: opened[0]!.level, consecutiveFailures: opened[0]!.consecutiveFailures },
      { level: 40, consecutiveFailures: 3 },
    );
    assert.equal(opened[0]!.openUntil, breaker.openUntil.toISOString());
  }

  /** A deferral the workflow waits on, never one Temporal retries as an activity failure. */
  function assertDeferral(thrown: unknown, message: string) {
    assert.ok(thrown instanceof ApplicationFailure, String(thrown));
    assert.equal(thrown.nonRetryable, true, 'a deferral is not retried by Temporal');
    assert.match(thrown.message, new RegExp(`^${message}: next attempt in \\d+ ms$`));
  }

  // Open for longer than the checks take on a slow machine: a probe let through would be an attempt sent.
  const longOpen: Partial<ActivityConfig> = { BREAKER_OPEN_MS: 15_000, BREAKER_MAX_OPEN_MS: 60_000 };

  it('a receiver refusing connections opens the breaker', async () => {
    await assertUnreachableOpens(
      await deliveryTo(await refusingUrl(), longOpen),
      /^Receiver unreachable: ECONNREFUSED$/,
    );
  });

  it('a receiver answering after WEBHOOK_TIMEOUT_MS opens the breaker; the next attempt waits, sending nothing', async () => {
    suite.receiver.fallback = { status: 200, delayMs: 5_000 };
    await assertUnreachableOpens(
      await deliveryTo(suite.receiver.url, longOpen),
      /did not answer within 300 ms \(TIMEOUT\)/,
      () => suite.receiver.requests.length,
    );
  });

  it('a receiver that accepts the connection and never answers opens the breaker', async () => {
    const silent = await startSilentReceiver();
    try {
      await assertUnreachableOpens(
        await deliveryTo(silent.url, longOpen),
        /did not answer within 300 ms \(TIMEOUT\)/,
        () => silent.connections,
      );
    } finally {
      await silent.close();
    }
  });

  it("a receiver's Retry-After on the failure that opens the breaker lengthens the open period to it", async () => {
    const busy = { status: 503, headers: { 'Retry-After': '5' } };
    suite.receiver.script(busy, busy, busy);
    const delivery = await deliveryTo(suite.receiver.url);
    for (let i = 0; i < 3; i += 1) {
      assert.equal(failureType(await delivery.attempt()), FailureType.ReceiverStatus);
      // Each 503 slows the endpoint down for its 5 s (activities/endpoint/slow-down.ts): the next attempt comes after them.
      await suite.database
        .db('webhook_registrations')
        .where({ id: delivery.registrationId })
        .update({ slowed_until: suite.database.db.raw(`now() - interval '1 millisecond'`) });
    }
    // BREAKER_OPEN_MS is 1 s: the receiver asked for 5.
    const { ms } = await suite.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: delivery.registrationId })
      .first<{ ms: string }>(suite.database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
    assert.equal(Math.round(Number(ms)), 5_000);
    const deferred = await delivery.attempt();
    const details = (deferred as ApplicationFailure).details?.[0] as DeliveryDeferredDetails | undefined;
    assert.equal(details?.reason, 'circuit-open', String(deferred));
  });

  it('a 2xx between failures resets the count on a closed breaker: occasional failures never open it', async () => {
    suite.receiver.script({ status: 500 }, { status: 500 }, { status: 200 }, { status: 500 }, { status: 500 });
    const delivery = await deliveryTo(suite.receiver.url);
    const outcomes = [];
    for (let i = 0; i < 5; i += 1) outcomes.push(failureType(await delivery.attempt()));
    assert.equal(suite.receiver.requests.length, 5, `every attempt reached the receiver: ${outcomes.join(', ')}`);
    const breaker = await findBreaker(suite.database.db, delivery.registrationId);
    assert.deepEqual(
      { failures: breaker?.consecutiveFailures, openUntil: breaker?.openUntil },
      { failures: 2, openUntil: null },
    );
  });

  it('a 2xx whose breaker reset cannot be written still counts as delivered: logged, never sent again', async () => {
    suite.receiver.script({ status: 500 }, { status: 200 });
    const delivery = await deliveryTo(suite.receiver.url);
    assert.equal(failureType(await delivery.attempt()), FailureType.ReceiverStatus);
    // PostgreSQL itself refuses the reset (a trigger on exactly that write), as a lost connection would.
    const refuseReset = `refuse_reset_${delivery.registrationId.replace(/-/g, '_')}`;
    await suite.database.db.raw(`
      CREATE FUNCTION ${refuseReset}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.consecutive_failures = 0 THEN RAISE EXCEPTION 'breaker reset refused'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER ${refuseReset} BEFORE UPDATE ON webhook_circuit_breakers FOR EACH ROW
        WHEN (OLD.registration_id = '${delivery.registrationId}') EXECUTE FUNCTION ${refuseReset}();`);
    try {
      const outcome = await delivery.attempt();
      assert.ok(!(outcome instanceof Error), `delivered, not retried: ${String(outcome)}`);
      assert.equal(suite.receiver.requests.length, 2);
      assert.ok(delivery.logged().includes('circuit breaker reset not recorded: the delivery stands'));
      assert.equal(
        (await findBreaker(suite.database.db, delivery.registrationId))?.consecutiveFailures,
        1,
        'as it was',
      );
    } finally {
      await suite.database.db.raw(
        `DROP TRIGGER ${refuseReset} ON webhook_circuit_breakers; DROP FUNCTION ${refuseReset}();`,
      );
    }
  });

  it('a healthy receiver costs one breaker read per attempt: nothing written, nothing logged about the breaker', async () => {
    const delivery = await deliveryTo(suite.receiver.url);
    const statements: string[] = [];
    const onQuery = ({ sql }: { sql: string }) => {
      if (sql.includes('webhook_circuit_breakers')) statements.push(sql.trim().split(/\s+/)[0]!.toUpperCase());
    };
    suite.database.db.on('query', onQuery);
    try {
      for (let i = 0; i < 3; i += 1) assert.ok(!((await delivery.attempt()) instanceof Error), `attempt ${i + 1}`);
    } finally {
      suite.database.db.off('query', onQuery);
    }
    assert.equal(suite.receiver.requests.length, 3);
    // The admission is one statement; there is nothing to reset on a breaker that never failed.
    assert.equal(statements.length, 3, statements.join(', '));
    assert.equal(await findBreaker(suite.database.db, delivery.registrationId), undefined, 'no breaker row');
    assert.deepEqual(await auditActions(delivery.registrationId), [], 'no audit row per delivery');
    const aboutBreaker = delivery.logged().filter((msg) => String(msg).startsWith('circuit breaker'));
    assert.deepEqual(aboutBreaker, []);
  });

  it('a half-open breaker lets one attempt probe: logged as it probes and as it closes, once each', async () => {
    suite.receiver.script({ status: 500 }, { status: 500 }, { status: 500 });
    const delivery = await deliveryTo(suite.receiver.url);
    for (let i = 0; i < 3; i += 1) assert.equal(failureType(await delivery.attempt()), FailureType.ReceiverStatus);
    // The open period ended a second ago, on the database's clock.
    await suite.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: delivery.registrationId })
      .update({ open_until: suite.database.db.raw("now() - interval '1 second'") });
    const probe = await delivery.attempt();
    assert.ok(!(probe instanceof Error), `the probe was delivered: ${String(probe)}`);
    const after = await findBreaker(suite.database.db, delivery.registrationId);
    assert.deepEqual(
      { failures: after?.consecutiveFailures, openUntil: after?.openUntil, probeUntil: after?.probeUntil },
      { failures: 0, openUntil: null, probeUntil: null },
    );
    assert.ok(!((await delivery.attempt()) instanceof Error), 'closed: the next attempt goes through');
    const count = (msg: string) => delivery.logged().filter((logged) => logged === msg).length;
    assert.deepEqual(
      [
        count('circuit breaker half-open: this attempt probes the receiver'),
        count('circuit breaker closed: the probe was delivered'),
        suite.receiver.requests.length,
      ],
      [1, 1, 5],
      delivery.logged().join('\n'),
    );
    // The trail has the breaker's three transitions, and nothing of the five attempts themselves.
    assert.deepEqual(await auditActions(delivery.registrationId), [
      ['breaker.open', 'system'],
      ['breaker.half-open', 'system'],
      ['breaker.close', 'system'],
    ]);
  });

  it('a delivery from before the waiter list waits on its own timer: the rest of the open period, spread', async () => {
    suite.receiver.script({ status: 500 }, { status: 500 }, { status: 500 });
    const delivery = await deliveryTo(suite.receiver.url, longOpen);
    for (let i = 0; i < 3; i += 1) assert.equal(failureType(await delivery.attempt()), FailureType.ReceiverStatus);
    const measuredAt = Date.now();
    const { ms } = await suite.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: delivery.registrationId })
      .first<{ ms: string }>(suite.database.db.raw('extract(epoch FROM open_until - now()) * 1000 AS ms'));
    const remaining = Number(ms);
    const waits: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      const deferred = await delivery.attempt({ listed: false });
      assertDeferral(deferred, 'Circuit breaker open for this webhook');
      waits.push(((deferred as ApplicationFailure).details?.[0] as DeliveryDeferredDetails).waitMs);
    }
    // Each waits out what is left of the open period (less the time the attempts took), plus up to
    // max(BREAKER_RESUME_SPREAD_MS, the period) more, so a backlog does not wake all at once.
    const spread = Math.max(config.BREAKER_RESUME_SPREAD_MS!, remaining);
    const took = Date.now() - measuredAt;
    for (const wait of waits)
      assert.ok(wait >= remaining - took && wait <= remaining + spread, `${wait} ms, ${remaining} ms left`);
    assert.ok(
      waits.some((wait) => wait > remaining + 100),
      `spread beyond the open period: ${waits.join(', ')}`,
    );
    assert.equal(suite.receiver.requests.length, 3, 'nothing sent while open');
  });

  it('an attempt finding the endpoint busy is deferred: listed, for the signal; unlisted, for 1 to 2 timeouts', async () => {
    // The guard itself, on the real database: the test's own post holds the only slot until the test lets it go.
    const { registrationId } = await deliveryTo(suite.receiver.url);
    const guard = createEndpointGuard({ db: suite.database.db, config });
    const target = (attempt: number, listed: boolean) => ({
      registrationId,
      isTest: false,
      attempt,
      workflowId: `webhook-event-${randomUUID()}`,
      ...(listed && { waitToken: 1 }),
      priority: 1,
      log: captureLogger().logger,
    });
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    let holding!: () => void;
    const holds = new Promise<void>((resolve) => (holding = resolve));
    const first = guard(target(1, true), () => (holding(), held.then(() => 'delivered')));
    await holds;
    const refused = async (listed: boolean) => {
      const outcome = await guard(target(2, listed), () => Promise.resolve('sent')).catch((error: unknown) => error);
      assertDeferral(outcome, 'Too many attempts in flight to this webhook');
      const details = (outcome as ApplicationFailure).details?.[0] as DeliveryDeferredDetails;
      assert.equal(details.reason, 'endpoint-busy');
      return details.waitMs;
    };
    const [listed, unlisted] = [await refused(true), await refused(false)];
    const busyWaiters = await suite.database.db('webhook_breaker_waiters').where({ registration_id: registrationId });
    assert.deepEqual(
      busyWaiters.map((row: { priority: number }) => row.priority),
      [1],
      'the listed one, with its priority key',
    );
    letGo();
    assert.equal(await first, 'delivered');
    assert.ok(
      listed >= config.BREAKER_WAIT_MAX_MS! / 2 && listed <= config.BREAKER_WAIT_MAX_MS!,
      `listed: the safety net, ${listed} ms`,
    );
    assert.ok(
      unlisted >= config.WEBHOOK_TIMEOUT_MS && unlisted <= 2 * config.WEBHOOK_TIMEOUT_MS,
      `unlisted: ${unlisted} ms`,
    );
    // The slot is free again: the next attempt goes through.
    assert.equal(await guard(target(3, true), () => Promise.resolve('sent')), 'sent');
  });
});

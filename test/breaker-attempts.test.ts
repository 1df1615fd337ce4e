// The circuit breaker as the attempt activity drives it: the real activity (MockActivityEnvironment gives it its
// context), real HTTP to receivers on 127.0.0.1, the breaker in a real PostgreSQL. No Temporal server: each attempt
// is one call, so what opens the breaker and for how long is read from the database's clock, not from sleeps.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities, createWebhookHttpClient, type ActivityConfig, type WebhookHttpClient } from '../activities';
import { DELIVERY_DEFERRED, FailureType, type DeliveryDeferredDetails } from '../common/contract';
import { findBreaker } from '../db';
import { Registrations, captureLogger, fallPayload, fastConfig, newProjectId } from './support/deliveries';
import { createTestDatabase, type TestDatabase } from './support/postgres';
import { startTestReceiver, type TestReceiver } from './support/receiver';

const config: ActivityConfig = {
  ...fastConfig,
  WEBHOOK_TIMEOUT_MS: 300,
  // Long enough that a receiver's Retry-After is not capped before it reaches the breaker.
  DELIVERY_MAX_INTERVAL_MS: 60_000,
  BREAKER_FAILURE_THRESHOLD: 3,
  BREAKER_OPEN_MS: 1_000,
  BREAKER_MAX_OPEN_MS: 4_000,
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
  let database: TestDatabase;
  let registrations: Registrations;
  let http: WebhookHttpClient;
  let receiver: TestReceiver;

  before(async () => {
    database = await createTestDatabase();
    registrations = new Registrations(database.db);
    http = createWebhookHttpClient({ timeoutMs: config.WEBHOOK_TIMEOUT_MS, allowPrivate: true });
  });
  after(async () => {
    await http?.close();
    await database?.destroy();
  });
  beforeEach(async () => (receiver = await startTestReceiver()));
  afterEach(() => receiver.close());

  /** A registration to `url`, and one attempt of a fall delivery to it per call, as the worker would run it. */
  async function deliveryTo(url: string) {
    const projectId = newProjectId();
    await registrations.register(projectId, url, ['FALL_DETECTION']);
    const { id } = await database.db('webhook_registrations').where({ project_id: projectId }).first<{ id: string }>();
    const { deliverWebhookAttempt } = createActivities({
      db: database.db,
      secretBox: registrations.secretBox,
      logger: captureLogger().logger,
      config,
      http,
    });
    const workflowId = `webhook-event-${randomUUID()}`;
    let attempt = 0;
    return {
      registrationId: id,
      /** The next attempt's outcome, or the failure it threw. */
      attempt: () => {
        attempt += 1;
        const env = new MockActivityEnvironment(
          { attempt, workflowExecution: { workflowId, runId: randomUUID() }, activityId: '1' },
          // The failures are what the test expects: not printed.
          { logger: new DefaultLogger('ERROR', () => undefined) },
        );
        return env
          .run(deliverWebhookAttempt, {
            projectId,
            webhookType: 'FALL_DETECTION' as const,
            body: JSON.stringify(fallPayload),
            waitToken: attempt,
          })
          .then(
            (outcome) => outcome,
            (error: unknown) => error,
          );
      },
    };
  }

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
    const breaker = await findBreaker(database.db, delivery.registrationId);
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
  }

  it('a receiver refusing connections opens the breaker', async () => {
    await assertUnreachableOpens(await deliveryTo(await refusingUrl()), /^Receiver unreachable: ECONNREFUSED$/);
  });

  it('a receiver answering after WEBHOOK_TIMEOUT_MS opens the breaker; the next attempt waits, sending nothing', async () => {
    receiver.fallback = { status: 200, delayMs: 5_000 };
    await assertUnreachableOpens(
      await deliveryTo(receiver.url),
      /did not answer within 300 ms \(TIMEOUT\)/,
      () => receiver.requests.length,
    );
  });

  it('a receiver that accepts the connection and never answers opens the breaker', async () => {
    const silent = await startSilentReceiver();
    try {
      await assertUnreachableOpens(
        await deliveryTo(silent.url),
        /did not answer within 300 ms \(TIMEOUT\)/,
        () => silent.connections,
      );
    } finally {
      await silent.close();
    }
  });

  it("a receiver's Retry-After on the failure that opens the breaker lengthens the open period to it", async () => {
    const busy = { status: 503, headers: { 'Retry-After': '5' } };
    receiver.script(busy, busy, busy);
    const delivery = await deliveryTo(receiver.url);
    for (let i = 0; i < 3; i += 1) assert.equal(failureType(await delivery.attempt()), FailureType.ReceiverStatus);
    // BREAKER_OPEN_MS is 1 s: the receiver asked for 5.
    const { ms } = await database
      .db('webhook_circuit_breakers')
      .where({ registration_id: delivery.registrationId })
      .first<{ ms: string }>(database.db.raw('extract(epoch FROM open_until - updated_at) * 1000 AS ms'));
    assert.equal(Math.round(Number(ms)), 5_000);
    const deferred = await delivery.attempt();
    const details = (deferred as ApplicationFailure).details?.[0] as DeliveryDeferredDetails | undefined;
    assert.equal(details?.reason, 'circuit-open', String(deferred));
  });

  it('a 2xx between failures resets the count on a closed breaker: occasional failures never open it', async () => {
    receiver.script({ status: 500 }, { status: 500 }, { status: 200 }, { status: 500 }, { status: 500 });
    const delivery = await deliveryTo(receiver.url);
    const outcomes = [];
    for (let i = 0; i < 5; i += 1) outcomes.push(failureType(await delivery.attempt()));
    assert.equal(receiver.requests.length, 5, `every attempt reached the receiver: ${outcomes.join(', ')}`);
    const breaker = await findBreaker(database.db, delivery.registrationId);
    assert.deepEqual(
      { failures: breaker?.consecutiveFailures, openUntil: breaker?.openUntil },
      { failures: 2, openUntil: null },
    );
  });
});

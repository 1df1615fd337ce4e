// What each delivery writes to the delivery log and to its endpoint's health, through a real worker on the Temporal
// dev server and a real receiver: delivered, retried, given up and skipped events with their attempts (never a
// payload), a skip when the webhook stops subscribing mid-retry, an SSRF refusal by category, and the circuit breaker
// as the health route shows it.
import assert from 'node:assert/strict';
import * as store from '../../db';
import { fallEvent } from '../support/deliveries';
import { givingUp, useDeliveryLogSuite } from './fixture';

describe('delivery log: what each delivery writes to the log and to endpoint health', function () {
  this.timeout(60_000);
  const { fx, withWorker, deliver, call, project, list, detail } = useDeliveryLogSuite();

  it('logs a delivered, a failed-then-delivered, a given-up and a skipped event; never a payload', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const q = await project('alice');
    const [delivered, retried, gaveUp, skipped] = await withWorker(async () => {
      const first = await deliver(fallEvent(p));
      fx.receiver.script({ status: 500 });
      const second = await deliver(fallEvent(p));
      fx.receiver.fallback = { status: 500 };
      const third = await deliver(fallEvent(p));
      // q has no webhook: the event is skipped.
      const fourth = await deliver(fallEvent(q));
      return [first, second, third, fourth];
    });

    const page = await list(p);
    assert.equal(page.status, 200);
    assert.deepEqual(
      page.body.items.map((item) => [item.id, item.status]),
      [
        [gaveUp, 'failed'],
        [retried, 'delivered'],
        [delivered, 'delivered'],
      ],
    );
    assert.equal(page.body.nextCursor, null);
    for (const item of page.body.items)
      assert.deepEqual(Object.keys(item).sort(), [
        'attempts',
        'createdAt',
        'id',
        'lastAttemptAt',
        'lastError',
        'lastStatusCode',
        'status',
        'type',
        'updatedAt',
      ]);
    // Each item's last attempt time is its attempt log's last, in the list as in the detail (not updatedAt, which
    // giving up moved later).
    for (const item of page.body.items) {
      const { body } = await detail(p, item.id);
      assert.equal(item.lastAttemptAt, body.attemptLog!.at(-1)!.at, item.id);
      assert.equal(body.lastAttemptAt, item.lastAttemptAt);
    }
    assert.ok(!/Ada|Lovelace|example\.com|userUUID/.test(page.text), 'the log shows no personal data');

    const first = await detail(p, delivered);
    assert.equal(first.body.attempts, 1);
    assert.equal(first.body.lastStatusCode, 200);
    assert.equal(first.body.lastError, null);
    assert.deepEqual(
      first.body.attemptLog!.map((a) => [a.attempt, a.statusCode]),
      [[1, 200]],
    );

    const second = await detail(p, retried);
    assert.equal(second.body.status, 'delivered');
    assert.equal(second.body.attempts, 2);
    assert.deepEqual(
      second.body.attemptLog!.map((a) => [a.attempt, a.statusCode]),
      [
        [1, 500],
        [2, 200],
      ],
    );
    assert.ok(second.body.attemptLog!.every((a) => a.durationMs >= 0 && !Number.isNaN(Date.parse(a.at))));

    const third = await detail(p, gaveUp);
    assert.equal(third.body.status, 'failed');
    assert.equal(third.body.type, 'FALL_DETECTION');
    assert.ok(third.body.attempts >= 2, `attempts: ${third.body.attempts}`);
    assert.equal(third.body.attemptLog!.length, third.body.attempts);
    assert.equal(third.body.lastStatusCode, 500);
    assert.equal(third.body.lastError, 'Receiver answered HTTP 500');

    const skippedPage = await list(q);
    assert.deepEqual(
      skippedPage.body.items.map((item) => [item.id, item.status, item.attempts, item.lastError, item.lastAttemptAt]),
      [[skipped, 'skipped', 0, 'No webhook is registered for the project', null]],
    );

    const health = await call('GET', `/webhooks/project/${p}/health`, { user: 'alice' });
    assert.equal(health.status, 200);
    assert.equal(health.body.state, 'failing');
    assert.equal(health.body.consecutiveFailures, third.body.attempts);
    assert.equal(health.body.lastError, 'Receiver answered HTTP 500');
    assert.ok(Date.parse(String(health.body.lastSuccessAt)) <= Date.parse(String(health.body.lastFailureAt)));
    const unknown = await call('GET', `/webhooks/project/${q}/health`, { user: 'alice' });
    assert.deepEqual(unknown.body, {
      state: 'unknown',
      consecutiveFailures: 0,
      lastSuccessAt: null,
      lastFailureAt: null,
      lastError: null,
      breaker: { state: 'closed', openUntil: null },
      clientCertificate: null,
      held: null,
      slowedUntil: null,
      rateLimit: null,
    });
  });

  it('health shows the registration’s circuit breaker: closed, open until its period ends, half-open, closed again', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    const registrationId = (await store.findRegistration(fx.database.db, p))!.id;
    const breaker = async () =>
      (await call<{ breaker: unknown }>('GET', `/webhooks/project/${p}/health`, { user: 'alice' })).body.breaker;
    assert.deepEqual(await breaker(), { state: 'closed', openUntil: null });

    // Driven as the worker's attempts drive it, at a threshold of two failures. An open period of 0 ms is over at
    // once: the breaker opens and is half-open (the next attempt may probe).
    const failure = { message: 'Receiver answered HTTP 503', statusCode: 503 };
    const fail = (openMs: number) =>
      store.recordFailure(fx.database.db, registrationId, { failureThreshold: 2, openMs, maxOpenMs: openMs }, failure);
    await fail(0);
    assert.deepEqual(await breaker(), { state: 'closed', openUntil: null }, 'one failure, below the threshold');
    await fail(0);
    assert.deepEqual(await breaker(), { state: 'half-open', openUntil: null });
    // The probe fails: open for a minute.
    const reopened = await fail(60_000);
    assert.ok(reopened.openUntil && reopened.openUntil.getTime() > Date.now() + 50_000);
    assert.deepEqual(await breaker(), { state: 'open', openUntil: reopened.openUntil.toISOString() });
    await store.recordSuccess(fx.database.db, registrationId);
    assert.deepEqual(await breaker(), { state: 'closed', openUntil: null });
  });

  it('logs an event of a type the webhook does not subscribe to as skipped, with the spec text', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['VITAL_THRESHOLD']);
    const id = await withWorker(() => deliver(fallEvent(p)));
    assert.equal(fx.receiver.requests.length, 0);
    const page = await list(p);
    assert.deepEqual(
      page.body.items.map((item) => [item.id, item.status, item.attempts, item.lastError]),
      [[id, 'skipped', 0, `Project ${p} has not registered a webhook for event: FALL_DETECTION`]],
    );
  });

  it('logs a pending event as skipped when the webhook stops subscribing to its type before the next attempt', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 503 };
    // The retry waits 2 s: time to change the types after the first attempt, before the second.
    const slowRetry = { ...givingUp, DELIVERY_INITIAL_INTERVAL_MS: 2_000, DELIVERY_GIVE_UP_AFTER_MS: 30_000 };
    const id = await withWorker(async () => {
      const delivered = deliver(fallEvent(p));
      await fx.receiver.waitForRequests(1);
      assert.equal((await list(p)).body.items[0]?.status, 'pending');
      await store.updateRegistration(fx.database.db, p, { types: ['VITAL_THRESHOLD'] });
      return delivered;
    }, slowRetry);
    assert.equal(fx.receiver.requests.length, 1, 'no attempt after the type was unsubscribed');
    const page = await list(p);
    assert.deepEqual(
      page.body.items.map((item) => [item.id, item.status, item.attempts, item.lastError]),
      [[id, 'skipped', 1, `Project ${p} has not registered a webhook for event: FALL_DETECTION`]],
    );
    const { status } = await fx.env.client.workflow.getHandle(id).describe();
    assert.equal(status.name, 'FAILED');
  });

  it('an SSRF refusal is logged and shown as the category of address, never the address it resolved to', async () => {
    const p = await project('alice');
    // A name, not a literal: the resolved address (127.0.0.1 or ::1) appears only if the refusal leaks it.
    await fx.registrations.register(p, `http://localhost:${fx.receiver.port}/hook`, ['FALL_DETECTION']);
    const id = await withWorker(() => deliver(fallEvent(p)), { ...givingUp, ALLOW_PRIVATE_WEBHOOK_URLS: false });
    assert.equal(fx.receiver.requests.length, 0, 'nothing was sent');

    const refusal =
      'Refused to deliver: the webhook URL leads to a loopback address, which webhook receivers may not use ' +
      '(set ALLOW_PRIVATE_WEBHOOK_URLS=true for local development)';
    const logged = await detail(p, id);
    assert.equal(logged.body.status, 'failed');
    assert.equal(logged.body.lastError, refusal);
    assert.deepEqual(
      logged.body.attemptLog!.map((a) => a.errorCode),
      ['ERR_WEBHOOK_TARGET_FORBIDDEN'],
    );
    const health = await call('GET', `/webhooks/project/${p}/health`, { user: 'alice' });
    assert.equal(health.body.state, 'failing');
    assert.equal(health.body.lastError, refusal);
    const stored = JSON.stringify([
      await fx.database.db('deliveries').where({ project_id: p }),
      await fx.database.db('delivery_attempts').where({ delivery_id: id }),
      await fx.database.db('endpoint_health').where({ project_id: p }),
    ]);
    for (const text of [logged.text, health.text, (await list(p)).text, stored])
      assert.doesNotMatch(text, /127\.0\.0\.1|::1\b|::ffff/, text);
  });
});

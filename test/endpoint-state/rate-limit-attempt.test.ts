// The rate limit as one attempt meets it: the real activity (MockActivityEnvironment gives it its context) on real
// PostgreSQL, posting to a real receiver, with the registration's next slot set a moment ahead.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities, createWebhookHttpClient, type WebhookHttpClient } from '../../activities';
import type { DeliveryAttemptOutcome } from '../../common/contract';
import * as store from '../../db';
import { Registrations, captureLogger, fallPayload, fastConfig, newProjectId } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';

describe('rate limit: an attempt that waits for its slot (real PostgreSQL, real receiver)', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  let registrations: Registrations;
  let http: WebhookHttpClient;
  let receiver: TestReceiver;
  before(async () => {
    database = await createTestDatabase();
    registrations = new Registrations(database.db);
    http = createWebhookHttpClient({ timeoutMs: fastConfig.WEBHOOK_TIMEOUT_MS, allowPrivate: true });
  });
  after(async () => {
    await http?.close();
    await database?.destroy();
  });
  beforeEach(async () => (receiver = await startTestReceiver()));
  afterEach(() => receiver.close());

  it('signs the request after the wait: its timestamps are taken at the slot, not before the wait', async () => {
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const registration = await store.findRegistration(database.db, projectId);
    await database.db('webhook_registrations').where({ id: registration!.id }).update({ rate_limit_per_second: 1 });
    // The next slot 800 ms ahead: within the horizon, so the attempt takes it and waits for it in the activity.
    const waitMs = 800;
    await database.db.raw(
      `INSERT INTO webhook_rate_limits (registration_id, next_at)
       VALUES (?, clock_timestamp() + ? * interval '1 millisecond')`,
      [registration!.id, waitMs],
    );
    const { deliverWebhookAttempt } = createActivities({
      db: database.db,
      secretBox: registrations.secretBox,
      logger: captureLogger().logger,
      config: fastConfig,
      http,
    });
    const workflowId = `webhook-event-${randomUUID()}`;
    const env = new MockActivityEnvironment(
      { attempt: 1, workflowExecution: { workflowId, runId: randomUUID() }, activityId: '1' },
      { logger: new DefaultLogger('ERROR', () => undefined) },
    );
    const started = Date.now();
    const outcome = (await env.run(deliverWebhookAttempt, {
      projectId,
      webhookType: 'FALL_DETECTION' as const,
      body: JSON.stringify(fallPayload),
    })) as DeliveryAttemptOutcome;
    assert.equal(outcome.status, 'delivered');
    const [request] = receiver.requests;
    assert.ok(request);
    const slotAt = started + waitMs;
    // The database's clock and this process's are the machine's; 50 ms for the statement's own time.
    const signedAt = Number(request.headers['x-timestamp']);
    assert.ok(signedAt >= slotAt - 50, `x-timestamp ${signedAt - started} ms after the attempt began, slot ${waitMs}`);
    assert.ok(signedAt <= request.receivedAt, 'signed before it arrived');
    assert.equal(request.headers['webhook-timestamp'], String(Math.floor(signedAt / 1000)), 'the same instant');
    assert.ok(independentSignatureValid(secret, request));
  });
});

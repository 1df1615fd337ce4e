// The rate limit as one attempt meets it: the real activity (MockActivityEnvironment gives it its context) on real
// PostgreSQL, posting to a real receiver, with the registration's next slot set a moment ahead.
import assert from 'node:assert/strict';
import type { DeliveryAttemptOutcome } from '../../common/contract';
import * as store from '../../db';
import { fallPayload, fastConfig, newProjectId } from '../support/deliveries';
import { independentSignatureValid } from '../support/receiver';
import { runAttempt, useAttemptSuite } from './fixture';

describe('rate limit: an attempt that waits for its slot (real PostgreSQL, real receiver)', function () {
  this.timeout(30_000);
  const suite = useAttemptSuite(fastConfig.WEBHOOK_TIMEOUT_MS);

  it('signs the request after the wait: its timestamps are taken at the slot, not before the wait', async () => {
    const projectId = newProjectId();
    const secret = await suite.registrations.register(projectId, suite.receiver.url, ['FALL_DETECTION']);
    const registration = await store.findRegistration(suite.database.db, projectId);
    await suite.database
      .db('webhook_registrations')
      .where({ id: registration!.id })
      .update({ rate_limit_per_second: 1 });
    // The next slot 800 ms ahead: within the horizon, so the attempt takes it and waits for it in the activity.
    const waitMs = 800;
    await suite.database.db.raw(
      `INSERT INTO webhook_rate_limits (registration_id, next_at)
       VALUES (?, clock_timestamp() + ? * interval '1 millisecond')`,
      [registration!.id, waitMs],
    );
    const started = Date.now();
    const outcome = (await runAttempt(suite.attemptActivity(fastConfig), {
      projectId,
      webhookType: 'FALL_DETECTION',
      body: JSON.stringify(fallPayload),
    })) as DeliveryAttemptOutcome;
    assert.equal(outcome.status, 'delivered', JSON.stringify(outcome));
    const [request] = suite.receiver.requests;
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

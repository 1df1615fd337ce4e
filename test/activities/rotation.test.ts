import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { createExampleReceiver } from '../../receiver/example-receiver';
import { startSecretSweep } from '../../worker/secret-sweep';
import { verifyStandardWebhook, verifyWebhookSignature } from '../../common/crypto/signature';
import { addMember, addProject, eraseExpiredPreviousSecrets, findRegistration } from '../../db';
import { fallPayload, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { independentSignatureValid, type ReceivedRequest } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { aliceProject, deliverFall, endOverlap } from './rotation-fixture';
import { bearer, hsToken } from '../support/tokens';

interface Reply {
  status: number;
  body: { secret?: string; previousSecretExpiresAt?: string; detail?: string; errors?: unknown[] };
}

const stringHeaders = (request: ReceivedRequest): Record<string, string> =>
  Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));

/** Whether the stock `standardwebhooks` verifier, configured with this one secret, accepts the delivery. */
function stockAccepts(secret: string, request: ReceivedRequest): boolean {
  try {
    new Webhook(secret).verify(request.rawBody, stringHeaders(request));
    return true;
  } catch (error) {
    assert.ok(error instanceof WebhookVerificationError, String(error));
    return false;
  }
}

describe('secret rotation with overlap (API in process, Temporal dev server, real receiver)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx);

  async function call(method: string, path: string, user?: string, body?: unknown): Promise<Reply> {
    const headers: Record<string, string> = { ...(user && bearer(hsToken(user))) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(api.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  }

  const rotate = (projectId: string, user: string, body?: unknown) =>
    call('POST', `/webhooks/project/${projectId}/secret/rotate`, user, body);

  /** A project with alice as its member and a webhook to `url`; returns the project id and the secret. */
  async function registered(url = fx.receiver.url): Promise<{ projectId: string; secret: string }> {
    const projectId = await aliceProject(fx);
    const reply = await call('POST', '/webhooks/register', 'alice', { projectId, url, types: ['FALL_DETECTION'] });
    assert.equal(reply.status, 201);
    return { projectId, secret: reply.body.secret! };
  }

  /** Delivers one FALL_DETECTION through a real worker and returns the request the receiver got. */
  async function deliverOne(projectId: string): Promise<ReceivedRequest> {
    const before = fx.receiver.requests.length;
    const result = await deliverFall(fx, projectId);
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, before + 1);
    return fx.receiver.requests[before]!;
  }

  it('answers 200 with a new secret and the end of a one-day overlap by default', async () => {
    const { projectId, secret } = await registered();
    const startedAt = Date.now();
    const reply = await rotate(projectId, 'alice');
    assert.equal(reply.status, 200);
    assert.match(reply.body.secret!, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.notEqual(reply.body.secret, secret);
    const expiresAt = Date.parse(reply.body.previousSecretExpiresAt!);
    // The database's clock sets it; both clocks are this machine's.
    assert.ok(expiresAt >= startedAt + 86_400_000 - 1_000 && expiresAt <= Date.now() + 86_400_000 + 1_000);
    const row = await findRegistration(fx.database.db, projectId);
    assert.ok(row?.previousSecretSealed, 'the replaced secret is kept');
    assert.ok(!row.previousSecretSealed.includes(secret.slice(6)), 'sealed, never in plaintext');
    assert.equal(
      fx.registrations.secretBox.open(row.secretSealed, `webhook-registration:${row.id}`),
      reply.body.secret,
    );
  });

  it('during the overlap: webhook-signature carries both signatures, X-Signature the new secret', async () => {
    const { projectId, secret: old } = await registered();
    const reply = await rotate(projectId, 'alice', { overlapSeconds: 3600 });
    assert.equal(reply.status, 200);
    const fresh = reply.body.secret!;

    const request = await deliverOne(projectId);
    const signatures = String(request.headers['webhook-signature']).split(' ');
    assert.equal(signatures.length, 2);
    for (const signature of signatures) assert.match(signature, /^v1,[A-Za-z0-9+/]{43}=$/);
    // A receiver configured with either secret, with the stock library, accepts it.
    assert.equal(stockAccepts(old, request), true);
    assert.equal(stockAccepts(fresh, request), true);
    assert.deepEqual(new Webhook(fresh).verify(request.rawBody, stringHeaders(request)), fallPayload);
    assert.equal(independentSignatureValid(fresh, request), true);
    assert.equal(independentSignatureValid(old, request), false);
    const x = { timestamp: request.headers['x-timestamp'], signature: request.headers['x-signature'] };
    assert.equal(verifyWebhookSignature({ secret: [old, fresh], ...x, rawBody: request.rawBody }), true);
    assert.equal(verifyWebhookSignature({ secret: [old], ...x, rawBody: request.rawBody }), false);
    assert.equal(verifyStandardWebhook({ secret: [old], headers: request.headers, rawBody: request.rawBody }), true);
  });

  it('after the overlap: only the new secret signs, and the replaced one is erased', async () => {
    const { projectId, secret: old } = await registered();
    const during = await rotate(projectId, 'alice', { overlapSeconds: 1 });
    const fresh = during.body.secret!;
    const expiresAt = Date.parse(during.body.previousSecretExpiresAt!);
    assert.ok((await findRegistration(fx.database.db, projectId))?.previousSecretSealed);
    await sleep(Math.max(0, expiresAt - Date.now()) + 200);

    const request = await deliverOne(projectId);
    assert.equal(String(request.headers['webhook-signature']).split(' ').length, 1);
    assert.equal(stockAccepts(fresh, request), true);
    assert.equal(stockAccepts(old, request), false);
    assert.equal(independentSignatureValid(fresh, request), true);
    const row = await findRegistration(fx.database.db, projectId);
    assert.equal(row?.previousSecretSealed, null, 'the attempt erased the expired secret');
    assert.equal(row?.previousSecretExpiresAt, null);
  });

  it('a second rotation during the overlap keeps the secret it replaces beside the new one and drops the oldest', async () => {
    const { projectId, secret: first } = await registered();
    const second = (await rotate(projectId, 'alice', { overlapSeconds: 3600 })).body.secret!;
    const startedAt = Date.now();
    const again = await rotate(projectId, 'alice', { overlapSeconds: 600 });
    assert.equal(again.status, 200);
    const third = again.body.secret!;
    // The overlap is the second rotation's own, not what was left of the first.
    const expiresAt = Date.parse(again.body.previousSecretExpiresAt!);
    assert.ok(expiresAt >= startedAt + 600_000 - 1_000 && expiresAt <= Date.now() + 600_000 + 1_000);

    // The receiver was told of the newest two secrets: a delivery verifies with either, never with the oldest.
    const request = await deliverOne(projectId);
    assert.equal(String(request.headers['webhook-signature']).split(' ').length, 2);
    assert.equal(stockAccepts(second, request), true, 'the secret just replaced still signs');
    assert.equal(stockAccepts(third, request), true);
    assert.equal(stockAccepts(first, request), false, 'the oldest secret no longer signs');
    assert.equal(independentSignatureValid(third, request), true);
  });

  it('overlapSeconds 0 ends the old secret at once', async () => {
    const { projectId, secret: old } = await registered();
    const reply = await rotate(projectId, 'alice', { overlapSeconds: 0 });
    assert.equal(reply.status, 200);
    assert.ok(Date.parse(reply.body.previousSecretExpiresAt!) <= Date.now() + 1_000);
    assert.equal((await findRegistration(fx.database.db, projectId))?.previousSecretSealed, null);
    const request = await deliverOne(projectId);
    assert.equal(String(request.headers['webhook-signature']).split(' ').length, 1);
    assert.equal(stockAccepts(reply.body.secret!, request), true);
    assert.equal(stockAccepts(old, request), false);
  });

  it('a receiver moving from the old secret to both to the new one accepts every delivery across a rotation', async () => {
    const { projectId, secret: old } = await registered();
    const before = await deliverOne(projectId);
    const reply = await rotate(projectId, 'alice', { overlapSeconds: 3600 });
    const fresh = reply.body.secret!;
    const during = await deliverOne(projectId);
    // The hour passes: the overlap's end moved into the past, as the clock would move it.
    await endOverlap(fx, projectId, 'previous_secret_expires_at');
    const afterwards = await deliverOne(projectId);
    assert.equal(String(afterwards.headers['webhook-signature']).split(' ').length, 1);

    // Not yet deployed: the old secret only; deployed during the overlap: both; later: the new one only.
    assert.equal(stockAccepts(old, before), true);
    assert.equal(stockAccepts(old, during), true);
    for (const request of [during, afterwards])
      assert.equal(
        verifyStandardWebhook({ secret: [old, fresh], headers: request.headers, rawBody: request.rawBody }),
        true,
      );
    assert.equal(stockAccepts(fresh, afterwards), true);
  });

  it('the example receiver accepts a list of secrets across the rotation', async () => {
    const { projectId, secret: old } = await registered();
    const fresh = (await rotate(projectId, 'alice', { overlapSeconds: 3600 })).body.secret!;
    const request = await deliverOne(projectId);
    /** The status an example receiver configured so answers to the delivery, replayed byte for byte. */
    const answer = async (secret: string[], scheme?: 'spec') => {
      const events: string[] = [];
      const receiver = createExampleReceiver({ secret, scheme, onEvent: ({ webhookId }) => events.push(webhookId) });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      try {
        const response = await fetch(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, {
          method: 'POST',
          headers: stringHeaders(request),
          body: request.rawBody,
        });
        assert.deepEqual(events, response.status === 200 ? [request.headers['webhook-id']] : []);
        return response.status;
      } finally {
        await new Promise((resolve) => receiver.close(resolve));
      }
    };
    assert.equal(await answer([old]), 200);
    assert.equal(await answer([fresh]), 200);
    assert.equal(await answer([old, fresh]), 200);
    assert.equal(await answer([old, fresh], 'spec'), 200);
    assert.equal(await answer([old], 'spec'), 401);
    assert.equal(await answer(['whsec_' + Buffer.alloc(32, 7).toString('base64')]), 401);
  });

  it('only members rotate (403), unknown projects and projects without a webhook are 404, bad bodies 400', async () => {
    const { projectId, secret } = await registered();
    const other = newProjectId();
    await addProject(fx.database.db, other);
    await addMember(fx.database.db, other, 'mallory');
    const sealedBefore = (await findRegistration(fx.database.db, projectId))?.secretSealed;

    // mallory is a member of another project, never of this one.
    const forbidden = await rotate(projectId, 'mallory', { overlapSeconds: 0 });
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.secret, undefined);
    assert.equal((await call('POST', `/webhooks/project/${projectId}/secret/rotate`)).status, 401);
    const unknown = await rotate('no-such-project', 'alice');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.detail, 'No project with id no-such-project was found');
    const noWebhook = await rotate(other, 'mallory');
    assert.equal(noWebhook.status, 404);
    assert.equal(noWebhook.body.detail, `No webhook is registered for project ${other}`);
    for (const body of [{ overlapSeconds: -1 }, { overlapSeconds: 604_801 }, { overlapSeconds: 1.5 }, { extra: 1 }]) {
      const invalid = await rotate(projectId, 'alice', body);
      assert.equal(invalid.status, 400, JSON.stringify(body));
      assert.ok(Array.isArray(invalid.body.errors));
    }
    assert.equal((await rotate(projectId, 'alice', { overlapSeconds: 604_800 })).status, 200);

    // Refused rotations changed nothing: the one accepted above is the only one, the original still verifies.
    const row = await findRegistration(fx.database.db, projectId);
    assert.notEqual(row?.secretSealed, sealedBefore);
    assert.equal(
      fx.registrations.secretBox.open(row!.previousSecretSealed!, `webhook-registration:${row!.id}`),
      secret,
    );
  });

  it('the sweep erases expired previous secrets of every registration, and only those', async () => {
    const expired = await registered();
    const live = await registered();
    await rotate(expired.projectId, 'alice', { overlapSeconds: 1 });
    await rotate(live.projectId, 'alice', { overlapSeconds: 3600 });
    await sleep(1_200);
    assert.ok((await eraseExpiredPreviousSecrets(fx.database.db)) >= 1);
    assert.equal((await findRegistration(fx.database.db, expired.projectId))?.previousSecretSealed, null);
    assert.ok((await findRegistration(fx.database.db, live.projectId))?.previousSecretSealed);
  });

  it("the worker's periodic sweep erases an expired previous secret no delivery reads", async () => {
    const { projectId } = await registered();
    await rotate(projectId, 'alice', { overlapSeconds: 1 });
    const stop = startSecretSweep(fx.database.db, 100, pino({ level: 'silent' }));
    try {
      // Polled until erased; the test's own timeout bounds it.
      while ((await findRegistration(fx.database.db, projectId))?.previousSecretSealed) await sleep(100);
    } finally {
      stop();
    }
    assert.equal((await findRegistration(fx.database.db, projectId))?.previousSecretExpiresAt, null);
  });
});

// A pause is told to the project's contacts when it starts and when it ends, naming who acted and until when; a pause a
// manage link started ends when the project's links are revoked. Real PostgreSQL, the API in process, the worker's
// notifier and sweep, and a real receiver of the signed notices.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { createApp } from '../../api';
import { createPortalTokens, portalSigningKeys } from '../../api/auth/portal-tokens';
import { createWebhookHttpClient } from '../../activities';
import { createNotifier } from '../../activities/notices';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { startPauseExpiry } from '../../worker/pause-expiry';
import { captureLogger, newProjectId } from '../support/deliveries';
import { eventually } from '../support/eventually';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

describe('pause notices: told when a pause starts and ends; a manage link’s pause ends with the links', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  let api: LocalServer;
  let contacts: TestReceiver;
  const ring = [{ id: 'k1', key: randomBytes(32) }];
  const secretBox = createSecretBox(ring[0]!.key);
  const tokens = createPortalTokens(portalSigningKeys(ring));
  const http = createWebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true });
  let stopSweep: () => void;

  before(async () => {
    t = await createTestDatabase();
    api = await listenLocal(
      createApp({
        db: t.db,
        secretBox,
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: TEST_JWT_SECRET },
        sendTestEvent: () => Promise.reject(new Error('unused')),
        portal: { tokens, publicBaseUrl: 'https://hooks.example.com' },
      }).callback(),
    );
    contacts = await startTestReceiver();
    const notifier = createNotifier({ db: t.db, secretBox, logger: captureLogger().logger, http });
    stopSweep = startPauseExpiry(t.db, captureLogger().logger, 100, notifier.notify);
  });
  after(async () => {
    stopSweep?.();
    await http.close();
    await contacts?.close();
    await api?.close();
    await t?.destroy();
  });

  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const reply = await fetch(`${api.url}${path}`, {
      method,
      headers: { ...bearer(token), ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: reply.status, body: (await reply.json().catch(() => ({}))) as Record<string, unknown> };
  };

  /** A project with alice as member, a webhook, and the contacts' URL; returns the project and the signing secret. */
  async function project(): Promise<{ p: string; secret: string }> {
    const p = newProjectId();
    await store.addProject(t.db, p);
    await store.addMember(t.db, p, 'alice');
    const made = await call('POST', '/webhooks/register', hsToken('alice'), {
      projectId: p,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    assert.equal(made.status, 201);
    const set = await call('PUT', `/webhooks/project/${p}/notifications`, hsToken('alice'), {
      url: contacts.url,
      emails: [],
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    return { p, secret: String(made.body.secret) };
  }

  /** The notices the contacts' URL got for project `p`, as sent. */
  const toldOf = (p: string) =>
    contacts.requests
      .map((request) => ({ request, body: JSON.parse(request.rawBody.toString()) as Record<string, unknown> }))
      .filter(({ body }) => body.projectId === p);

  it('a member’s pause and resume are each told, signed, naming the member and until when', async () => {
    const { p, secret } = await project();
    const paused = await call('POST', `/webhooks/project/${p}/pause`, hsToken('alice'), { hours: 8 });
    assert.equal(paused.status, 200);
    await eventually('the start told', () => toldOf(p).length === 1);
    const resumed = await call('POST', `/webhooks/project/${p}/resume`, hsToken('alice'));
    assert.equal(resumed.status, 200);
    await eventually('the end told', () => toldOf(p).length === 2);
    // A second pause within the hour is told too: it must not hold falls unannounced.
    assert.equal((await call('POST', `/webhooks/project/${p}/pause`, hsToken('alice'), { hours: 1 })).status, 200);
    await eventually('the second start told', () => toldOf(p).length === 3);

    const [started, ended, again] = toldOf(p);
    assert.ok(independentSignatureValid(secret, started!.request), 'signed like a delivery');
    assert.deepEqual(
      toldOf(p).map(({ request }) => request.headers['x-webhook-notice']),
      ['pause-started', 'pause-ended', 'pause-started'],
    );
    assert.equal(started!.body.pausedBy, 'member alice');
    assert.equal(started!.body.pausedUntil, paused.body.pausedUntil);
    assert.equal(ended!.body.endedBy, 'member alice');
    assert.equal(ended!.body.pausedUntil, paused.body.pausedUntil);
    assert.equal(again!.body.pausedBy, 'member alice');
    // Pausing a paused webhook starts nothing: nothing more told.
    assert.equal((await call('POST', `/webhooks/project/${p}/pause`, hsToken('alice'))).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(toldOf(p).length, 3);
  });

  it('a manage link’s pause is told as the link’s and ends when the links are revoked; a member’s stays', async () => {
    const { p } = await project();
    const link = await call('POST', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'), {});
    assert.equal(link.status, 201);
    const manage = String(link.body.token);
    const paused = await call('POST', `/webhooks/project/${p}/pause`, manage, { hours: 72 });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    await eventually('the start told', () => toldOf(p).length === 1);
    assert.equal(toldOf(p)[0]!.body.pausedBy, 'a manage link (made by member alice)');
    assert.doesNotMatch(JSON.stringify(toldOf(p)[0]!.body), new RegExp(manage.slice(-20)), 'never the token');

    assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'))).status, 204);
    const after = await call('GET', `/webhooks/project/${p}`, hsToken('alice'));
    assert.deepEqual([after.body.pausedAt, after.body.pausedUntil], [null, null], 'the pause ended with the links');
    await eventually('the end told', () => toldOf(p).length === 2);
    assert.equal(toldOf(p)[1]!.body.notice, 'pause-ended');
    assert.equal(toldOf(p)[1]!.body.endedBy, 'the revocation of the portal links by member alice');
    const revoke = await t
      .db('audit_events')
      .where({ project_id: p, action: 'portal-link.revoke' })
      .first<{ changes: Record<string, unknown> }>('changes');
    assert.deepEqual(revoke.changes, {
      generation: 1,
      endedPause: { pausedAt: paused.body.pausedAt, pausedUntil: paused.body.pausedUntil, heldDeliveries: 0 },
    });

    // A member's pause is the member's: revoking the links leaves it.
    const mine = await call('POST', `/webhooks/project/${p}/pause`, hsToken('alice'), { hours: 2 });
    assert.equal(mine.status, 200);
    assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'))).status, 204);
    const still = await call('GET', `/webhooks/project/${p}`, hsToken('alice'));
    assert.equal(still.body.pausedUntil, mine.body.pausedUntil);
  });
});

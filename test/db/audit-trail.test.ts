// The audit trail as actions write it: one row per API, portal-link, codec, CLI and system action, written in the
// action's transaction (no row, no change), hash-chained per project; the limits on refused callers, audited writes
// and portal links; the trail read back through the API; and chains that no other project's open transaction blocks.
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../api/app';
import { startApi } from '../../api/server';
import { loadConfig } from '../../common/config';
import { portalLinkId, type RefusalLimits, type WriteLimits } from '../../api/http/audited-actions';
import { createSecretBox } from '../../common/crypto/secrets';
import { EncryptionCodec, parsePayloadKeyRing } from '../../common/crypto/payload-codec';
import * as store from '../../db';
import { makeCertificates } from '../support/certificates';
import { testAuditEnv, useTestAuditTrail } from '../support/audit-keys';
import { eventually } from '../support/eventually';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';
import { auditCli, type AuditColumns } from './audit-trail-fixture';

const secretBox = createSecretBox(randomBytes(32));
/** What the trail keeps of a receiver URL: its origin and the SHA-256 of the whole URL, computed here independently. */
const urlInTrail = (url: string) => ({
  origin: new URL(url).origin,
  fingerprint: `sha256:${createHash('sha256').update(url, 'utf8').digest('hex')}`,
});
const ISSUER = 'https://idp.example/';
/** How many more redeliveries Temporal starts before it stops answering (UNAVAILABLE); unlimited by default. */
let startsLeft = Infinity;
const temporalGone = () =>
  Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14, details: '', metadata: {} });

function appOn(
  db: store.Db & import('knex').Knex,
  refusalLimits?: RefusalLimits,
  options: { writeLimits?: WriteLimits; linksPerProject?: number } = {},
) {
  return createApp({
    db,
    refusalLimits,
    writeLimits: options.writeLimits,
    portal: { linksPerProject: options.linksPerProject },
    secretBox,
    logger: pino({ level: 'silent' }),
    auth: { mode: 'secret', secret: TEST_JWT_SECRET },
    sendTestEvent: () => Promise.resolve({ delivered: true, statusCode: 200, durationMs: 1, workflowId: 'wf-test' }),
    redelivery: () =>
      startsLeft-- > 0 ? Promise.resolve(`webhook-redelivery-${randomUUID()}`) : Promise.reject(temporalGone()),
    codec: {
      codec: new EncryptionCodec(parsePayloadKeyRing(`k1:${randomBytes(32).toString('base64')}`)),
      operators: { subjects: new Set(['operator-1']) },
      corsOrigins: [],
    },
  });
}

/** The digest directory of this file's CLI runs: they sign and journal into it, with the test keys. */
const digestDir = mkdtempSync(join(tmpdir(), 'webhooks-audit-'));

/** Runs the operator CLI in process against `url`. */
const cli = (args: string[], url: string) => auditCli(args, url, digestDir);

describe('audit trail: one row per action, in its transaction, hash-chained', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  let api: LocalServer;

  before(async () => {
    t = await createTestDatabase();
    api = await listenLocal(appOn(t.db).callback());
  });
  after(async () => {
    await api?.close();
    await t?.destroy();
  });

  async function project(member = 'alice'): Promise<string> {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, member);
    return projectId;
  }

  const call = async (
    method: string,
    path: string,
    options: { token?: string; body?: unknown; requestId?: string } = {},
  ) => {
    const reply = await fetch(`${api.url}${path}`, {
      method,
      headers: {
        ...bearer(options.token ?? hsToken('alice', { issuer: ISSUER })),
        ...(options.body !== undefined && { 'content-type': 'application/json' }),
        ...(options.requestId && { 'x-request-id': options.requestId }),
      },
      ...(options.body !== undefined && { body: JSON.stringify(options.body) }),
    });
    const text = await reply.text();
    return {
      status: reply.status,
      body: (text ? JSON.parse(text) : undefined) as Record<string, unknown>,
      text,
      requestId: reply.headers.get('x-request-id'),
    };
  };

  const rows = (projectId: string) => t.db<AuditColumns>('audit_events').where({ project_id: projectId }).orderBy('id');

  /** The one row the action left: the project had `before` rows, and now one more, of this action. */
  async function onlyNewRow(projectId: string, before: number, action: string): Promise<AuditColumns> {
    const all = await rows(projectId);
    assert.equal(all.length, before + 1, `one new row: ${JSON.stringify(all.slice(before))}`);
    const row = all.at(-1)!;
    assert.equal(row.action, action);
    return row;
  }

  const register = (projectId: string) =>
    call('POST', '/webhooks/register', {
      body: { projectId, url: 'https://receiver.example/a', types: ['FALL_DETECTION'] },
    });

  it('records register, update, rotate, test, delete with the member, issuer, request id and address', async () => {
    const p = await project();
    const registered = await call('POST', '/webhooks/register', {
      body: { projectId: p, url: 'https://receiver.example/a', types: ['FALL_DETECTION'] },
      requestId: 'req-register-1',
    });
    assert.equal(registered.status, 201, registered.text);
    const reg = await onlyNewRow(p, 0, 'webhook.register');
    assert.deepEqual(
      [reg.actor_kind, reg.actor_subject, reg.actor_issuer, reg.request_id, reg.outcome, reg.registration_id],
      ['member', 'alice', ISSUER, registered.requestId, 'ok', registered.body._id],
    );
    // The server's own request id, answered in X-Request-Id: never one of the caller's choosing presented as ours.
    assert.match(reg.request_id ?? '', /^[0-9a-f-]{36}$/);
    assert.match(reg.caller_address ?? '', /127\.0\.0\.1/);
    assert.deepEqual(reg.changes, {
      url: { after: urlInTrail('https://receiver.example/a') },
      types: { after: ['FALL_DETECTION'] },
      signatureScheme: { after: 'v1' },
      secretRevealed: true,
    });
    // Never the secret, anywhere in the row.
    assert.ok(!JSON.stringify(reg).includes(registered.body.secret as string));

    const updated = await call('PATCH', '/webhooks', {
      body: { projectId: p, url: 'https://attacker.example/b', types: ['FALL_DETECTION', 'VITAL_THRESHOLD'] },
    });
    assert.equal(updated.status, 200, updated.text);
    const upd = await onlyNewRow(p, 1, 'webhook.update');
    assert.deepEqual(upd.changes, {
      url: { before: urlInTrail('https://receiver.example/a'), after: urlInTrail('https://attacker.example/b') },
      types: { before: ['FALL_DETECTION'], after: ['FALL_DETECTION', 'VITAL_THRESHOLD'] },
    });

    const rotated = await call('POST', `/webhooks/project/${p}/secret/rotate`, { body: { overlapSeconds: 600 } });
    assert.equal(rotated.status, 200, rotated.text);
    const rot = await onlyNewRow(p, 2, 'webhook.secret.rotate');
    assert.equal(rot.registration_id, registered.body._id);
    assert.deepEqual(rot.changes, {
      overlapSeconds: 600,
      previousSecretExpiresAt: rotated.body.previousSecretExpiresAt,
      secretRevealed: true,
    });
    assert.ok(!JSON.stringify(rot).includes(rotated.body.secret as string));

    assert.equal((await call('POST', `/webhooks/test/project/${p}`)).status, 200);
    assert.equal((await onlyNewRow(p, 3, 'webhook.test')).registration_id, registered.body._id);

    // A read is not an action: nothing written.
    assert.equal((await call('GET', `/webhooks/project/${p}`)).status, 200);
    assert.equal((await rows(p)).length, 4);

    assert.equal((await call('DELETE', `/webhooks/project/${p}`)).status, 204);
    const del = await onlyNewRow(p, 4, 'webhook.delete');
    assert.deepEqual(del.changes, {
      url: { before: urlInTrail('https://attacker.example/b') },
      types: { before: ['FALL_DETECTION', 'VITAL_THRESHOLD'] },
    });
    assert.equal(del.registration_id, registered.body._id);
  });

  it('records a test call the test limits admit, and none they refuse (429)', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const statuses: number[] = [];
    for (let i = 0; i < 11; i += 1) statuses.push((await call('POST', `/webhooks/test/project/${p}`)).status);
    assert.deepEqual(statuses, [...Array(10).fill(200), 429]);
    assert.equal((await rows(p)).filter((row) => row.action === 'webhook.test').length, 10);
  });

  it('records redeliver (the delivery) and recover (the count)', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const ids = [0, 1].map(() => `webhook-event-${randomUUID()}`);
    for (const id of ids)
      await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    assert.equal((await call('POST', `/webhooks/project/${p}/deliveries/${ids[0]}/redeliver`)).status, 202);
    const redelivered = await onlyNewRow(p, 1, 'delivery.redeliver');
    assert.deepEqual([redelivered.delivery_id, redelivered.actor_subject], [ids[0], 'alice']);
    // Refused as not redeliverable (pending now): no row.
    assert.equal((await call('POST', `/webhooks/project/${p}/deliveries/${ids[0]}/redeliver`)).status, 409);
    assert.equal((await rows(p)).length, 2);

    const recovered = await call('POST', `/webhooks/project/${p}/deliveries/recover`, {
      body: { since: '2000-01-01T00:00:00Z' },
    });
    assert.equal(recovered.status, 202, recovered.text);
    assert.deepEqual(recovered.body, { count: 1 });
    assert.deepEqual((await onlyNewRow(p, 2, 'deliveries.recover')).changes, {
      since: '2000-01-01T00:00:00Z',
      count: 1,
    });
  });

  it('records a redelivery whose start fails as failed too, and a recovery stopped part-way with the count started', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const ids = [0, 1, 2].map(() => `webhook-event-${randomUUID()}`);
    for (const id of ids)
      await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    try {
      // Asked for and claimed (its row, ok), then Temporal refused the start: a second row, failed, and the delivery
      // back as it was.
      startsLeft = 0;
      assert.equal((await call('POST', `/webhooks/project/${p}/deliveries/${ids[0]}/redeliver`)).status, 503);
      const [asked, failed] = (await rows(p)).slice(1);
      assert.deepEqual(
        [asked, failed].map((row) => [row?.action, row?.outcome, row?.delivery_id, row?.changes]),
        [
          ['delivery.redeliver', 'ok', ids[0], null],
          ['delivery.redeliver', 'failed', ids[0], { status: 503 }],
        ],
      );
      assert.equal((await store.findDelivery(t.db, p, ids[0]!))?.status, 'failed');

      // Claimed with its row (three), one start, then Temporal gone: a second row, failed, says how many started and
      // what stopped it, and the two not started are failed again.
      startsLeft = 1;
      const stopped = await call('POST', `/webhooks/project/${p}/deliveries/recover`, {
        body: { since: '2000-01-01T00:00:00Z' },
      });
      assert.equal(stopped.status, 503, stopped.text);
      assert.deepEqual(
        (await rows(p)).slice(3).map((row) => [row.action, row.outcome, row.changes]),
        [
          ['deliveries.recover', 'ok', { since: '2000-01-01T00:00:00Z', count: 3 }],
          ['deliveries.recover', 'failed', { since: '2000-01-01T00:00:00Z', count: 1, stoppedWith: 503 }],
        ],
      );
      const statuses = await Promise.all(ids.map(async (id) => (await store.findDelivery(t.db, p, id))?.status));
      assert.deepEqual(statuses.sort(), ['failed', 'failed', 'pending']);
    } finally {
      startsLeft = Infinity;
    }
  });

  it('writes the recovery’s row with its claim: when the row cannot be written, no redelivery starts', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const ids = [0, 1].map(() => `webhook-event-${randomUUID()}`);
    for (const id of ids)
      await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    await t.db.raw(`CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await t.db.raw(
      'CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit()',
    );
    startsLeft = 100;
    try {
      const refused = await call('POST', `/webhooks/project/${p}/deliveries/recover`, {
        body: { since: '2000-01-01T00:00:00Z' },
      });
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.detail, 'The audit trail could not be written; nothing was changed. Try again later');
      assert.equal(startsLeft, 100, 'no redelivery started without its row');
    } finally {
      startsLeft = Infinity;
      await t.db.raw('DROP TRIGGER refuse_audit ON audit_events');
      await t.db.raw('DROP FUNCTION refuse_audit()');
    }
    for (const id of ids) assert.equal((await store.findDelivery(t.db, p, id))?.status, 'failed', 'nothing claimed');
    assert.equal((await rows(p)).length, 1, 'only the registration');
  });

  it('records a portal link minted and revoked, and what the link did under its own id and capabilities', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const minted = await call('POST', `/webhooks/project/${p}/portal-sessions`, {
      body: { capabilities: ['read', 'manage'], expiresInSeconds: 600 },
    });
    assert.equal(minted.status, 201, minted.text);
    const mint = await onlyNewRow(p, 1, 'portal-link.create');
    const linkId = portalLinkId(minted.body.token as string);
    assert.deepEqual(mint.changes, {
      portalLinkId: linkId,
      capabilities: ['read', 'manage'],
      generation: 0,
      expiresAt: minted.body.expiresAt,
    });
    assert.ok(!JSON.stringify(mint).includes(minted.body.token as string), 'never the token');

    const viaLink = await call('PATCH', '/webhooks', {
      token: minted.body.token as string,
      body: { projectId: p, url: 'https://receiver.example/via-link' },
    });
    assert.equal(viaLink.status, 200, viaLink.text);
    const used = await onlyNewRow(p, 2, 'webhook.update');
    assert.deepEqual(
      [used.actor_kind, used.actor_subject, used.portal_link_id, used.portal_capabilities],
      ['portal-link', 'alice', linkId, ['read', 'manage']],
    );

    assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`)).status, 204);
    assert.deepEqual((await onlyNewRow(p, 3, 'portal-link.revoke')).changes, { generation: 1 });
  });

  it('records custom headers by name on register and update (set, replaced, removed), never a value', async () => {
    const p = await project();
    const values = ['key-4b1d2c9e-value', 'tenant-77aa31-value', 'key-rotated-9f00e1-value'];
    const registered = await call('POST', '/webhooks/register', {
      body: {
        projectId: p,
        url: 'https://receiver.example/a',
        types: ['FALL_DETECTION'],
        headers: { 'X-Api-Key': values[0], 'X-Tenant': values[1] },
      },
    });
    assert.equal(registered.status, 201, registered.text);
    const reg = await onlyNewRow(p, 0, 'webhook.register');
    assert.deepEqual(reg.changes?.headers, { after: ['X-Api-Key', 'X-Tenant'] });

    const replaced = await call('PATCH', '/webhooks', { body: { projectId: p, headers: { 'X-Api-Key': values[2] } } });
    assert.equal(replaced.status, 200, replaced.text);
    assert.deepEqual((await onlyNewRow(p, 1, 'webhook.update')).changes, {
      headers: { before: ['X-Api-Key', 'X-Tenant'], after: ['X-Api-Key'] },
    });
    // A PATCH without headers leaves them, and says nothing of them.
    assert.equal(
      (await call('PATCH', '/webhooks', { body: { projectId: p, types: ['VITAL_THRESHOLD'] } })).status,
      200,
    );
    assert.deepEqual((await onlyNewRow(p, 2, 'webhook.update')).changes, {
      types: { before: ['FALL_DETECTION'], after: ['VITAL_THRESHOLD'] },
    });
    assert.equal((await call('PATCH', '/webhooks', { body: { projectId: p, headers: {} } })).status, 200);
    assert.deepEqual((await onlyNewRow(p, 3, 'webhook.update')).changes, {
      headers: { before: ['X-Api-Key'], after: [] },
    });
    const written = JSON.stringify(await rows(p));
    for (const value of values) assert.ok(!written.includes(value), `never the value ${value}`);
  });

  it('keeps no path or query of a receiver URL: its origin and a fingerprint that shows a diversion', async () => {
    const p = await project();
    const capability = `cap-${randomUUID()}`;
    const first = `https://hooks.receiver.example:8443/in/${capability}?token=${capability}`;
    const diverted = `https://hooks.receiver.example:8443/in/other-${capability}`;
    const body = { projectId: p, url: first, types: ['FALL_DETECTION'] };
    assert.equal((await call('POST', '/webhooks/register', { body })).status, 201);
    assert.equal((await call('PATCH', '/webhooks', { body: { projectId: p, url: diverted } })).status, 200);
    const noticeUrl = `https://oncall.example/notices/${capability}`;
    const contacts = await call('PUT', `/webhooks/project/${p}/notifications`, {
      body: { url: noticeUrl, emails: ['oncall@hospital.example'] },
    });
    assert.equal(contacts.status, 200, contacts.text);
    assert.equal((await call('DELETE', `/webhooks/project/${p}`)).status, 204);
    const trail = (await rows(p)).filter((row) => row.action !== 'notifications.update');
    const notices = (await rows(p)).find((row) => row.action === 'notifications.update')!;
    assert.deepEqual(notices.changes, { url: urlInTrail(noticeUrl), emails: 1 });
    assert.ok(!JSON.stringify(notices).includes(capability), 'nor of the notification URL');
    assert.deepEqual(
      trail.map((row) => [row.action, row.changes?.url]),
      [
        ['webhook.register', { after: urlInTrail(first) }],
        ['webhook.update', { before: urlInTrail(first), after: urlInTrail(diverted) }],
        ['webhook.delete', { before: urlInTrail(diverted) }],
      ],
    );
    assert.notEqual(urlInTrail(first).fingerprint, urlInTrail(diverted).fingerprint, 'the diversion shows');
    assert.ok(!JSON.stringify(trail).includes(capability), 'never the path or the query');
    assert.ok(!JSON.stringify(trail).includes('/in/'), 'never the path');
  });

  it('a PATCH that changes nothing writes nothing: no row, no updated_at; 200 with the registration', async () => {
    const p = await project();
    const certs = makeCertificates();
    const registered = await call('POST', '/webhooks/register', {
      body: {
        projectId: p,
        url: 'https://receiver.example/a',
        types: ['FALL_DETECTION', 'VITAL_THRESHOLD'],
        headers: { 'X-Api-Key': 'k-same' },
        clientCertificate: certs.client,
      },
    });
    assert.equal(registered.status, 201, registered.text);
    const stored = await t.db('webhook_registrations').where({ project_id: p }).first();
    const same = [
      { url: 'https://receiver.example/a' },
      { types: ['VITAL_THRESHOLD', 'FALL_DETECTION'] },
      { clientCertificate: certs.client },
      { url: 'https://receiver.example/a', types: ['FALL_DETECTION', 'VITAL_THRESHOLD'] },
    ];
    for (const change of same) {
      const reply = await call('PATCH', '/webhooks', { body: { projectId: p, ...change } });
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual({ ...reply.body, secret: registered.body.secret }, registered.body, JSON.stringify(change));
    }
    assert.equal((await rows(p)).length, 1, 'only the register row');
    assert.deepEqual(await t.db('webhook_registrations').where({ project_id: p }).first(), stored, 'nothing written');
    // Headers given are written anew even when equal: telling equal values apart would disclose them to a guesser.
    const changed = await call('PATCH', '/webhooks', {
      body: { projectId: p, url: 'https://receiver.example/a', headers: { 'X-Api-Key': 'k-same' } },
    });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual((await onlyNewRow(p, 1, 'webhook.update')).changes, {
      headers: { before: ['X-Api-Key'], after: ['X-Api-Key'] },
    });
  });

  it('records what a manage link did (rotate, test, redeliver, recover) under its id, capabilities and member', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const minted = await call('POST', `/webhooks/project/${p}/portal-sessions`, { body: {} });
    assert.equal(minted.status, 201, minted.text);
    const token = minted.body.token as string;
    const failed = [0, 1].map(() => `webhook-event-${randomUUID()}`);
    for (const id of failed)
      await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    const requestIds: (string | null)[] = [];
    const viaLink = async (method: string, path: string, body?: unknown) => {
      const reply = await call(method, path, {
        token,
        requestId: `req-link-${path.split('/').pop()}`,
        ...(body !== undefined && { body }),
      });
      requestIds.push(reply.requestId);
      return reply;
    };

    const rotated = await viaLink('POST', `/webhooks/project/${p}/secret/rotate`, { overlapSeconds: 60 });
    assert.equal(rotated.status, 200, rotated.text);
    assert.equal((await viaLink('POST', `/webhooks/test/project/${p}`)).status, 200);
    assert.equal((await viaLink('POST', `/webhooks/project/${p}/deliveries/${failed[0]}/redeliver`)).status, 202);
    const recovered = await viaLink('POST', `/webhooks/project/${p}/deliveries/recover`, {
      since: '2000-01-01T00:00:00Z',
    });
    assert.equal(recovered.status, 202, recovered.text);
    const written = (await rows(p)).slice(2);
    assert.deepEqual(
      written.map((row) => [
        row.action,
        row.actor_kind,
        row.actor_subject,
        row.portal_link_id,
        row.portal_capabilities,
        row.request_id,
      ]),
      ['webhook.secret.rotate', 'webhook.test', 'delivery.redeliver', 'deliveries.recover'].map((action, i) => [
        action,
        'portal-link',
        'alice',
        portalLinkId(token),
        ['read', 'manage'],
        requestIds[i],
      ]),
    );
    assert.equal(written[0]!.changes?.secretRevealed, true, 'the secret shown once, through the link');
    assert.equal(written[2]!.delivery_id, failed[0]);
    assert.deepEqual(written[3]!.changes, { since: '2000-01-01T00:00:00Z', count: 1 });
    const all = JSON.stringify(written);
    assert.ok(!all.includes(token) && !all.includes(rotated.body.secret as string), 'neither the token nor the secret');
  });

  it('records what a read-only link was refused (an action, the trail) under its id and capabilities', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const minted = await call('POST', `/webhooks/project/${p}/portal-sessions`, { body: { capabilities: ['read'] } });
    assert.equal(minted.status, 201, minted.text);
    const token = minted.body.token as string;
    assert.equal((await call('POST', `/webhooks/test/project/${p}`, { token })).status, 403);
    assert.equal((await call('GET', `/webhooks/project/${p}/audit`, { token })).status, 403);
    const refused = (await rows(p)).slice(2);
    assert.deepEqual(
      refused.map((row) => [
        row.action,
        row.outcome,
        row.actor_kind,
        row.actor_subject,
        row.portal_link_id,
        row.portal_capabilities,
        row.changes,
      ]),
      [
        ['POST', '/webhooks/test/project/:projectId'],
        ['GET', '/webhooks/project/:projectId/audit'],
      ].map(([method, route]) => [
        'access.refused',
        'refused',
        'portal-link',
        'alice',
        portalLinkId(token),
        ['read'],
        { method, route },
      ]),
    );
  });

  it('files a stranger’s 403 in the operators’ trail, never the named project’s; a 401 writes nothing', async () => {
    const p = await project();
    const refused = await call('DELETE', `/webhooks/project/${p}`, {
      token: hsToken('mallory', { issuer: ISSUER }),
      requestId: 'req-chosen-by-mallory',
    });
    assert.equal(refused.status, 403);
    assert.deepEqual(await rows(p), [], 'nothing in the project’s trail (its Activity view)');
    const row = await t.db<AuditColumns>('audit_events').where({ request_id: refused.requestId }).first();
    assert.deepEqual(
      [row?.action, row?.outcome, row?.project_id, row?.actor_subject, row?.actor_issuer, row?.changes],
      [
        'access.refused',
        'refused',
        null,
        'mallory',
        ISSUER,
        { method: 'DELETE', route: '/webhooks/project/:projectId', namedProjectId: p },
      ],
    );
    assert.equal(
      await t.db('audit_events').where({ request_id: 'req-chosen-by-mallory' }).first(),
      undefined,
      'the caller’s request id is never recorded as ours',
    );
    const operatorView = await call('GET', `/audit?actor=mallory`, { token: hsToken('operator-1') });
    assert.ok(
      (operatorView.body.items as { changes?: { namedProjectId?: string } }[]).some(
        (item) => item.changes?.namedProjectId === p,
      ),
      'the operators read it',
    );
    const before = await t.db('audit_events').count<{ count: string }[]>('* as count');
    const unauthenticated = await call('DELETE', `/webhooks/project/${p}`, { token: 'not-a-token' });
    assert.equal(unauthenticated.status, 401);
    assert.deepEqual(await t.db('audit_events').count<{ count: string }[]>('* as count'), before);
  });

  it('a caller refused more than REFUSED_CALLS_PER_MINUTE times is answered 429 before any route runs, writing nothing', async () => {
    let clock = 0;
    const limited = await listenLocal(appOn(t.db, { perMinute: 3, clock: () => clock }).callback());
    try {
      const p = await project();
      const as = (subject: string) => ({
        headers: bearer(hsToken(subject, { issuer: ISSUER })),
        method: 'DELETE',
      });
      const refusedRows = async () =>
        (await t.db<AuditColumns>('audit_events').where({ action: 'access.refused' })).filter(
          (row) => row.changes?.namedProjectId === p,
        ).length;
      const path = `${limited.url}/webhooks/project/${p}`;
      for (let i = 0; i < 3; i += 1) assert.equal((await fetch(path, as('mallory'))).status, 403);
      assert.equal(await refusedRows(), 3);
      const throttled = await fetch(path, as('mallory'));
      assert.equal(throttled.status, 429);
      assert.equal(throttled.headers.get('retry-after'), '20', 'a refusal a minute / 3 comes back every 20 s');
      assert.equal(
        ((await throttled.json()) as { detail: string }).detail,
        'Too many refused calls: at most 3 a minute per caller; this caller reached the limit',
      );
      assert.equal(await refusedRows(), 3, 'the 429 writes nothing');
      // Another caller has a budget of its own; a member is not refused at all, so never limited.
      assert.equal((await fetch(path, as('eve'))).status, 403);
      assert.equal((await fetch(`${limited.url}/webhooks/project/${p}`, { headers: as('alice').headers })).status, 404);
      clock += 20_000;
      assert.equal((await fetch(path, as('mallory'))).status, 403, 'one refusal refilled');
      assert.equal(await refusedRows(), 5);
    } finally {
      await limited.close();
    }
  });

  it('a caller past AUDITED_WRITES_PER_MINUTE is answered 429 with Retry-After and writes nothing; others go on', async () => {
    let clock = 0;
    const limited = await listenLocal(
      appOn(t.db, undefined, { writeLimits: { perMinute: 3, clock: () => clock } }).callback(),
    );
    try {
      const p = await project();
      await store.addMember(t.db, p, 'bob');
      const patch = (types: string[], token = hsToken('alice', { issuer: ISSUER })) =>
        fetch(`${limited.url}/webhooks`, {
          method: 'PATCH',
          headers: { ...bearer(token), 'content-type': 'application/json' },
          body: JSON.stringify({ projectId: p, types }),
        });
      const register = await fetch(`${limited.url}/webhooks/register`, {
        method: 'POST',
        headers: { ...bearer(hsToken('alice', { issuer: ISSUER })), 'content-type': 'application/json' },
        body: JSON.stringify({ projectId: p, url: 'https://receiver.example/a', types: ['FALL_DETECTION'] }),
      });
      assert.equal(register.status, 201);
      const toggles = [['VITAL_THRESHOLD'], ['FALL_DETECTION']];
      for (let i = 0; i < 2; i += 1) assert.equal((await patch(toggles[i % 2]!)).status, 200);
      const before = await rows(p);
      const registration = await store.findRegistration(t.db, p);
      const throttled = await patch(['VITAL_THRESHOLD']);
      assert.equal(throttled.status, 429);
      assert.match(throttled.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.equal(throttled.headers.get('retry-after'), '20', 'a write a minute / 3 comes back every 20 s');
      assert.equal(
        ((await throttled.json()) as { detail: string }).detail,
        'Too many changes: at most 3 write calls a minute per caller; this caller reached the limit',
      );
      assert.deepEqual(await rows(p), before, 'the 429 writes no row');
      assert.deepEqual((await store.findRegistration(t.db, p))?.types, registration?.types, 'and changes nothing');
      // Reads are not writes; another member, and another issuer's same subject, each have a budget of their own.
      assert.equal(
        (await fetch(`${limited.url}/webhooks/project/${p}`, { headers: bearer(hsToken('alice', { issuer: ISSUER })) }))
          .status,
        200,
      );
      assert.equal((await patch(['VITAL_THRESHOLD'], hsToken('bob'))).status, 200);
      // A portal link is a caller of its own, apart from the member who made it.
      const minted = await fetch(`${limited.url}/webhooks/project/${p}/portal-sessions`, {
        method: 'POST',
        headers: { ...bearer(hsToken('bob')), 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(minted.status, 201);
      const link = ((await minted.json()) as { token: string }).token;
      assert.equal((await patch(['FALL_DETECTION'], link)).status, 200);
      assert.equal((await patch(['VITAL_THRESHOLD'], hsToken('bob'))).status, 200);
      assert.equal((await patch(['FALL_DETECTION'], hsToken('bob'))).status, 429, 'bob spent his three');
      clock += 20_000;
      assert.equal((await patch(['FALL_DETECTION'])).status, 200, 'one write refilled');
      assert.equal(
        (await rows(p)).length,
        before.length + 5,
        'bob’s two changes, his link, the link’s change, alice’s',
      );
    } finally {
      await limited.close();
    }
  });

  it('a project holds at most PORTAL_LINKS_PER_PROJECT live links: one more is 409, stored nowhere', async () => {
    const limited = await listenLocal(appOn(t.db, undefined, { linksPerProject: 2 }).callback());
    try {
      const p = await project();
      const mint = () =>
        fetch(`${limited.url}/webhooks/project/${p}/portal-sessions`, {
          method: 'POST',
          headers: { ...bearer(hsToken('alice', { issuer: ISSUER })), 'content-type': 'application/json' },
          body: JSON.stringify({ capabilities: ['read'], expiresInSeconds: 600 }),
        });
      for (let i = 0; i < 2; i += 1) assert.equal((await mint()).status, 201);
      const before = await rows(p);
      const refused = await mint();
      assert.equal(refused.status, 409);
      assert.match(refused.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.match(
        ((await refused.json()) as { detail: string }).detail,
        /already has 2 live portal links.*PORTAL_LINKS_PER_PROJECT/,
      );
      assert.deepEqual(await rows(p), before, 'no row of a link that was not made');
      assert.equal((await t.db('portal_links').where({ project_id: p })).length, 2);
      // Another project has room of its own; revoking the project's links makes room again.
      const other = await project();
      const elsewhere = await fetch(`${limited.url}/webhooks/project/${other}/portal-sessions`, {
        method: 'POST',
        headers: { ...bearer(hsToken('alice', { issuer: ISSUER })), 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(elsewhere.status, 201);
      const revoked = await fetch(`${limited.url}/webhooks/project/${p}/portal-sessions`, {
        method: 'DELETE',
        headers: bearer(hsToken('alice', { issuer: ISSUER })),
      });
      assert.equal(revoked.status, 204);
      assert.equal((await mint()).status, 201);
    } finally {
      await limited.close();
    }
  });

  it('counts links made at once one after another: never more than the limit', async () => {
    const limited = await listenLocal(appOn(t.db, undefined, { linksPerProject: 3 }).callback());
    try {
      const p = await project();
      const statuses = await Promise.all(
        Array.from({ length: 8 }, () =>
          fetch(`${limited.url}/webhooks/project/${p}/portal-sessions`, {
            method: 'POST',
            headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
            body: '{}',
          }).then((reply) => reply.status),
        ),
      );
      assert.deepEqual(statuses.sort(), [201, 201, 201, 409, 409, 409, 409, 409]);
      assert.equal((await rows(p)).filter((row) => row.action === 'portal-link.create').length, 3);
    } finally {
      await limited.close();
    }
  });

  it('records every codec encode and decode (operator, payload count, key ids, namespace) and a refused one', async () => {
    const codecRows = () => t.db<AuditColumns>('audit_events').where('action', 'like', 'codec.%').orderBy('id');
    const before = (await codecRows()).length;
    const plain = {
      metadata: { encoding: Buffer.from('json/plain').toString('base64') },
      data: Buffer.from('{"firstName":"Ada"}').toString('base64'),
    };
    const operator = hsToken('operator-1', { issuer: ISSUER });
    const codecCall = (path: string, payloads: unknown[], token = operator) =>
      fetch(`${api.url}${path}`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json', 'x-namespace': 'default' },
        body: JSON.stringify({ payloads }),
      });
    const encoded = await codecCall('/codec/encode', [plain, plain]);
    assert.equal(encoded.status, 200);
    const sealed = ((await encoded.json()) as { payloads: unknown[] }).payloads;
    assert.equal((await codecCall('/codec/decode', sealed)).status, 200);
    assert.equal((await codecCall('/codec/decode', sealed, hsToken('alice'))).status, 403);
    const written = (await codecRows()).slice(before);
    assert.deepEqual(
      written.map((row) => [row.action, row.outcome, row.actor_subject, row.changes]),
      [
        ['codec.encode', 'ok', 'operator-1', { payloads: 2, keyIds: ['k1'], namespace: 'default' }],
        ['codec.decode', 'ok', 'operator-1', { payloads: 2, keyIds: ['k1'], namespace: 'default' }],
      ],
    );
    const refused = await t.db<AuditColumns>('audit_events').orderBy('id', 'desc').first();
    assert.deepEqual(
      [refused?.action, refused?.outcome, refused?.actor_subject, refused?.changes],
      ['access.refused', 'refused', 'alice', { method: 'POST', route: '/codec/decode' }],
    );
    assert.ok(!JSON.stringify(written).includes('Ada'), 'never a payload');
  });

  it('lets an operator read the whole trail (filters, cursor paging) and a member only their project', async () => {
    const mine = await project();
    const theirs = await project('bob');
    assert.equal((await register(mine)).status, 201);
    assert.equal((await call('POST', `/webhooks/project/${mine}/secret/rotate`, { body: {} })).status, 200);
    assert.equal(
      (
        await call('POST', '/webhooks/register', {
          token: hsToken('bob'),
          body: { projectId: theirs, url: 'https://receiver.example/b', types: ['FALL_DETECTION'] },
        })
      ).status,
      201,
    );
    const operator = hsToken('operator-1');
    type Page = {
      items: { id: string; action: string; projectId?: string; actor: { subject?: string } }[];
      nextCursor?: string;
    };

    const own = await call('GET', `/webhooks/project/${mine}/audit`);
    assert.equal(own.status, 200, own.text);
    const ownPage = own.body as unknown as Page;
    assert.deepEqual(
      ownPage.items.map((item) => [item.action, item.projectId]),
      [
        ['webhook.secret.rotate', mine],
        ['webhook.register', mine],
      ],
    );
    assert.equal((await call('GET', `/webhooks/project/${theirs}/audit`)).status, 403);
    assert.equal((await call('GET', '/audit')).status, 403, 'a member is not an operator');

    const first = await call('GET', `/audit?projectId=${mine}&limit=1`, { token: operator });
    assert.equal(first.status, 200, first.text);
    const firstPage = first.body as unknown as Page;
    assert.deepEqual(
      firstPage.items.map((item) => item.action),
      ['webhook.secret.rotate'],
    );
    assert.ok(firstPage.nextCursor);
    const second = (
      await call('GET', `/audit?projectId=${mine}&limit=1&cursor=${firstPage.nextCursor}`, { token: operator })
    ).body as unknown as Page;
    assert.deepEqual([second.items.map((item) => item.action), second.nextCursor], [['webhook.register'], undefined]);
    const bobs = (await call('GET', `/audit?actor=bob&action=webhook.register`, { token: operator }))
      .body as unknown as Page;
    assert.deepEqual(
      bobs.items.map((item) => [item.projectId, item.actor.subject]),
      [[theirs, 'bob']],
    );
    const future = (await call('GET', '/audit?since=2999-01-01T00:00:00Z', { token: operator }))
      .body as unknown as Page;
    assert.deepEqual(future.items, []);
    const bad = await call('GET', '/audit?limit=0&cursor=nope', { token: operator });
    assert.equal(bad.status, 400);
    assert.match(
      bad.body.detail as string,
      /limit must be an integer from 1 to 200; cursor is not one this API returned/,
    );
  });

  it('records project and member changes through the CLI with the OS user; a repeat that changes nothing writes none', async () => {
    const p = `p-${randomUUID().slice(0, 8)}`;
    for (const args of [
      ['project', 'add', p],
      ['project', 'add', p],
      ['member', 'add', p, 'carol'],
      ['member', 'add', p, 'carol'],
      ['member', 'remove', p, 'carol'],
    ]) {
      const ran = await cli(args, t.url);
      assert.equal(ran.code, 0, ran.stderr);
    }
    assert.deepEqual(
      (await rows(p)).map((row) => [row.action, row.actor_kind, row.actor_subject, row.changes]),
      [
        ['project.add', 'cli', userInfo().username, null],
        ['member.add', 'cli', userInfo().username, { userId: 'carol' }],
        ['member.remove', 'cli', userInfo().username, { userId: 'carol' }],
      ],
    );
  });

  it('records the end of a rotation overlap as a system action, once', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    assert.equal(
      (await call('POST', `/webhooks/project/${p}/secret/rotate`, { body: { overlapSeconds: 600 } })).status,
      200,
    );
    await t
      .db('webhook_registrations')
      .where({ project_id: p })
      .update({ previous_secret_expires_at: new Date(0) });
    const registrationId = (await store.findRegistration(t.db, p))!.id;
    assert.equal(await store.eraseExpiredPreviousSecrets(t.db, registrationId), 1);
    assert.equal(await store.eraseExpiredPreviousSecrets(t.db, registrationId), 0);
    const row = await onlyNewRow(p, 2, 'webhook.secret.overlap-ended');
    assert.deepEqual([row.actor_kind, row.actor_subject, row.registration_id], ['system', null, registrationId]);
  });

  it('fails the action with 503 and changes nothing when the audit write fails', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const other = await project();
    await t.db.raw(`CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await t.db.raw(
      'CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit()',
    );
    try {
      const updated = await call('PATCH', '/webhooks', { body: { projectId: p, url: 'https://attacker.example/x' } });
      assert.equal(updated.status, 503, updated.text);
      assert.equal(updated.body.detail, 'The audit trail could not be written; nothing was changed. Try again later');
      assert.equal((await store.findRegistration(t.db, p))?.url, 'https://receiver.example/a');
      assert.equal((await register(other)).status, 503);
      assert.equal(await store.findRegistration(t.db, other), undefined);
      const sealed = (await store.findRegistration(t.db, p))?.secretSealed;
      assert.equal((await call('POST', `/webhooks/project/${p}/secret/rotate`, { body: {} })).status, 503);
      assert.equal((await store.findRegistration(t.db, p))?.secretSealed, sealed);
      assert.equal((await call('DELETE', `/webhooks/project/${p}`)).status, 503);
      assert.ok(await store.findRegistration(t.db, p));
      assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`)).status, 503);
      assert.equal(await store.portalLinkGeneration(t.db, p), 0);
    } finally {
      await t.db.raw('DROP TRIGGER refuse_audit ON audit_events');
      await t.db.raw('DROP FUNCTION refuse_audit()');
    }
    assert.equal((await rows(p)).length, 1, 'only the registration');
  });

  it('writes through the writer the bench gives createApp instead (no row), which no configuration sets', async () => {
    const p = await project();
    const given: store.AuditEventInput[] = [];
    const benchApp = createApp({
      db: t.db,
      secretBox,
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.resolve({ delivered: true, statusCode: 200, durationMs: 1, workflowId: 'wf-test' }),
      auditWriter: (_db, event) => Promise.resolve(void given.push(event)),
    });
    const local = await listenLocal(benchApp.callback());
    try {
      const reply = await fetch(`${local.url}/webhooks/register`, {
        method: 'POST',
        headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
        body: JSON.stringify({ projectId: p, url: 'https://receiver.example/a', types: ['FALL_DETECTION'] }),
      });
      assert.equal(reply.status, 201);
    } finally {
      await local.close();
    }
    assert.deepEqual(
      given.map((event) => [event.action, event.projectId, event.actor.subject]),
      [['webhook.register', p, 'alice']],
    );
    assert.equal((await rows(p)).length, 0, 'no row through the bench’s writer');
    // The same action on this suite's app (as a server builds it) writes its row.
    assert.equal(
      (await call('PATCH', '/webhooks', { body: { projectId: p, types: ['VITAL_THRESHOLD'] } })).status,
      200,
    );
    assert.equal((await onlyNewRow(p, 0, 'webhook.update')).actor_subject, 'alice');
    // A server started from its configuration (startApi) writes the row, chained with the configured key and
    // journaled into the configured directory.
    const dir = mkdtempSync(join(tmpdir(), 'webhooks-audit-'));
    const hmacKeys = `cfg-1:${randomBytes(32).toString('hex')}`;
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: t.url,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
        ...testAuditEnv(dir),
        AUDIT_HMAC_KEYS: hmacKeys,
      },
      { database: true, auth: true, audit: true },
    );
    const started = await startApi(config, pino({ level: 'silent' }), {
      sendTestEvent: () => Promise.reject(new Error('not used')),
    });
    try {
      const { port } = started.server.address() as AddressInfo;
      const reply = await fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: 'PATCH',
        headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
        body: JSON.stringify({ projectId: p, types: ['FALL_DETECTION'] }),
      });
      assert.equal(reply.status, 200);
    } finally {
      await started.close();
      useTestAuditTrail();
    }
    const row = await onlyNewRow(p, 1, 'webhook.update');
    const keyed = await t.db('audit_events').where({ id: row.id }).first('key_id', 'chain', 'seq', 'hash');
    assert.deepEqual([keyed.key_id, keyed.chain, String(keyed.seq)], ['cfg-1', `project:${p}`, '2']);
    const journal = readdirSync(dir)
      .filter((name) => name.startsWith('journal-'))
      .flatMap((name) => readFileSync(join(dir, name), 'utf8').trim().split('\n'))
      .map((line) => JSON.parse(line) as store.AuditJournalLine);
    assert.deepEqual(
      journal.map((line) => [line.chain, line.seq, line.hash]),
      [[`project:${p}`, '2', keyed.hash]],
    );
  });

  it('keeps one valid chain with two API processes (two pools) writing at once', async () => {
    const second = store.createDb(t.url);
    const other = await listenLocal(appOn(second).callback());
    try {
      const projects = await Promise.all(Array.from({ length: 12 }, () => project()));
      const results = await Promise.all(
        projects.map((p, i) =>
          fetch(`${i % 2 ? other.url : api.url}/webhooks/register`, {
            method: 'POST',
            headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
            body: JSON.stringify({ projectId: p, url: 'https://receiver.example/a', types: ['FALL_DETECTION'] }),
          }).then((reply) => reply.status),
        ),
      );
      assert.deepEqual(
        results,
        projects.map(() => 201),
      );
      const report = await store.verifyAuditChain(t.db);
      assert.equal(report.fault, undefined);
      for (const p of projects) assert.equal((await rows(p)).length, 1);
    } finally {
      await other.close();
      await second.destroy();
    }
    const verified = await cli(['audit', 'verify'], t.url);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /^Audit trail intact: \d+ rows/);
  });
});

describe('audit chains: no project waits on another’s trail, the delivery path on no API action', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  const secretBox = createSecretBox(randomBytes(32));

  before(async () => {
    t = await createTestDatabase();
  });
  after(() => t?.destroy());

  /** Resolves with `work`'s result, or fails naming `what` once `ms` have passed (blocked behind a lock). */
  const within = <T>(what: string, ms: number, work: Promise<T>) =>
    Promise.race([
      work,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${what} waited more than ${ms} ms`)), ms).unref(),
      ),
    ]);

  it('project A’s open audited transaction blocks neither B’s audited write nor a breaker transition of A or B', async () => {
    const [a, b] = ['pa', 'pb'].map((p) => `${p}-${randomUUID().slice(0, 8)}`) as [string, string];
    const registrations: string[] = [];
    for (const projectId of [a, b]) {
      await store.addProject(t.db, projectId);
      const made = await store.createRegistration(t.db, secretBox, {
        projectId,
        url: 'https://receiver.example/a',
        types: ['FALL_DETECTION'],
      });
      registrations.push(made!.row.id);
    }
    const thresholds = { failureThreshold: 1, openMs: 100, maxOpenMs: 100 };
    const failure = { message: 'HTTP 500', statusCode: 500 };
    // A's API action, its row written and its transaction still open (a slow request).
    const member: store.AuditActor = { kind: 'member', subject: 'alice' };
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let written!: () => void;
    const rowWritten = new Promise<void>((resolve) => (written = resolve));
    const open = t.db.transaction(async (trx) => {
      await store.appendAuditEvent(trx, { actor: member, action: 'webhook.update', outcome: 'ok', projectId: a });
      written();
      await held;
    });
    try {
      await rowWritten;
      await within(
        'B’s audited write',
        5_000,
        store.appendAuditEvent(t.db, { actor: member, action: 'webhook.update', outcome: 'ok', projectId: b }),
      );
      for (const registrationId of registrations) {
        // Opens the breaker (breaker.open), then, once its period is over, the first probe's claim (breaker.half-open).
        await within('a breaker opening', 5_000, store.recordFailure(t.db, registrationId, thresholds, failure));
        const admitted = await eventually('the open period to end', async () => {
          const admission = await within('claimFirstProbe', 5_000, store.admitAttempt(t.db, registrationId, 10_000));
          return admission.state === 'probe' && admission;
        });
        assert.equal(admitted.state, 'probe');
      }
    } finally {
      release();
      await open;
    }
    const actions = await t
      .db<AuditColumns>('audit_events')
      .whereIn('project_id', [a, b])
      .orderBy('id')
      .select('project_id', 'action');
    assert.deepEqual(actions.map((row) => [row.project_id === a ? 'A' : 'B', row.action]).sort(), [
      ['A', 'breaker.half-open'],
      ['A', 'breaker.open'],
      ['A', 'webhook.update'],
      ['B', 'breaker.half-open'],
      ['B', 'breaker.open'],
      ['B', 'webhook.update'],
    ]);
    // A member reads the whole trail of their project: the API's rows and the delivery path's.
    assert.deepEqual((await store.listAuditEvents(t.db, { projectId: a, limit: 10 })).map((row) => row.action).sort(), [
      'breaker.half-open',
      'breaker.open',
      'webhook.update',
    ]);
    assert.deepEqual((await store.verifyAuditChain(t.db)).faults, []);
  });
});

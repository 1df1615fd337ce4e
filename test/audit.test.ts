import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createApp } from '../api/app';
import { portalLinkId, type RefusalLimits } from '../api/audit';
import { main } from '../cli';
import { createSecretBox } from '../common/secrets';
import { EncryptionCodec, parsePayloadKeyRing } from '../common/payload-codec';
import * as store from '../db';
import { listenLocal, type LocalServer } from './support/jwks-server';
import { createTestDatabase, type TestDatabase } from './support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from './support/tokens';

interface AuditColumns {
  id: string;
  actor_kind: string;
  actor_subject: string | null;
  actor_issuer: string | null;
  portal_link_id: string | null;
  portal_capabilities: string[] | null;
  request_id: string | null;
  caller_address: string | null;
  action: string;
  outcome: string;
  project_id: string | null;
  registration_id: string | null;
  delivery_id: string | null;
  changes: Record<string, unknown> | null;
}

const secretBox = createSecretBox(randomBytes(32));
const ISSUER = 'https://idp.example/';
/** How many more redeliveries Temporal starts before it stops answering (UNAVAILABLE); unlimited by default. */
let startsLeft = Infinity;
const temporalGone = () =>
  Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14, details: '', metadata: {} });

function appOn(db: store.Db & import('knex').Knex, refusalLimits?: RefusalLimits) {
  return createApp({
    db,
    refusalLimits,
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

/** Runs the operator CLI in process against `url`. */
async function cli(args: string[], url: string, env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: url, ...env },
    out: (line) => void out.push(line),
    err: (line) => void err.push(line),
  });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

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
    return { status: reply.status, body: (text ? JSON.parse(text) : undefined) as Record<string, unknown>, text };
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
      ['member', 'alice', ISSUER, 'req-register-1', 'ok', registered.body._id],
    );
    assert.match(reg.caller_address ?? '', /127\.0\.0\.1/);
    assert.deepEqual(reg.changes, {
      url: { after: 'https://receiver.example/a' },
      types: { after: ['FALL_DETECTION'] },
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
      url: { before: 'https://receiver.example/a', after: 'https://attacker.example/b' },
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
      url: { before: 'https://attacker.example/b' },
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

      // One start, then Temporal gone: the recovery's row says how many started and what stopped it.
      startsLeft = 1;
      const stopped = await call('POST', `/webhooks/project/${p}/deliveries/recover`, {
        body: { since: '2000-01-01T00:00:00Z' },
      });
      assert.equal(stopped.status, 503, stopped.text);
      const row = await onlyNewRow(p, 3, 'deliveries.recover');
      assert.deepEqual(
        [row.outcome, row.changes],
        ['failed', { since: '2000-01-01T00:00:00Z', count: 1, stoppedWith: 503 }],
      );
    } finally {
      startsLeft = Infinity;
    }
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

  it('records what a manage link did (rotate, test, redeliver, recover) under its id, capabilities and member', async () => {
    const p = await project();
    assert.equal((await register(p)).status, 201);
    const minted = await call('POST', `/webhooks/project/${p}/portal-sessions`, { body: {} });
    assert.equal(minted.status, 201, minted.text);
    const token = minted.body.token as string;
    const failed = [0, 1].map(() => `webhook-event-${randomUUID()}`);
    for (const id of failed)
      await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    const viaLink = (method: string, path: string, body?: unknown) =>
      call(method, path, {
        token,
        requestId: `req-link-${path.split('/').pop()}`,
        ...(body !== undefined && { body }),
      });

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
      [
        ['webhook.secret.rotate', 'req-link-rotate'],
        ['webhook.test', `req-link-${p}`],
        ['delivery.redeliver', 'req-link-redeliver'],
        ['deliveries.recover', 'req-link-recover'],
      ].map(([action, requestId]) => [
        action,
        'portal-link',
        'alice',
        portalLinkId(token),
        ['read', 'manage'],
        requestId,
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

  it('records a 403 on a project route as refused, with the subject; a 401 writes nothing', async () => {
    const p = await project();
    const refused = await call('DELETE', `/webhooks/project/${p}`, { token: hsToken('mallory', { issuer: ISSUER }) });
    assert.equal(refused.status, 403);
    const row = await onlyNewRow(p, 0, 'access.refused');
    assert.deepEqual(
      [row.outcome, row.actor_subject, row.actor_issuer, row.changes],
      ['refused', 'mallory', ISSUER, { method: 'DELETE', route: '/webhooks/project/:projectId' }],
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
      const refusedRows = async () => (await rows(p)).filter((row) => row.action === 'access.refused').length;
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
    // The server builds its app from the configuration, which has no such setting.
    assert.doesNotMatch(readFileSync(join(__dirname, '..', 'api', 'server.ts'), 'utf8'), /auditWriter/);
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

describe('audit verify: names the first row changed, removed or inserted out of order', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  const actor: store.AuditActor = { kind: 'member', subject: 'alice' };

  beforeEach(async () => {
    t = await createTestDatabase();
    for (let i = 0; i < 5; i += 1) {
      await store.appendAuditEvent(t.db, {
        actor,
        action: 'webhook.update',
        outcome: 'ok',
        projectId: 'p1',
        changes: { n: i },
      });
      // Apart by milliseconds at least: the prune test cuts between rows with a JavaScript Date.
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
  });
  afterEach(() => t?.destroy());

  const ids = async () => (await t.db('audit_events').orderBy('id').pluck('id')).map(String);

  it('prunes from the oldest end, records the prune, and the chain still verifies from the first kept row', async () => {
    const rows = await t
      .db('audit_events')
      .orderBy('id')
      .select<{ id: string; at: Date; hash: string }[]>('id', 'at', 'hash');
    const cutoff = rows[3]!.at; // rows 1 to 3 are older
    const pruned = await store.pruneAuditEvents(t.db, cutoff);
    assert.deepEqual(pruned, { removed: 3, anchor: rows[2]!.hash });
    const left = await t
      .db('audit_events')
      .orderBy('id')
      .select<{ id: string; action: string; changes: unknown }[]>('id', 'action', 'changes');
    assert.deepEqual(
      left.map((row) => String(row.id)),
      [rows[3]!.id, rows[4]!.id, String(Number(rows[4]!.id) + 1)].map(String),
    );
    assert.deepEqual(left.at(-1)?.changes, {
      removed: 3,
      before: cutoff.toISOString(),
      anchor: rows[2]!.hash,
      firstKeptId: String(rows[3]!.id),
    });
    const report = await store.verifyAuditChain(t.db);
    assert.deepEqual([report.fault, report.anchor, report.rows], [undefined, rows[2]!.hash, 3]);
    // Nothing past retention: nothing removed, nothing recorded. Everything past it: the newest row stays.
    assert.deepEqual(await store.pruneAuditEvents(t.db, new Date(0)), { removed: 0 });
    const everything = await cli(['audit', 'prune', '--days', '1'], t.url);
    assert.equal(everything.code, 0, everything.stderr);
    assert.match(everything.stdout, /No audit rows past their retention/);
    const all = await store.pruneAuditEvents(t.db, new Date(Date.now() + 86_400_000));
    assert.equal(all.removed, 2);
    assert.equal((await store.verifyAuditChain(t.db)).fault, undefined);
    assert.equal((await cli(['audit', 'prune', '--days', 'x'], t.url)).code, 2);
  });

  it('records a key reseal through the CLI: counts and the key id, as the OS user', async () => {
    const resealed = await cli(['secrets', 'reseal'], t.url, {
      WEBHOOK_SECRET_KEYS: `k7:${randomBytes(32).toString('hex')}`,
    });
    assert.equal(resealed.code, 0, resealed.stderr);
    const row = await t.db<AuditColumns>('audit_events').orderBy('id', 'desc').first();
    assert.deepEqual(
      [row?.action, row?.actor_kind, row?.actor_subject, row?.changes],
      ['secrets.reseal', 'cli', userInfo().username, { total: 0, resealed: 0, keyId: 'k7' }],
    );
  });

  it('exports a window of rows as JSON lines, oldest first, for a SIEM', async () => {
    const all = await t.db('audit_events').orderBy('id').select<{ id: string; at: Date }[]>('id', 'at');
    const everything = await cli(['audit', 'export'], t.url);
    assert.equal(everything.code, 0, everything.stderr);
    const lines = everything.stdout.split('\n').map((line) => JSON.parse(line) as store.AuditEventRow);
    assert.deepEqual(
      lines.map((row) => row.id),
      all.map((row) => String(row.id)),
    );
    assert.deepEqual(lines[0]?.changes, { n: 0 });
    assert.equal(lines[0]?.actor.subject, 'alice');
    const window = await cli(
      ['audit', 'export', '--since', all[1]!.at.toISOString(), '--until', all[3]!.at.toISOString()],
      t.url,
    );
    assert.deepEqual(
      window.stdout.split('\n').map((line) => (JSON.parse(line) as store.AuditEventRow).id),
      [String(all[1]!.id), String(all[2]!.id)],
    );
    const bad = await cli(['audit', 'export', '--since', 'yesterday'], t.url);
    assert.equal(bad.code, 2);
  });

  it('passes an intact chain and prints its head', async () => {
    const report = await store.verifyAuditChain(t.db, 2);
    assert.deepEqual([report.rows, report.fault, report.anchor], [5, undefined, store.AUDIT_GENESIS_HASH]);
    const verified = await cli(['audit', 'verify'], t.url);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, new RegExp(`head ${report.head}`));
  });

  it('names an edited row', async () => {
    const [, , third] = await ids();
    await t
      .db('audit_events')
      .where({ id: third })
      .update({ changes: JSON.stringify({ n: 99 }) });
    const report = await store.verifyAuditChain(t.db, 2);
    assert.deepEqual([report.fault?.kind, report.fault?.id], ['changed', third]);
    const verified = await cli(['audit', 'verify'], t.url);
    assert.equal(verified.code, 1);
    assert.match(verified.stderr, new RegExp(`row ${third} was changed`));
  });

  it('names the row after a deleted one', async () => {
    const [, second, third] = await ids();
    await t.db('audit_events').where({ id: second }).delete();
    const report = await store.verifyAuditChain(t.db);
    assert.deepEqual([report.fault?.kind, report.fault?.id], ['removed', third]);
    assert.match((await cli(['audit', 'verify'], t.url)).stderr, new RegExp(`rows before row ${third} were removed`));
  });

  it('names a row inserted out of order, even with a hash that matches its content', async () => {
    // A rolled-back write leaves a gap in the ids (as a failed action does); a forged row fills it.
    await t.db
      .transaction(async (trx) => {
        await store.appendAuditEvent(trx, { actor, action: 'webhook.update', outcome: 'ok' });
        throw new Error('rolled back');
      })
      .catch(() => undefined);
    await store.appendAuditEvent(t.db, { actor, action: 'webhook.update', outcome: 'ok', projectId: 'p1' });
    const all = await ids();
    const first = all[4]!;
    const head = await t.db('audit_events').where({ id: first }).first('hash');
    const forged = {
      id: String(Number(first) + 1),
      at: '2026-01-01T00:00:00.000000Z',
      actor_kind: 'member' as const,
      actor_subject: 'mallory',
      actor_issuer: null,
      portal_link_id: null,
      portal_capabilities: null,
      request_id: null,
      caller_address: null,
      action: 'webhook.update',
      outcome: 'ok' as const,
      project_id: 'p1',
      registration_id: null,
      delivery_id: null,
      changes: null,
      prev_hash: head.hash as string,
    };
    await t.db('audit_events').insert({ ...forged, hash: store.auditRowHash(forged) });
    const report = await store.verifyAuditChain(t.db);
    assert.deepEqual([report.fault?.kind, report.fault?.id], ['inserted', forged.id]);
    assert.match((await cli(['audit', 'verify'], t.url)).stderr, /inserted out of order/);
  });

  it('names a forged row at the end that follows no row', async () => {
    const all = await ids();
    await t.db('audit_events').insert({
      at: new Date(),
      actor_kind: 'system',
      action: 'webhook.delete',
      outcome: 'ok',
      prev_hash: store.AUDIT_GENESIS_HASH,
      hash: 'f'.repeat(64),
    });
    const report = await store.verifyAuditChain(t.db);
    assert.equal(report.fault?.kind, 'changed');
    assert.ok(!all.includes(report.fault.id));
  });
});

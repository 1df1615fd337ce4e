import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { AddressInfo } from 'node:net';
import { createApp, startApi } from '../../api';
import { loadConfig } from '../../common/config';
import { createLogger } from '../../common/telemetry/logger';
import { freePort } from '../../dev/ports';
import { createSecretBox, registrationSecretAad } from '../../common/crypto/secrets';
import type { TestDeliveryOutcome } from '../../api/webhooks/test-event';
import * as store from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

/** What a reply body may hold: a registration, a test outcome or a problem. */
interface Body {
  _id: string;
  projectId: string;
  url: string;
  types: string[];
  secret: string;
  signatureScheme: string;
  publicKey: string | null;
  createdAt: string;
  updatedAt: string;
  delivered: boolean;
  statusCode?: number;
  durationMs: number;
  workflowId: string;
  type: string;
  title: string;
  status: number;
  detail: string;
  errors: { pointer: string; detail: string }[];
}

interface Reply {
  status: number;
  headers: Headers;
  body: Body;
  text: string;
}

interface LogLine {
  level: number;
  msg: string;
  reqId?: string;
  callerRequestId?: string;
  method?: string;
  path?: string;
  status?: number;
  durationMs?: number;
  err?: { message: string };
}

interface RegistrationColumns {
  id: string;
  project_id: string;
  url: string;
  types: string[];
  secret_sealed: string;
}

const PROBLEM = 'application/problem+json';

describe('api: webhook management', () => {
  let t: TestDatabase;
  let server: LocalServer;
  const key = randomBytes(32);
  const secretBox = createSecretBox(key);
  const logLines: LogLine[] = [];
  const rawLog: string[] = [];
  const testCalls: string[] = [];
  let testOutcome: TestDeliveryOutcome | Error = {
    delivered: true,
    statusCode: 200,
    durationMs: 12,
    workflowId: 'wf-1',
  };

  before(async () => {
    t = await createTestDatabase();
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        rawLog.push(chunk.toString());
        logLines.push(JSON.parse(chunk.toString()) as LogLine);
        done();
      },
    });
    // The production logger, so the check below covers its redaction as it ships.
    const logger = createLogger('info', 'webhooks', sink);
    const app = createApp({
      db: t.db,
      secretBox,
      logger,
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: (projectId) => {
        testCalls.push(projectId);
        return testOutcome instanceof Error ? Promise.reject(testOutcome) : Promise.resolve(testOutcome);
      },
    });
    server = await listenLocal(app.callback());
  });
  after(async () => {
    await server?.close();
    await t?.destroy();
  });
  beforeEach(() => {
    testCalls.length = 0;
    testOutcome = { delivered: true, statusCode: 200, durationMs: 12, workflowId: 'wf-1' };
  });

  async function call(
    method: string,
    path: string,
    options: { user?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    const headers: Record<string, string> = { ...(options.user && bearer(hsToken(options.user))) };
    let body: string | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const response = await fetch(server.url + path, { method, body, headers: { ...headers, ...options.headers } });
    const text = await response.text();
    const json = (/json/.test(response.headers.get('content-type') ?? '') ? JSON.parse(text) : undefined) as Body;
    return { status: response.status, headers: response.headers, body: json, text };
  }

  /** A project of its own for a test, with these members. */
  async function project(...members: string[]): Promise<string> {
    const id = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, id, 'Test project');
    for (const user of members) await store.addMember(t.db, id, user);
    return id;
  }

  const registrations = async () => Number((await t.db('webhook_registrations').count({ n: '*' }))[0]!.n);
  const rowOf = (projectId: string): Promise<RegistrationColumns | undefined> =>
    t.db<RegistrationColumns>('webhook_registrations').where({ project_id: projectId }).first();

  function assertProblem(reply: Reply, status: number, detail?: string | RegExp) {
    assert.equal(reply.status, status, reply.text);
    assert.equal(reply.headers.get('content-type')?.split(';')[0], PROBLEM);
    assert.equal(reply.body.status, status);
    assert.equal(typeof reply.body.type, 'string');
    assert.equal(typeof reply.body.title, 'string');
    assert.equal(typeof reply.body.detail, 'string');
    if (typeof detail === 'string') assert.equal(reply.body.detail, detail);
    else if (detail) assert.match(reply.body.detail, detail);
  }

  const register = (user: string, projectId: string, extra: Record<string, unknown> = {}) =>
    call('POST', '/webhooks/register', {
      user,
      body: { projectId, url: 'https://receiver.example/hooks', types: ['FALL_DETECTION'], ...extra },
    });

  describe('POST /webhooks/register', () => {
    it('answers 201 with the registration and its secret, once', async () => {
      const p = await project('alice');
      const reply = await register('alice', p, { types: ['FALL_DETECTION', 'VITAL_THRESHOLD'] });
      assert.equal(reply.status, 201, reply.text);
      assert.deepEqual(Object.keys(reply.body).sort(), [
        '_id',
        'clientCertificate',
        'createdAt',
        'headerNames',
        'oauth',
        'pauseReason',
        'pausedAt',
        'pausedUntil',
        'previousPublicKey',
        'previousPublicKeyExpiresAt',
        'projectId',
        'publicKey',
        'rateLimit',
        'secret',
        'signatureScheme',
        'slowedUntil',
        'types',
        'updatedAt',
        'url',
      ]);
      assert.match(reply.body._id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal(reply.body.projectId, p);
      assert.equal(reply.body.url, 'https://receiver.example/hooks');
      assert.deepEqual(reply.body.types, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
      // The default scheme is the spec's HMAC: no key pair.
      assert.equal(reply.body.signatureScheme, 'v1');
      assert.equal(reply.body.publicKey, null);
      assert.match(reply.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.ok(!Number.isNaN(Date.parse(reply.body.createdAt)));
      const row = (await rowOf(p))!;
      assert.equal(row.id, reply.body._id);
      assert.deepEqual(row.types, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    });

    it('stores the secret sealed: not the plaintext, and it opens back only with the key and its own row', async () => {
      const p = await project('alice');
      const reply = await register('alice', p);
      const row = (await rowOf(p))!;
      assert.notEqual(row.secret_sealed, reply.body.secret);
      assert.ok(!row.secret_sealed.includes(reply.body.secret.slice(6)));
      assert.equal(secretBox.open(row.secret_sealed, registrationSecretAad(reply.body._id)), reply.body.secret);
      assert.throws(() => secretBox.open(row.secret_sealed, registrationSecretAad(randomUUID())));
      assert.throws(() =>
        createSecretBox(randomBytes(32)).open(row.secret_sealed, registrationSecretAad(reply.body._id)),
      );
    });

    it('issues a different secret and id for every registration', async () => {
      const [a, b] = await Promise.all([project('alice'), project('alice')]);
      const [ra, rb] = await Promise.all([register('alice', a), register('alice', b)]);
      assert.notEqual(ra.body.secret, rb.body.secret);
      assert.notEqual(ra.body._id, rb.body._id);
    });

    it('refuses a second registration with 409 and the spec text, keeping the first', async () => {
      const p = await project('alice');
      const first = await register('alice', p);
      const second = await register('alice', p, { url: 'https://other.example/x' });
      assertProblem(second, 409, 'Webhook has already been registered previously');
      const row = (await rowOf(p))!;
      assert.equal(row.id, first.body._id);
      assert.equal(row.url, 'https://receiver.example/hooks');
    });

    it('gives exactly one 201 and nineteen 409 to 20 concurrent registrations', async () => {
      const p = await project('alice');
      const replies = await Promise.all(
        Array.from({ length: 20 }, (_, i) => register('alice', p, { url: `https://r${i}.example/h` })),
      );
      const statuses = replies.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 201).length, 1, statuses.join(','));
      assert.equal(statuses.filter((s) => s === 409).length, 19, statuses.join(','));
      for (const r of replies.filter((x) => x.status === 409))
        assert.equal(r.body.detail, 'Webhook has already been registered previously');
      const winner = replies.find((r) => r.status === 201)!;
      const rows = await t.db('webhook_registrations').where({ project_id: p });
      assert.equal(rows.length, 1);
      assert.equal(rows[0].url, winner.body.url);
    });

    it('answers 404 with the spec text for an unknown project, storing nothing', async () => {
      const before = await registrations();
      const reply = await register('alice', 'no-such-project');
      assertProblem(reply, 404, 'No project with id no-such-project was found');
      assert.equal(await registrations(), before);
    });

    it('answers 403 to a caller who is not a member, storing nothing', async () => {
      const p = await project('alice');
      const reply = await register('mallory', p);
      assertProblem(reply, 403);
      assert.equal(reply.body.title, 'Forbidden');
      assert.equal(await rowOf(p), undefined);
    });

    it('can register again after a delete, with a new id and a new secret', async () => {
      const p = await project('alice');
      const first = await register('alice', p);
      assert.equal((await call('DELETE', `/webhooks/project/${p}`, { user: 'alice' })).status, 204);
      const again = await register('alice', p);
      assert.equal(again.status, 201);
      assert.notEqual(again.body._id, first.body._id);
      assert.notEqual(again.body.secret, first.body.secret);
    });
  });

  describe('request bodies', () => {
    const valid = { url: 'https://receiver.example/hooks', types: ['FALL_DETECTION'] };
    const cases: [string, unknown, RegExp][] = [
      ['a missing url', { types: ['FALL_DETECTION'] }, /\/ must have required property 'url'/],
      ['missing types', { url: valid.url }, /\/ must have required property 'types'/],
      ['a relative url', { ...valid, url: '/hooks' }, /\/url /],
      ['a url that is not a URL', { ...valid, url: 'not a url' }, /\/url /],
      ['an ftp url', { ...valid, url: 'ftp://files.example/x' }, /\/url /],
      ['a javascript: url', { ...valid, url: 'javascript:alert(1)' }, /\/url /],
      ['a url without a host', { ...valid, url: 'http://' }, /\/url /],
      [
        'an IPv4 host out of range (RFC 3986 allows it, WHATWG does not)',
        { ...valid, url: 'http://1.2.3.256/' },
        /\/url must be an absolute http or https URL/,
      ],
      [
        'a host with an encoded space',
        { ...valid, url: 'http://a%20b/' },
        /\/url must be an absolute http or https URL/,
      ],
      [
        'a url with credentials (the delivery would refuse it)',
        { ...valid, url: 'https://user:pass@r.example/hook' },
        /\/url must be an absolute http or https URL without credentials/,
      ],
      [
        'a url over 2048 characters',
        { ...valid, url: `https://r.example/${'a'.repeat(2031)}` },
        /\/url must NOT have more than 2048 characters/,
      ],
      ['a url that is a number', { ...valid, url: 42 }, /\/url must be string/],
      ['empty types', { ...valid, types: [] }, /\/types must NOT have fewer than 1 items/],
      [
        'duplicate types',
        { ...valid, types: ['FALL_DETECTION', 'FALL_DETECTION'] },
        /\/types must NOT have duplicate items/,
      ],
      ['the TEST type', { ...valid, types: ['TEST'] }, /\/types\/0 must be equal to one of the allowed values/],
      [
        'an unknown type',
        { ...valid, types: ['FALL_DETECTION', 'SLEEP'] },
        /\/types\/1 must be equal to one of the allowed values/,
      ],
      ['types that is a string', { ...valid, types: 'FALL_DETECTION' }, /\/types must be array/],
      ['an unknown field', { ...valid, secret: 'whsec_mine' }, /\/ must NOT have additional property secret/],
    ];
    for (const [name, body, detail] of cases) {
      it(`refuses ${name} with 400, storing nothing`, async () => {
        const p = await project('alice');
        const before = await registrations();
        const reply = await call('POST', '/webhooks/register', {
          user: 'alice',
          body: { projectId: p, ...(body as object) },
        });
        assertProblem(reply, 400, detail);
        assert.ok(Array.isArray(reply.body.errors) && reply.body.errors.length > 0);
        assert.equal(await registrations(), before);
      });
    }

    it('accepts a url of exactly 2048 characters and http: urls', async () => {
      const url = `https://r.example/${'a'.repeat(2048 - 'https://r.example/'.length)}`;
      assert.equal(url.length, 2048);
      assert.equal((await register('alice', await project('alice'), { url })).status, 201);
      assert.equal((await register('alice', await project('alice'), { url: 'http://10.0.0.1:8080/x' })).status, 201);
    });

    it('lists every problem of a body at once', async () => {
      const reply = await call('POST', '/webhooks/register', {
        user: 'alice',
        body: { url: 'ftp://x', types: [], extra: 1 },
      });
      assertProblem(reply, 400);
      const pointers = (reply.body.errors as { pointer: string }[]).map((e) => e.pointer).sort();
      assert.deepEqual(pointers, ['/', '/', '/types', '/url']);
      assert.match(reply.body.detail, /projectId/);
      assert.match(reply.body.detail, /extra/);
    });

    it('refuses a body that is not an object, or not JSON at all, with 400', async () => {
      assertProblem(
        await call('POST', '/webhooks/register', { user: 'alice', body: [1, 2] }),
        400,
        /\/ must be object/,
      );
      const broken = await call('POST', '/webhooks/register', {
        user: 'alice',
        raw: '{"projectId": ',
        headers: { 'content-type': 'application/json' },
      });
      assertProblem(broken, 400, 'The request body is not valid JSON');
      assertProblem(await call('POST', '/webhooks/register', { user: 'alice' }), 400, /required property 'projectId'/);
    });

    it('validates the body before looking the project up', async () => {
      const reply = await call('POST', '/webhooks/register', {
        user: 'alice',
        body: { projectId: 'no-such-project', url: 'x' },
      });
      assertProblem(reply, 400);
    });

    it('answers 413 to a body over 100 kB, and parses one just under it', async () => {
      const p = await project('alice');
      const big = JSON.stringify({
        projectId: p,
        url: valid.url,
        types: ['FALL_DETECTION'],
        pad: 'x'.repeat(101 * 1024),
      });
      const tooBig = await call('POST', '/webhooks/register', {
        user: 'alice',
        raw: big,
        headers: { 'content-type': 'application/json' },
      });
      assertProblem(tooBig, 413);
      const under = JSON.stringify({
        projectId: p,
        url: valid.url,
        types: ['FALL_DETECTION'],
        pad: 'x'.repeat(99 * 1024),
      });
      const parsed = await call('POST', '/webhooks/register', {
        user: 'alice',
        raw: under,
        headers: { 'content-type': 'application/json' },
      });
      assertProblem(parsed, 400, /additional property pad/);
      assert.equal(await rowOf(p), undefined);
    });

    it('answers 415 to a body that is not JSON, storing nothing', async () => {
      const p = await project('alice');
      const json = JSON.stringify({ projectId: p, ...valid });
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
        const reply = await call('POST', '/webhooks/register', {
          user: 'alice',
          raw: json,
          headers: { 'content-type': type },
        });
        assertProblem(reply, 415);
      }
      const patch = await call('PATCH', '/webhooks', {
        user: 'alice',
        raw: json,
        headers: { 'content-type': 'text/plain' },
      });
      assertProblem(patch, 415);
      assert.equal(await rowOf(p), undefined);
    });

    it('accepts application/json with a charset', async () => {
      const p = await project('alice');
      const reply = await call('POST', '/webhooks/register', {
        user: 'alice',
        raw: JSON.stringify({ projectId: p, ...valid }),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      });
      assert.equal(reply.status, 201, reply.text);
    });
  });

  describe('PATCH /webhooks', () => {
    it('updates the url, the types, or both, and answers 200 with the registration', async () => {
      const p = await project('alice');
      const created = await register('alice', p);
      const byUrl = await call('PATCH', '/webhooks', {
        user: 'alice',
        body: { projectId: p, url: 'https://new.example/h' },
      });
      assert.equal(byUrl.status, 200, byUrl.text);
      assert.deepEqual(Object.keys(byUrl.body).sort(), [
        '_id',
        'clientCertificate',
        'createdAt',
        'headerNames',
        'oauth',
        'pauseReason',
        'pausedAt',
        'pausedUntil',
        'previousPublicKey',
        'previousPublicKeyExpiresAt',
        'projectId',
        'publicKey',
        'rateLimit',
        'signatureScheme',
        'slowedUntil',
        'types',
        'updatedAt',
        'url',
      ]);
      assert.equal(byUrl.body.url, 'https://new.example/h');
      assert.deepEqual(byUrl.body.types, ['FALL_DETECTION']);
      assert.equal(byUrl.body._id, created.body._id);
      assert.ok(Date.parse(byUrl.body.updatedAt) >= Date.parse(created.body.updatedAt));

      const byTypes = await call('PATCH', '/webhooks', {
        user: 'alice',
        body: { projectId: p, types: ['VITAL_THRESHOLD'] },
      });
      assert.equal(byTypes.status, 200);
      assert.equal(byTypes.body.url, 'https://new.example/h');
      assert.deepEqual(byTypes.body.types, ['VITAL_THRESHOLD']);

      const both = await call('PATCH', '/webhooks', {
        user: 'alice',
        body: { projectId: p, url: 'http://both.example/', types: ['FALL_DETECTION', 'VITAL_THRESHOLD'] },
      });
      assert.equal(both.status, 200);
      const row = (await rowOf(p))!;
      assert.equal(row.url, 'http://both.example/');
      assert.deepEqual(row.types, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
      assert.equal(row.id, created.body._id);
      assert.equal(secretBox.open(row.secret_sealed, registrationSecretAad(row.id)), created.body.secret);
    });

    it('answers 404 with the spec text when the project has no webhook', async () => {
      const p = await project('alice');
      const reply = await call('PATCH', '/webhooks', {
        user: 'alice',
        body: { projectId: p, url: 'https://x.example/' },
      });
      assertProblem(reply, 404, 'Must register webhook before updating it');
      assert.equal(await rowOf(p), undefined);
    });

    it('answers 404 for an unknown project and 403 for a non-member', async () => {
      const unknown = await call('PATCH', '/webhooks', {
        user: 'alice',
        body: { projectId: 'nope', types: ['FALL_DETECTION'] },
      });
      assertProblem(unknown, 404, 'No project with id nope was found');
      const p = await project('alice');
      assertProblem(
        await call('PATCH', '/webhooks', { user: 'eve', body: { projectId: p, types: ['FALL_DETECTION'] } }),
        403,
      );
    });

    it('needs at least one of url and types, and rejects unknown and invalid fields, changing nothing', async () => {
      const p = await project('alice');
      await register('alice', p);
      const before = await rowOf(p);
      assertProblem(
        await call('PATCH', '/webhooks', { user: 'alice', body: { projectId: p } }),
        400,
        /at least one of url, types, headers, clientCertificate, signatureScheme and oauth/,
      );
      assertProblem(
        await call('PATCH', '/webhooks', { user: 'alice', body: { url: 'https://x.example/' } }),
        400,
        /projectId/,
      );
      assertProblem(
        await call('PATCH', '/webhooks', {
          user: 'alice',
          body: { projectId: p, url: 'https://x.example/', secret: 'x' },
        }),
        400,
        /additional property secret/,
      );
      assertProblem(
        await call('PATCH', '/webhooks', { user: 'alice', body: { projectId: p, types: ['TEST'] } }),
        400,
        /\/types\/0/,
      );
      assertProblem(
        await call('PATCH', '/webhooks', { user: 'alice', body: { projectId: p, url: 'mailto:a@b.c' } }),
        400,
        /\/url/,
      );
      assert.deepEqual(await rowOf(p), before);
    });
  });

  describe('GET and DELETE /webhooks/project/:projectId', () => {
    it('GET answers 200 with the registration and never the secret', async () => {
      const p = await project('alice', 'bob');
      const created = await register('alice', p);
      const reply = await call('GET', `/webhooks/project/${p}`, { user: 'bob' });
      assert.equal(reply.status, 200);
      const { secret, ...shown } = created.body;
      assert.deepEqual(reply.body, shown);
      assert.ok(!reply.text.includes(secret));
      assert.ok(!reply.text.includes('secret'));
    });

    it('GET and DELETE answer 404 without a webhook, and for an unknown project', async () => {
      const p = await project('alice');
      assertProblem(
        await call('GET', `/webhooks/project/${p}`, { user: 'alice' }),
        404,
        `No webhook is registered for project ${p}`,
      );
      assertProblem(
        await call('DELETE', `/webhooks/project/${p}`, { user: 'alice' }),
        404,
        `No webhook is registered for project ${p}`,
      );
      assertProblem(
        await call('GET', '/webhooks/project/ghost', { user: 'alice' }),
        404,
        'No project with id ghost was found',
      );
      assertProblem(
        await call('DELETE', '/webhooks/project/ghost', { user: 'alice' }),
        404,
        'No project with id ghost was found',
      );
    });

    it('DELETE answers 204 with no body and removes the row', async () => {
      const p = await project('alice');
      await register('alice', p);
      const reply = await call('DELETE', `/webhooks/project/${p}`, { user: 'alice' });
      assert.equal(reply.status, 204);
      assert.equal(reply.text, '');
      assert.equal(await rowOf(p), undefined);
      assertProblem(await call('GET', `/webhooks/project/${p}`, { user: 'alice' }), 404);
    });
  });

  describe('POST /webhooks/test/project/:projectId', () => {
    it('answers 200 with the delivery outcome when the receiver acknowledged', async () => {
      const p = await project('alice');
      await register('alice', p);
      testOutcome = { delivered: true, statusCode: 204, durationMs: 31, workflowId: `test-${p}` };
      const reply = await call('POST', `/webhooks/test/project/${p}`, { user: 'alice' });
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.body, { delivered: true, statusCode: 204, durationMs: 31, workflowId: `test-${p}` });
      assert.deepEqual(testCalls, [p]);
    });

    it('answers 502 naming the receiver status or error when it did not acknowledge', async () => {
      const p = await project('alice');
      await register('alice', p);
      testOutcome = { delivered: false, reason: 'receiver answered 500', statusCode: 500, workflowId: 'wf-9' };
      const refused = await call('POST', `/webhooks/test/project/${p}`, { user: 'alice' });
      assertProblem(refused, 502, /receiver answered 500/);
      assert.equal(refused.body.statusCode, 500);
      assert.equal(refused.body.workflowId, 'wf-9');

      testOutcome = { delivered: false, reason: 'connect ECONNREFUSED 127.0.0.1:9', workflowId: 'wf-10' };
      const unreachable = await call('POST', `/webhooks/test/project/${p}`, { user: 'alice' });
      assertProblem(unreachable, 502, /ECONNREFUSED/);
      assert.equal(unreachable.body.statusCode, undefined);
    });

    it('answers 404 without a webhook or project, without sending anything', async () => {
      const p = await project('alice');
      assertProblem(
        await call('POST', `/webhooks/test/project/${p}`, { user: 'alice' }),
        404,
        `No webhook is registered for project ${p}`,
      );
      assertProblem(
        await call('POST', '/webhooks/test/project/ghost', { user: 'alice' }),
        404,
        'No project with id ghost was found',
      );
      assert.deepEqual(testCalls, []);
    });

    it('answers 500 problem+json, logged, when sending fails unexpectedly', async () => {
      const p = await project('alice');
      await register('alice', p);
      testOutcome = new Error('temporal unavailable');
      const reply = await call('POST', `/webhooks/test/project/${p}`, {
        user: 'alice',
        headers: { 'x-request-id': 'boom-1' },
      });
      assertProblem(reply, 500, 'An unexpected error occurred');
      assert.ok(!reply.text.includes('temporal unavailable'));
      assert.ok(
        logLines.some(
          (l) => l.callerRequestId === 'boom-1' && l.level === 50 && l.err?.message === 'temporal unavailable',
        ),
      );
    });
  });

  describe('membership', () => {
    it('a member of project A gets 403 on every endpoint of project B and changes nothing', async () => {
      const a = await project('alice');
      const b = await project('bob');
      await register('alice', a);
      const created = await register('bob', b);
      const before = await rowOf(b);
      const attempts = [
        await register('alice', b),
        await call('PATCH', '/webhooks', { user: 'alice', body: { projectId: b, url: 'https://evil.example/' } }),
        await call('GET', `/webhooks/project/${b}`, { user: 'alice' }),
        await call('DELETE', `/webhooks/project/${b}`, { user: 'alice' }),
        await call('POST', `/webhooks/test/project/${b}`, { user: 'alice' }),
      ];
      for (const reply of attempts) {
        assertProblem(reply, 403);
        assert.ok(!reply.text.includes(created.body.secret));
        assert.ok(!reply.text.includes(created.body.url));
      }
      assert.deepEqual(await rowOf(b), before);
      assert.deepEqual(testCalls, []);
    });

    it('a member removed from the project loses access', async () => {
      const p = await project('alice', 'carol');
      await register('alice', p);
      assert.equal((await call('GET', `/webhooks/project/${p}`, { user: 'carol' })).status, 200);
      await store.removeMember(t.db, p, 'carol');
      assertProblem(await call('GET', `/webhooks/project/${p}`, { user: 'carol' }), 403);
    });
  });

  describe('errors, routes and logs', () => {
    it('answers 401 problem+json without a token, before looking at the body', async () => {
      const reply = await call('POST', '/webhooks/register', { body: { nonsense: true } });
      assertProblem(reply, 401);
      assert.equal(reply.headers.get('www-authenticate'), 'Bearer');
      for (const [method, path] of [
        ['PATCH', '/webhooks'],
        ['GET', '/webhooks/project/x'],
        ['DELETE', '/webhooks/project/x'],
        ['POST', '/webhooks/test/project/x'],
      ] as const)
        assertProblem(await call(method, path), 401);
    });

    it('answers problem+json 404 for unknown routes and 405 for wrong methods', async () => {
      assertProblem(await call('GET', '/nowhere', { user: 'alice' }), 404);
      const wrong = await call('PUT', '/webhooks/project/x', { user: 'alice' });
      assertProblem(wrong, 405);
      assert.match(wrong.headers.get('allow') ?? '', /GET/);
    });

    it('assigns its own X-Request-Id, logs the caller’s beside it, one line per request with method, path, status, duration', async () => {
      const p = await project('alice');
      const reply = await call('GET', `/webhooks/project/${p}`, {
        user: 'alice',
        headers: { 'x-request-id': 'req-abc-123' },
      });
      const reqId = reply.headers.get('x-request-id');
      assert.match(reqId ?? '', /^[0-9a-f-]{36}$/, 'the server’s id, not the caller’s');
      const lines = logLines.filter((l) => l.reqId === reqId && l.msg === 'request');
      assert.equal(lines.length, 1);
      assert.equal(lines[0]!.callerRequestId, 'req-abc-123');
      assert.equal(lines[0]!.method, 'GET');
      assert.equal(lines[0]!.path, `/webhooks/project/${p}`);
      assert.equal(lines[0]!.status, 404);
      assert.equal(typeof lines[0]!.durationMs, 'number');

      const generated = await call('GET', `/webhooks/project/${p}`, {
        user: 'alice',
        headers: { 'x-request-id': 'bad id with spaces' },
      });
      assert.match(generated.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
      const unsafe = logLines.find((l) => l.reqId === generated.headers.get('x-request-id'));
      assert.equal(unsafe?.callerRequestId, undefined, 'an id outside the safe alphabet is not logged');
    });

    it('never logs tokens or secrets', async () => {
      const p = await project('alice');
      const token = hsToken('alice');
      const reply = await call('POST', '/webhooks/register', {
        headers: { authorization: `Bearer ${token}`, 'x-request-id': 'no-leak-1' },
        body: { projectId: p, url: 'https://receiver.example/hooks', types: ['FALL_DETECTION'] },
      });
      assert.equal(reply.status, 201);
      const all = rawLog.join('');
      assert.ok(
        logLines.some((l) => l.callerRequestId === 'no-leak-1' && l.status === 201),
        'the request was logged',
      );
      assert.ok(!all.includes(reply.body.secret));
      assert.ok(!all.includes(token));
      assert.ok(!all.includes(token.split('.')[2]!));
    });
  });
});

describe('api: startApi', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(() => t?.destroy());

  it('migrates, serves on PORT, and closes its server and pool', async () => {
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: t.url,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
      },
      { database: true, auth: true },
    );
    const api = await startApi(config, pino({ level: 'silent' }), {
      sendTestEvent: () => Promise.reject(new Error('not used')),
    });
    const { port } = api.server.address() as AddressInfo;
    await store.addProject(t.db, 'started');
    await store.addMember(t.db, 'started', 'alice');
    const reply = await fetch(`http://127.0.0.1:${port}/webhooks/register`, {
      method: 'POST',
      headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
      body: JSON.stringify({ projectId: 'started', url: 'https://r.example/', types: ['VITAL_THRESHOLD'] }),
    });
    assert.equal(reply.status, 201);
    await api.close();
    assert.equal(api.server.listening, false);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/webhooks/project/started`));
  });

  it('passes PUBLIC_BASE_URL to the app: portal links point there, not at the port it listens on', async () => {
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: t.url,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
        PUBLIC_BASE_URL: 'https://hooks.example.com/',
      },
      { database: true, auth: true },
    );
    const api = await startApi(config, pino({ level: 'silent' }), {
      sendTestEvent: () => Promise.reject(new Error('not used')),
    });
    try {
      const { port } = api.server.address() as AddressInfo;
      await store.addProject(t.db, 'linked');
      await store.addMember(t.db, 'linked', 'alice');
      const made = await fetch(`http://127.0.0.1:${port}/webhooks/project/linked/portal-sessions`, {
        method: 'POST',
        headers: bearer(hsToken('alice')),
      });
      const body = (await made.json()) as { url: string; token: string };
      assert.equal(made.status, 201, JSON.stringify(body));
      assert.equal(body.url, `https://hooks.example.com/portal#token=${body.token}`);
    } finally {
      await api.close();
    }
  });

  it('with Temporal down, answers readyz 503 at once and closes cleanly right after', async () => {
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: t.url,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
        TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      },
      { database: true, auth: true },
    );
    const api = await startApi(config, pino({ level: 'silent' }), {
      sendTestEvent: () => Promise.reject(new Error('not used')),
    });
    const { port } = api.server.address() as AddressInfo;
    const started = Date.now();
    const reply = await fetch(`http://127.0.0.1:${port}/readyz`);
    assert.equal(reply.status, 503);
    assert.ok(Date.now() - started < 1_000);
    // A gRPC retry left pending by the probe would throw from its timer after close: collect what is thrown meanwhile.
    const thrown: unknown[] = [];
    const collect = (error: unknown) => void thrown.push(error);
    process.on('uncaughtException', collect);
    try {
      await api.close();
      await new Promise((resolve) => setTimeout(resolve, 2_500));
    } finally {
      process.off('uncaughtException', collect);
    }
    assert.deepEqual(thrown, [], 'nothing was thrown after close');
    await assert.rejects(fetch(`http://127.0.0.1:${port}/readyz`), 'the port is closed');
  });
});

// The codec endpoint (api/codec/router.ts) in process, without Temporal: who is an operator, the CORS answers for the
// Temporal UI, and the remote codec protocol's encode, decode and refusals on a real HTTP server on 127.0.0.1.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import Koa, { type Middleware } from 'koa';
import { bodyParser } from '@koa/bodyparser';
import type { PayloadCodec } from '@temporalio/common';
import { problemDetails, UnauthorizedError } from '../../api/http/errors';
import {
  codecAccessFromConfig,
  codecCors,
  codecCorsOrigins,
  codecRouter,
  type CodecDeps,
} from '../../api/codec/router';
import { isOperator, operatorPolicyFromConfig } from '../../api/auth/operator-policy';
import {
  EncryptionCodec,
  generatePayloadKey,
  parsePayloadKeyRing,
  payloadToJson,
  type JsonPayload,
} from '../../common/crypto/payload-codec';
import type { Knex } from 'knex';
import * as store from '../../db';
import { captureLogger } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { listenLocal, type LocalServer } from '../support/jwks-server';

const UI_ORIGIN = 'http://localhost:8080';
const OPERATOR = 'ops-anna';

const plain: JsonPayload = {
  metadata: { encoding: Buffer.from('json/plain').toString('base64') },
  data: Buffer.from('{"email":"a@b.example"}').toString('base64'),
};

/** The codec's part of the API: CORS, a stand-in for authentication (the claims in X-Claims), the router. */
function codecApp(deps: CodecDeps, db: Knex, opts: { localCaller?: boolean } = {}): Koa {
  const app = new Koa();
  app.use(problemDetails(captureLogger().logger));
  app.use(codecCors(deps));
  const auth: Middleware = async (ctx, next) => {
    const claims = ctx.get('X-Claims');
    if (opts.localCaller) ctx.state.localCodecCaller = true;
    else if (claims === '') throw new UnauthorizedError('no token');
    else ctx.state.user = JSON.parse(claims) as unknown;
    await next();
  };
  app.use(auth);
  app.use(bodyParser({ enableTypes: ['json'] }));
  // Every encode and decode is audited in the database (api/audit/audit-log.ts).
  app.use(codecRouter(deps, db).routes());
  app.use((ctx) => {
    ctx.body = { reached: ctx.path };
  });
  return app;
}

describe('the codec endpoint: operators, CORS for the Temporal UI, encode and decode', () => {
  const codec = new EncryptionCodec(parsePayloadKeyRing(generatePayloadKey()));
  const deps: CodecDeps = {
    codec,
    operators: { subjects: new Set([OPERATOR]), role: 'ops' },
    corsOrigins: [UI_ORIGIN],
  };
  const servers: LocalServer[] = [];
  const serve = async (app: Koa) => {
    const server = await listenLocal(app.callback());
    servers.push(server);
    return server.url;
  };
  let url: string;
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
    url = await serve(codecApp(deps, t.db));
  });
  after(async () => {
    await Promise.all(servers.map((server) => server.close()));
    await t?.destroy();
  });

  const post = (base: string, path: string, body: unknown, claims?: object, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        ...(claims ? { 'X-Claims': JSON.stringify(claims) } : {}),
        ...headers,
      },
      body: JSON.stringify(body),
    });

  describe('who is an operator', () => {
    const policy = { subjects: new Set(['ops-anna', 'ops-ben']), role: 'ops' };

    it('a listed subject, or a token carrying the role in roles or role', () => {
      assert.equal(isOperator(policy, { sub: 'ops-ben' }), true);
      assert.equal(isOperator(policy, { sub: 'alice', roles: ['member', 'ops'] }), true);
      assert.equal(isOperator(policy, { sub: 'alice', role: 'ops' }), true);
      assert.equal(isOperator(policy, { sub: 'alice', roles: 'ops' }), true, 'one role given as a string');
    });

    it('nobody else: other subjects and roles, a sub that is not a string, no role configured', () => {
      assert.equal(isOperator(policy, { sub: 'alice' }), false);
      assert.equal(isOperator(policy, {}), false);
      assert.equal(isOperator(policy, { sub: 'alice', roles: ['member'], role: 'ops' }), false, 'roles wins');
      assert.equal(isOperator(policy, { sub: 'alice', role: 'member' }), false);
      assert.equal(isOperator({ subjects: new Set(['1']) }, { sub: 1 }), false);
      assert.equal(isOperator({ subjects: new Set() }, { sub: 'alice', roles: [undefined], role: undefined }), false);
      assert.equal(isOperator({ subjects: new Set(), role: '' }, { sub: 'alice', roles: [''] }), false);
    });

    it('reads OPERATOR_SUBJECTS and CODEC_CORS_ORIGINS as comma lists, blanks dropped', () => {
      const policyRead = operatorPolicyFromConfig({ OPERATOR_SUBJECTS: ' ops-anna, ,ops-ben,', OPERATOR_ROLE: 'ops' });
      assert.deepEqual([...policyRead.subjects], ['ops-anna', 'ops-ben']);
      assert.equal(policyRead.role, 'ops');
      assert.deepEqual([...operatorPolicyFromConfig({}).subjects], []);
      assert.deepEqual(codecCorsOrigins({ CODEC_CORS_ORIGINS: `${UI_ORIGIN} , https://ui.example` }), [
        UI_ORIGIN,
        'https://ui.example',
      ]);
      assert.deepEqual(codecCorsOrigins({}), []);
      const access = codecAccessFromConfig({
        OPERATOR_SUBJECTS: 'ops-anna',
        CODEC_CORS_ORIGINS: UI_ORIGIN,
        DEV_CODEC_WITHOUT_TOKEN: true,
        NODE_ENV: 'development',
      });
      assert.deepEqual(access, {
        operators: { subjects: new Set(['ops-anna']), role: undefined },
        corsOrigins: [UI_ORIGIN],
        localCallersWithoutToken: true,
      });
      const production = {
        OPERATOR_SUBJECTS: 'ops-anna',
        DEV_CODEC_WITHOUT_TOKEN: true,
        NODE_ENV: 'production',
      } as const;
      assert.equal(codecAccessFromConfig(production).localCallersWithoutToken, false);
      const unset = { OPERATOR_SUBJECTS: 'ops-anna', DEV_CODEC_WITHOUT_TOKEN: false, NODE_ENV: 'development' } as const;
      assert.equal(codecAccessFromConfig(unset).localCallersWithoutToken, false);
    });
  });

  describe('CORS', () => {
    it('answers the UI’s preflight for its origin: methods, headers, max age, credentials, 204', async () => {
      for (const path of ['/codec/decode', '/codec/encode']) {
        const response = await fetch(`${url}${path}`, { method: 'OPTIONS', headers: { Origin: UI_ORIGIN } });
        assert.equal(response.status, 204, path);
        assert.equal(response.headers.get('access-control-allow-origin'), UI_ORIGIN);
        assert.equal(response.headers.get('access-control-allow-credentials'), 'true');
        assert.equal(response.headers.get('access-control-allow-methods'), 'POST, OPTIONS');
        assert.equal(
          response.headers.get('access-control-allow-headers'),
          'Authorization, Authorization-Extras, Content-Type, X-Namespace',
        );
        assert.equal(response.headers.get('access-control-max-age'), '600');
        assert.equal(response.headers.get('vary'), 'Origin');
      }
    });

    it('answers another origin’s preflight, or one without an origin, with 204 and no CORS header', async () => {
      for (const headers of [{ Origin: 'https://evil.example' }, {}] as Record<string, string>[]) {
        const response = await fetch(`${url}/codec/decode`, { method: 'OPTIONS', headers });
        assert.equal(response.status, 204);
        for (const name of [
          'access-control-allow-origin',
          'access-control-allow-credentials',
          'access-control-allow-methods',
          'access-control-allow-headers',
          'access-control-max-age',
          'vary',
        ])
          assert.equal(response.headers.get(name), null, name);
      }
    });

    it('lets the page read the answer of its origin, even a refusal; other origins get no CORS header', async () => {
      const refused = await post(url, '/codec/decode', { payloads: [] }, undefined, { Origin: UI_ORIGIN });
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('access-control-allow-origin'), UI_ORIGIN);
      assert.equal(refused.headers.get('access-control-allow-credentials'), 'true');
      assert.equal(refused.headers.get('access-control-allow-methods'), null, 'not a preflight');
      const other = await post(
        url,
        '/codec/decode',
        { payloads: [] },
        { sub: OPERATOR },
        { Origin: 'https://x.example' },
      );
      assert.equal(other.status, 200);
      assert.equal(other.headers.get('access-control-allow-origin'), null);
    });

    it('leaves every other path alone, even one that merely contains a codec path', async () => {
      for (const path of ['/webhooks', '/codec/decodex', '/x/codec/decode', '/codec/other']) {
        const response = await fetch(`${url}${path}`, {
          method: 'OPTIONS',
          headers: { Origin: UI_ORIGIN, 'X-Claims': '{}' },
        });
        assert.equal(response.headers.get('access-control-allow-origin'), null, path);
        assert.equal(response.status, 200, `${path}: passed on`);
        assert.deepEqual(await response.json(), { reached: path });
      }
    });

    it('does not take an empty Origin for a configured one', async () => {
      const lenient = await serve(codecApp({ ...deps, corsOrigins: [''] }, t.db));
      const response = await fetch(`${lenient}/codec/decode`, { method: 'OPTIONS' });
      assert.equal(response.status, 204);
      assert.equal(response.headers.get('access-control-allow-origin'), null);
    });
  });

  describe('encode and decode', () => {
    it('an operator encodes and decodes back the same payloads', async () => {
      const encoded = await post(url, '/codec/encode', { payloads: [plain] }, { sub: OPERATOR });
      assert.equal(encoded.status, 200);
      const sealed = ((await encoded.json()) as { payloads: JsonPayload[] }).payloads;
      assert.equal(sealed.length, 1);
      assert.equal(Buffer.from(sealed[0]!.metadata!.encoding!, 'base64').toString(), 'binary/encrypted');
      const decoded = await post(url, '/codec/decode', { payloads: sealed }, { sub: 'alice', roles: ['ops'] });
      assert.equal(decoded.status, 200);
      assert.deepEqual(await decoded.json(), { payloads: [plain] });
    });

    it('accounts a decode in each project it opened: attempt inputs, resume signals by the delivery log; plain ones none', async () => {
      const [p1, p2] = [`p-${randomBytes(4).toString('hex')}`, `p-${randomBytes(4).toString('hex')}`];
      const [w1, w2] = [
        `webhook-event-${randomBytes(4).toString('hex')}`,
        `webhook-event-${randomBytes(4).toString('hex')}`,
      ];
      await store.addProject(t.db, p2);
      await store.upsertDelivery(t.db, { id: w2, projectId: p2, type: 'FALL_DETECTION', workflowId: w2 }, 'delivered');
      const json = (value: unknown) => ({
        metadata: { encoding: Buffer.from('json/plain') },
        data: Buffer.from(JSON.stringify(value)),
      });
      const attempt = json({
        projectId: p1,
        webhookType: 'FALL_DETECTION',
        body: '{}',
        boundTo: { workflowId: w1, runId: 'r' },
      });
      const signal = json({ workflowId: w2, waitToken: 3 });
      const sealed = (await codec.encode([attempt, signal, json({ projectId: p1, workflowId: w1 })])).map(
        payloadToJson,
      );
      // A payload that was never sealed opens nothing, whatever it names.
      const unsealed = payloadToJson(json({ projectId: p2, workflowId: 'webhook-event-never-sealed' }));
      const response = await post(url, '/codec/decode', { payloads: [...sealed, unsealed] }, { sub: OPERATOR });
      assert.equal(response.status, 200);
      const rows = await store.listAuditEvents(t.db, { action: 'codec.decode', limit: 3 });
      const keyId = Buffer.from(sealed[0]!.metadata!['encryption-key-id']!, 'base64').toString();
      assert.deepEqual(
        rows.reverse().map((row) => [row.projectId, row.changes]),
        [
          [undefined, { payloads: 4, keyIds: [keyId], projects: [p1, p2] }],
          [p1, { workflowIds: [w1], payloads: 2, keyIds: [keyId] }],
          [p2, { workflowIds: [w2], payloads: 1, keyIds: [keyId] }],
        ],
      );
    });

    it('refuses a project member who is no operator with 403', async () => {
      for (const path of ['/codec/encode', '/codec/decode']) {
        const response = await post(url, path, { payloads: [plain] }, { sub: 'alice' });
        assert.equal(response.status, 403, path);
        assert.equal(
          ((await response.json()) as { detail: string }).detail,
          'The caller is not an operator: the codec endpoint is for subjects listed in OPERATOR_SUBJECTS',
        );
      }
    });

    it('decodes for the development opening’s local caller without operator claims', async () => {
      const local = await serve(codecApp(deps, t.db, { localCaller: true }));
      const [sealed] = await codec.encode([
        { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{}') },
      ]);
      const response = await post(local, '/codec/decode', { payloads: [payloadToJson(sealed!)] });
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), {
        payloads: [{ metadata: { encoding: Buffer.from('json/plain').toString('base64') }, data: 'e30=' }],
      });
    });

    it('refuses an invalid body with 400 and each error’s pointer and words', async () => {
      const invalid = await post(url, '/codec/decode', { payloads: [{ data: 5 }] }, { sub: OPERATOR });
      assert.equal(invalid.status, 400);
      assert.deepEqual(((await invalid.json()) as { errors: unknown }).errors, [
        { pointer: '/payloads/0/data', detail: 'must be string,null' },
      ]);
      const missing = await post(url, '/codec/encode', { other: 1 }, { sub: OPERATOR });
      assert.equal(missing.status, 400);
      assert.deepEqual(((await missing.json()) as { errors: unknown }).errors, [
        { pointer: '/', detail: "must have required property 'payloads'" },
      ]);
      const both = await post(url, '/codec/encode', { payloads: [{ data: 5, metadata: 'x' }] }, { sub: OPERATOR });
      assert.equal(((await both.json()) as { errors: unknown[] }).errors.length, 2, 'every error, not the first');
    });

    it('refuses an undecodable payload with 400 naming the key id only; other codec failures are 500', async () => {
      const foreign = new EncryptionCodec(parsePayloadKeyRing(`k9:${randomBytes(32).toString('base64')}`));
      const [sealed] = await foreign.encode([{ data: Buffer.from('secret') }]);
      const undecodable = await post(url, '/codec/decode', { payloads: [payloadToJson(sealed!)] }, { sub: OPERATOR });
      assert.equal(undecodable.status, 400);
      const problem = (await undecodable.json()) as { detail: string; errors?: unknown };
      assert.match(problem.detail, /key "k9", which is not in this process's PAYLOAD_ENCRYPTION_KEYS/);
      assert.equal(problem.errors, undefined);
      const broken: PayloadCodec = {
        encode: () => Promise.reject(new Error('disk on fire')),
        decode: () => Promise.reject(new Error('disk on fire')),
      };
      const failing = await serve(codecApp({ ...deps, codec: broken }, t.db));
      const response = await post(failing, '/codec/encode', { payloads: [plain] }, { sub: OPERATOR });
      assert.equal(response.status, 500);
    });
  });
});

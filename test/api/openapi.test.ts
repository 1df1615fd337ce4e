import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import type Koa from 'koa';
import type { Router } from '@koa/router';
import pino from 'pino';
import { createApp, type AppDeps } from '../../api';
import { EventNoLongerRetainedError } from '../../api/deliveries/redelivery';
import { buildOpenApiDocument, type HttpMethod, type OpenApiDocument } from '../../api/openapi/document';
import { type ReadinessDeps, type SearchAttributesReport } from '../../api/health/router';
import { registerWebhookBodySchema, rotateSecretBodySchema, updateWebhookBodySchema } from '../../api/webhooks/schemas';
import { codecBodySchema } from '../../api/codec/router';
import { DependencyUnavailableError } from '../../api/http/errors';
import { SUBSCRIBABLE_TYPES, WEBHOOK_TYPES } from '../../common/contract';
import { createSecretBox } from '../../common/crypto/secrets';
import {
  EncryptionCodec,
  parsePayloadKeyRing,
  payloadToJson,
  type JsonPayload,
} from '../../common/crypto/payload-codec';
import type { TestDeliveryOutcome } from '../../api/webhooks/test-event';
import * as store from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { bearer, hsToken, TEST_JWT_SECRET } from '../support/tokens';

/** The Swagger UI page and its assets: served by the app, but they are the docs' renderer, not the API. */
const UNDOCUMENTED = new Set([
  'GET /docs',
  'GET /docs/swagger-initializer.js',
  'GET /docs/{asset}',
  'GET /portal',
  'GET /portal/portal.js',
  'GET /portal/portal.css',
]);

/** What the brief and the handlers promise, per operation. */
const EXPECTED_STATUSES: Record<string, string[]> = {
  'POST /webhooks/register': ['201', '400', '401', '403', '404', '409', '413', '415', '429', '503'],
  'PATCH /webhooks': ['200', '400', '401', '403', '404', '409', '413', '415', '429', '503'],
  'GET /webhooks/project/{projectId}': ['200', '400', '401', '403', '404', '429', '503'],
  'DELETE /webhooks/project/{projectId}': ['204', '400', '401', '403', '404', '429', '503'],
  'POST /webhooks/test/project/{projectId}': ['200', '400', '401', '403', '404', '409', '429', '502', '503'],
  'POST /webhooks/project/{projectId}/pause': ['200', '400', '401', '403', '404', '413', '415', '429', '503'],
  'POST /webhooks/project/{projectId}/resume': ['200', '400', '401', '403', '404', '429', '503'],
  'GET /webhooks/project/{projectId}/notifications': ['200', '400', '401', '403', '404', '429', '503'],
  'PUT /webhooks/project/{projectId}/notifications': ['200', '400', '401', '403', '404', '413', '415', '429', '503'],
  'POST /webhooks/project/{projectId}/secret/rotate': ['200', '400', '401', '403', '404', '413', '415', '429', '503'],
  'POST /webhooks/project/{projectId}/signing-key/rotate': [
    '200',
    '400',
    '401',
    '403',
    '404',
    '409',
    '413',
    '415',
    '429',
    '503',
  ],
  'GET /healthz': ['200'],
  'GET /readyz': ['200', '503'],
  'GET /openapi.json': ['200'],
  'GET /webhooks/project/{projectId}/deliveries': ['200', '400', '401', '403', '404', '429'],
  'GET /webhooks/project/{projectId}/deliveries/{id}': ['200', '400', '401', '403', '404', '429'],
  'GET /webhooks/project/{projectId}/deliveries/{id}/attempts': ['200', '400', '401', '403', '404', '429'],
  'POST /webhooks/project/{projectId}/deliveries/{id}/redeliver': [
    '202',
    '400',
    '401',
    '403',
    '404',
    '409',
    '410',
    '429',
    '503',
  ],
  'POST /webhooks/project/{projectId}/deliveries/recover': [
    '202',
    '400',
    '401',
    '403',
    '404',
    '413',
    '415',
    '429',
    '503',
  ],
  'GET /webhooks/project/{projectId}/health': ['200', '400', '401', '403', '404', '429'],
  'GET /metrics': ['200', '401'],
  'POST /webhooks/project/{projectId}/portal-sessions': [
    '201',
    '400',
    '401',
    '403',
    '404',
    '409',
    '413',
    '415',
    '429',
    '503',
  ],
  'DELETE /webhooks/project/{projectId}/portal-sessions': ['204', '400', '401', '403', '404', '429', '503'],
  'POST /codec/encode': ['200', '400', '401', '403', '413', '415', '429', '503'],
  'POST /codec/decode': ['200', '400', '401', '403', '413', '415', '429', '503'],
  'GET /audit': ['200', '400', '401', '403', '429'],
  'GET /webhooks/project/{projectId}/audit': ['200', '400', '401', '403', '404', '429'],
  'POST /erasures': ['202', '400', '401', '403', '413', '415', '429', '503'],
  'GET /erasures/{id}': ['200', '401', '403', '404', '429'],
  'GET /erasures/{id}/certificate': ['200', '401', '403', '404', '409', '429'],
  'POST /purges': ['200', '202', '400', '401', '403', '404', '413', '415', '429', '503'],
  'GET /purges/{purgeId}': ['200', '401', '403', '404', '429'],
  'GET /purges/{purgeId}/certificate': ['200', '401', '403', '404', '409', '429'],
};

/** The one subject the test app's operator policy lists. */
const OPERATOR = 'ops-anna';
const keyRing = (id: string) => parsePayloadKeyRing(`${id}:${randomBytes(32).toString('base64')}`);

const METHODS: HttpMethod[] = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** "METHOD /path" of every operation in the document. */
function documentedOperations(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method]).map((method) => `${method.toUpperCase()} ${path}`),
  );
}

/** "METHOD /path" of every route of every router the app mounts, in OpenAPI path syntax. */
function servedRoutes(app: Koa): string[] {
  const routers = app.middleware
    .map((middleware) => (middleware as { router?: Router }).router)
    .filter((router): router is Router => router !== undefined);
  return routers.flatMap((router) =>
    router.stack.flatMap((layer) => {
      const path = String(layer.path)
        .replace(/:(\w+)/g, '{$1}')
        .replace(/(.)\/$/, '$1');
      return layer.methods.filter((method) => method !== 'HEAD').map((method) => `${method} ${path}`);
    }),
  );
}

/** The document lists exactly the routes the app mounts, the Swagger UI's own pages aside. */
function assertDocumentsServedRoutes(app: Koa, document: OpenApiDocument): void {
  const routes = servedRoutes(app);
  // The walk must see the public and the authenticated routers, or the comparison below proves nothing.
  assert.ok(routes.includes('POST /webhooks/register') && routes.includes('GET /readyz'), routes.join(', '));
  assert.ok(routes.includes('GET /docs'), routes.join(', '));
  const api = routes.filter((route) => !UNDOCUMENTED.has(route)).sort();
  assert.deepEqual(documentedOperations(document).sort(), api);
}

describe('openapi: the document at /openapi.json', () => {
  let t: TestDatabase;
  let server: LocalServer;
  let app: Koa;
  let served: OpenApiDocument;
  let temporalUp = true;
  let testOutcome: TestDeliveryOutcome;
  let appDeps: AppDeps;
  /** What readiness finds of the namespace's search attributes. */
  let searchAttributesReport: SearchAttributesReport = { state: 'registered' };
  const searchAttributes = () => Promise.resolve(searchAttributesReport);
  /** What the redelivery starter does: start (a workflow id) or find the event gone (410). */
  let redeliveryRetained = true;
  /** Whether an erasure's job starts, or Temporal is down (503, nothing recorded). */
  let erasureStarts = true;
  /** Whether a purge's job starts, or Temporal is down (503, nothing recorded). */
  let purgeStarts = true;
  const temporal = {
    workflowService: {
      getSystemInfo: () => (temporalUp ? Promise.resolve({}) : Promise.reject(new Error('UNAVAILABLE'))),
    },
    withDeadline: <R>(_deadline: number | Date, fn: () => Promise<R>) => fn(),
  } as unknown as ReadinessDeps['temporal'];

  before(async () => {
    t = await createTestDatabase();
    appDeps = {
      db: t.db,
      secretBox: createSecretBox(randomBytes(32)),
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.resolve(testOutcome),
      // Two tests a minute, so the third of a project shows the documented 429.
      testEventLimits: { perMinute: 2, waitMs: 1_000 },
      // Three redeliver calls and one recover call a minute, so the next ones show the documented 429.
      redeliveryLimits: { redeliverPerMinute: 3, recoverPerMinute: 1 },
      redelivery: (row) =>
        redeliveryRetained
          ? Promise.resolve(`webhook-redelivery-${row.id}`)
          : Promise.reject(new EventNoLongerRetainedError(row.id)),
      codec: {
        codec: new EncryptionCodec(keyRing('k1')),
        operators: { subjects: new Set([OPERATOR]) },
        corsOrigins: [],
      },
      erasures: {
        personHashKey: randomBytes(32),
        start: () => (erasureStarts ? Promise.resolve() : Promise.reject(new DependencyUnavailableError('Temporal'))),
      },
      purges: {
        start: () => (purgeStarts ? Promise.resolve() : Promise.reject(new DependencyUnavailableError('Temporal'))),
      },
    };
    appDeps.readiness = { temporal, searchAttributes };
    app = createApp(appDeps);
    server = await listenLocal(app.callback());
    const response = await fetch(`${server.url}/openapi.json`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
    served = (await response.json()) as OpenApiDocument;
  });
  after(async () => {
    await server?.close();
    await t?.destroy();
  });

  it('validates as OpenAPI 3.1', async () => {
    // An ES module: loaded with import() from this CommonJS test.
    const { Validator } = await import('@seriousme/openapi-schema-validator');
    const validator = new Validator();
    const result = await validator.validate(structuredClone(served) as unknown as Record<string, unknown>);
    assert.equal(validator.version, '3.1');
    assert.deepEqual(result.errors, undefined);
    assert.equal(result.valid, true);
  });

  it('documents every route the app serves, and nothing it does not serve', () => {
    assert.ok(servedRoutes(app).includes('POST /codec/decode'), 'the test app mounts the codec');
    assertDocumentsServedRoutes(app, served);
  });

  it('lists neither /codec nor its tag and schemas when the app has no codec', async () => {
    const deps = { ...appDeps, codec: undefined };
    const bare = createApp({ ...deps, readiness: { temporal } });
    const local = await listenLocal(bare.callback());
    try {
      const document = (await (await fetch(`${local.url}/openapi.json`)).json()) as OpenApiDocument;
      assertDocumentsServedRoutes(bare, document);
      const codecPaths = Object.keys(document.paths).filter((path) => path.startsWith('/codec'));
      assert.deepEqual(codecPaths, []);
      assert.equal(document.components.schemas.CodecBody, undefined);
      assert.ok(!document.tags.some((tag) => tag.name === 'codec'), 'no codec tag');
      const decode = await fetch(`${local.url}/codec/decode`, { method: 'POST', headers: bearer(hsToken(OPERATOR)) });
      assert.equal(decode.status, 404, 'nor served');
    } finally {
      await local.close();
    }
  });

  it('takes its request bodies from the very schema objects the API validates with', () => {
    const built = buildOpenApiDocument({ codec: true });
    assert.equal(built.components.schemas.RegisterWebhookBody, registerWebhookBodySchema);
    assert.equal(built.components.schemas.UpdateWebhookBody, updateWebhookBodySchema);
    assert.equal(built.components.schemas.RotateSecretBody, rotateSecretBodySchema);
    assert.equal(built.components.schemas.CodecBody, codecBodySchema);
    assert.deepEqual(served.components.schemas.CodecBody, JSON.parse(JSON.stringify(codecBodySchema)));
    assert.deepEqual(
      served.components.schemas.RegisterWebhookBody,
      JSON.parse(JSON.stringify(registerWebhookBodySchema)),
    );
    const bodyRef = (method: HttpMethod, path: string) =>
      (served.paths[path]?.[method]?.requestBody as { content: Record<string, { schema: { $ref: string } }> }).content[
        'application/json'
      ]!.schema.$ref;
    assert.equal(bodyRef('post', '/webhooks/register'), '#/components/schemas/RegisterWebhookBody');
    assert.equal(bodyRef('patch', '/webhooks'), '#/components/schemas/UpdateWebhookBody');
    assert.equal(
      bodyRef('post', '/webhooks/project/{projectId}/secret/rotate'),
      '#/components/schemas/RotateSecretBody',
    );
    assert.equal(bodyRef('post', '/codec/encode'), '#/components/schemas/CodecBody');
    assert.equal(bodyRef('post', '/codec/decode'), '#/components/schemas/CodecBody');
  });

  it('lists the contract’s event types where the portal reads them: the log’s type filter and the webhook’s types', () => {
    const filter = (
      served.paths['/webhooks/project/{projectId}/deliveries']!.get!.parameters as {
        in: string;
        name: string;
        schema: { enum: string[] };
      }[]
    ).find((x) => x.in === 'query' && x.name === 'type')!;
    assert.deepEqual(filter.schema.enum, [...WEBHOOK_TYPES]);
    const update = served.components.schemas.UpdateWebhookBody as {
      properties: { types: { items: { enum: string[] } } };
    };
    assert.deepEqual(update.properties.types.items.enum, [...SUBSCRIBABLE_TYPES]);
  });

  it('states what the routes enforce: a path id, projectId, cursor or codec body it allows is never refused', async () => {
    const ajv = new Ajv2020({ strict: false });
    addFormats(ajv);
    const p = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, p, 'Docs project');
    await store.addMember(t.db, p, 'alice');
    const parameter = (path: string, method: HttpMethod, name: string) =>
      ajv.compile(
        (served.paths[path]![method]!.parameters as { name: string; schema: object }[]).find((x) => x.name === name)!
          .schema,
      );
    const documentedId = parameter('/webhooks/project/{projectId}/deliveries/{id}', 'get', 'id');
    const documentedProjectId = parameter('/webhooks/project/{projectId}/health', 'get', 'projectId');
    const documentedCursor = parameter('/webhooks/project/{projectId}/deliveries', 'get', 'cursor');
    const documentedCodecBody = ajv.compile({ ...served.components.schemas.CodecBody, $id: undefined });
    // Every byte percent-encoded: the route sees exactly the text generated.
    const encode = (text: string) => [...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
    const status = async (path: string, init: RequestInit = {}) =>
      (await fetch(`${server.url}${path}`, { ...init, headers: { ...bearer(hsToken('alice')), ...init.headers } }))
        .status;
    /** Any text, and text the documented pattern matches (when there is one). */
    const text = (validate: { schema: unknown }) => {
      const { pattern } = validate.schema as { pattern?: string };
      const anyText = fc.string({ unit: 'binary', maxLength: 320 });
      return pattern ? fc.oneof(anyText, fc.stringMatching(new RegExp(pattern))) : anyText;
    };

    await fc.assert(
      fc.asyncProperty(text(documentedId), async (id) => {
        // An empty segment is another route, and URLs resolve . and .. (%2e too) before a request is sent.
        fc.pre(!['', '.', '..'].includes(id));
        const answered = await status(`/webhooks/project/${p}/deliveries/${encode(id)}`);
        assert.equal(answered === 400, !documentedId(id), `id ${JSON.stringify(id)}: ${answered}`);
      }),
      { numRuns: 150 },
    );
    await fc.assert(
      fc.asyncProperty(text(documentedProjectId), async (projectId) => {
        fc.pre(!['', '.', '..'].includes(projectId));
        const answered = await status(`/webhooks/project/${encode(projectId)}/health`);
        assert.equal(answered === 400, !documentedProjectId(projectId), `${JSON.stringify(projectId)}: ${answered}`);
      }),
      { numRuns: 150 },
    );
    // A cursor is opaque: the document cannot promise that every base64url string is one, only refuse what no
    // cursor can be.
    await fc.assert(
      fc.asyncProperty(text(documentedCursor), async (cursor) => {
        const answered = await status(`/webhooks/project/${p}/deliveries?cursor=${encode(cursor)}`);
        if (!documentedCursor(cursor)) assert.equal(answered, 400, JSON.stringify(cursor));
      }),
      { numRuns: 100 },
    );
    const base64 = fc.uint8Array({ maxLength: 24 }).map((bytes) => Buffer.from(bytes).toString('base64'));
    const payload = fc.record(
      {
        // Any key but "__proto__", which the document (and the body parser) refuse: tried on its own below.
        metadata: fc.oneof(
          fc.constant(null),
          fc.dictionary(
            fc.string().filter((key) => key !== '__proto__'),
            base64,
            { maxKeys: 3 },
          ),
        ),
        data: fc.oneof(fc.constant(null), base64),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(payload, { maxLength: 4 }), async (payloads) => {
        const body = { payloads };
        assert.ok(documentedCodecBody(body));
        const answered = await fetch(`${server.url}/codec/encode`, {
          method: 'POST',
          headers: { ...bearer(hsToken(OPERATOR)), 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        assert.equal(answered.status, 200, await answered.text());
      }),
      { numRuns: 100 },
    );
    // The body parser refuses a __proto__ key (prototype poisoning) at any depth: the document forbids it wherever a
    // key may appear (extra members are scalars, so no other object can hold one), and the 400 says what is refused.
    const encodeRaw = (body: string) =>
      fetch(`${server.url}/codec/encode`, {
        method: 'POST',
        headers: { ...bearer(hsToken(OPERATOR)), 'content-type': 'application/json' },
        body,
      });
    for (const body of [
      '{"payloads":[],"__proto__":1}',
      '{"payloads":[{"__proto__":{}}]}',
      '{"payloads":[{"metadata":{"__proto__":"eA=="}}]}',
      '{"payloads":[],"extra":{"__proto__":1}}',
      '{"payloads":[{"data":null,"extra":[{"a":{"__proto__":null}}]}]}',
    ]) {
      assert.equal(documentedCodecBody(JSON.parse(body)), false, body);
      const answered = await encodeRaw(body);
      assert.equal(answered.status, 400, body);
      assert.equal(
        ((await answered.json()) as { detail: string }).detail,
        'The request body holds a "__proto__" key, which the API refuses in any object of a body',
        body,
      );
    }
    for (const body of ['{"payloads":[],"extra":{"a":1}}', '{"payloads":[{"extra":[1]}]}']) {
      assert.equal(documentedCodecBody(JSON.parse(body)), false, body);
      assert.equal((await encodeRaw(body)).status, 400, body);
    }
    const scalarsBeside = '{"payloads":[{"data":null,"note":"x"}],"version":2,"trace":null}';
    assert.equal(documentedCodecBody(JSON.parse(scalarsBeside)), true);
    assert.equal((await encodeRaw(scalarsBeside)).status, 200);
  });

  it('lists the status codes of every operation', () => {
    const statuses = Object.fromEntries(
      documentedOperations(served).map((operation) => {
        const [method, path] = operation.split(' ') as [HttpMethod, string];
        return [operation, Object.keys(served.paths[path]![method.toLowerCase() as HttpMethod]!.responses).sort()];
      }),
    );
    assert.deepEqual(statuses, EXPECTED_STATUSES);
  });

  it('requires the bearer JWT on the webhook and codec endpoints and nothing on the public ones', () => {
    assert.deepEqual(served.security, [{ bearerAuth: [] }]);
    assert.deepEqual(served.components.securitySchemes.bearerAuth, {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description: served.components.securitySchemes.bearerAuth!.description,
    });
    for (const operation of documentedOperations(served)) {
      const [method, path] = operation.split(' ') as [string, string];
      const security = served.paths[path]![method.toLowerCase() as HttpMethod]!.security;
      if (
        path.startsWith('/webhooks') ||
        path.startsWith('/codec') ||
        path === '/audit' ||
        path.startsWith('/erasures') ||
        path.startsWith('/purges')
      )
        assert.equal(security, undefined, operation);
      else assert.deepEqual(security, [], operation);
    }
  });

  describe('every response the API gives matches the document, and every documented one is given', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    const seen = new Set<string>();
    const pointer = (...parts: string[]) => parts.map((p) => `/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

    before(() => {
      ajv.addSchema(served, 'openapi.json');
    });

    /** Calls the API and checks status, media type and body against the operation's documented response. */
    async function expect(
      operation: string,
      status: number,
      request: {
        path?: string;
        user?: string;
        /** A bearer token as is (a portal link's), instead of user's. */
        token?: string;
        body?: unknown;
        raw?: string;
        contentType?: string;
        base?: string;
      } = {},
    ): Promise<Record<string, unknown>> {
      const [method, path] = operation.split(' ') as [string, string];
      const headers: Record<string, string> = {
        ...(request.user && bearer(hsToken(request.user))),
        ...(request.token && bearer(request.token)),
      };
      let body = request.raw;
      if (request.body !== undefined) body = JSON.stringify(request.body);
      if (body !== undefined) headers['content-type'] = request.contentType ?? 'application/json';
      const response = await fetch((request.base ?? server.url) + (request.path ?? path), { method, headers, body });
      const text = await response.text();
      assert.equal(response.status, status, `${operation}: ${text}`);
      seen.add(`${operation} ${status}`);

      let responsePointer = pointer('paths', path, method.toLowerCase(), 'responses', String(status));
      let documented = served.paths[path]![method.toLowerCase() as HttpMethod]!.responses[String(status)] as {
        $ref?: string;
        content?: Record<string, unknown>;
      };
      assert.ok(documented, `${operation} does not document ${status}`);
      if (documented.$ref) {
        const name = documented.$ref.replace('#/components/responses/', '');
        responsePointer = pointer('components', 'responses', name);
        documented = served.components.responses[name] as typeof documented;
      }
      const mediaType = response.headers.get('content-type')?.split(';')[0];
      if (!documented.content) {
        assert.equal(text, '', `${operation} ${status} documents no body`);
        return {};
      }
      assert.ok(mediaType && documented.content[mediaType], `${operation} ${status}: ${mediaType} is not documented`);
      if (mediaType === 'text/plain') return {};
      const validate = ajv.getSchema(`openapi.json#${responsePointer}${pointer('content', mediaType, 'schema')}`);
      assert.ok(validate, `${operation} ${status}: no schema`);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      assert.ok(validate(parsed), `${operation} ${status}: ${ajv.errorsText(validate.errors)} in ${text}`);
      return parsed;
    }

    async function project(...members: string[]): Promise<string> {
      const id = `p-${randomUUID().slice(0, 8)}`;
      await store.addProject(t.db, id, 'Docs project');
      for (const user of members) await store.addMember(t.db, id, user);
      return id;
    }

    const REGISTER = 'POST /webhooks/register';
    const UPDATE = 'PATCH /webhooks';
    const GET = 'GET /webhooks/project/{projectId}';
    const DELETE = 'DELETE /webhooks/project/{projectId}';
    const TEST = 'POST /webhooks/test/project/{projectId}';
    const body = (projectId: string) => ({
      projectId,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    const at = (path: string, projectId: string) => path.replace('{projectId}', projectId);

    it('register: 201, 400, 401, 403, 404, 409, 413, 415', async () => {
      const p = await project('alice');
      const created = await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      assert.match(String(created.secret), /^whsec_/);
      await expect(REGISTER, 409, { user: 'alice', body: body(p) });
      const invalid = await expect(REGISTER, 400, { user: 'alice', body: { projectId: p, url: 'nope', types: [] } });
      assert.ok(Array.isArray(invalid.errors));
      await expect(REGISTER, 400, { user: 'alice', raw: '{not json' });
      await expect(REGISTER, 401, { body: body(p) });
      await expect(REGISTER, 403, { user: 'mallory', body: body(p) });
      await expect(REGISTER, 404, { user: 'alice', body: body('no-such-project') });
      await expect(REGISTER, 413, { user: 'alice', body: { ...body(p), pad: 'x'.repeat(200_000) } });
      await expect(REGISTER, 415, { user: 'alice', raw: 'projectId=x', contentType: 'text/plain' });
    });

    it('update: 200, 400, 401, 403, 404, 413, 415', async () => {
      const p = await project('alice');
      await expect(UPDATE, 404, { user: 'alice', body: { projectId: p, types: ['VITAL_THRESHOLD'] } });
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const updated = await expect(UPDATE, 200, { user: 'alice', body: { projectId: p, types: ['VITAL_THRESHOLD'] } });
      assert.deepEqual(updated.types, ['VITAL_THRESHOLD']);
      await expect(UPDATE, 400, { user: 'alice', body: { projectId: p } });
      await expect(UPDATE, 401, { body: { projectId: p, types: ['VITAL_THRESHOLD'] } });
      await expect(UPDATE, 403, { user: 'mallory', body: { projectId: p, types: ['VITAL_THRESHOLD'] } });
      await expect(UPDATE, 413, { user: 'alice', raw: JSON.stringify({ projectId: 'x'.repeat(200_000) }) });
      await expect(UPDATE, 415, { user: 'alice', raw: 'projectId=x', contentType: 'text/plain' });
    });

    it('get, test and delete: 200, 204, 401, 403, 404, 429, 502', async () => {
      const p = await project('alice');
      await expect(GET, 404, { path: at(GET.slice(4), p), user: 'alice' });
      await expect(TEST, 404, { path: at(TEST.slice(5), p), user: 'alice' });
      await expect(DELETE, 404, { path: at(DELETE.slice(7), p), user: 'alice' });
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const got = await expect(GET, 200, { path: at(GET.slice(4), p), user: 'alice' });
      assert.equal(got.secret, undefined);
      await expect(GET, 401, { path: at(GET.slice(4), p) });
      await expect(GET, 403, { path: at(GET.slice(4), p), user: 'mallory' });

      testOutcome = { delivered: true, statusCode: 200, durationMs: 3, workflowId: 'wf-ok' };
      await expect(TEST, 200, { path: at(TEST.slice(5), p), user: 'alice' });
      testOutcome = { delivered: false, reason: 'receiver answered 500', statusCode: 500, workflowId: 'wf-bad' };
      const failed = await expect(TEST, 502, { path: at(TEST.slice(5), p), user: 'alice' });
      assert.equal(failed.workflowId, 'wf-bad');
      const limited = await expect(TEST, 429, { path: at(TEST.slice(5), p), user: 'alice' });
      assert.match(String(limited.detail), /^At most 2 test events a minute per project/);
      await expect(TEST, 401, { path: at(TEST.slice(5), p) });
      await expect(TEST, 403, { path: at(TEST.slice(5), p), user: 'mallory' });

      await expect(DELETE, 401, { path: at(DELETE.slice(7), p) });
      await expect(DELETE, 403, { path: at(DELETE.slice(7), p), user: 'mallory' });
      await expect(DELETE, 204, { path: at(DELETE.slice(7), p), user: 'alice' });
    });

    it('rotate secret: 200, 400, 401, 403, 404, 413, 415', async () => {
      const ROTATE = 'POST /webhooks/project/{projectId}/secret/rotate';
      const p = await project('alice');
      const path = at(ROTATE.slice(5), p);
      await expect(ROTATE, 404, { path, user: 'alice' });
      await expect(ROTATE, 404, { path: at(ROTATE.slice(5), 'no-such-project'), user: 'alice' });
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const rotated = await expect(ROTATE, 200, { path, user: 'alice', body: { overlapSeconds: 60 } });
      assert.match(String(rotated.secret), /^whsec_/);
      await expect(ROTATE, 200, { path, user: 'alice' });
      await expect(ROTATE, 400, { path, user: 'alice', body: { overlapSeconds: 604_801 } });
      await expect(ROTATE, 401, { path });
      await expect(ROTATE, 403, { path, user: 'mallory' });
      await expect(ROTATE, 413, { path, user: 'alice', body: { pad: 'x'.repeat(200_000) } });
      await expect(ROTATE, 415, { path, user: 'alice', raw: 'overlapSeconds=0', contentType: 'text/plain' });
    });

    it('rotate signing key: 200, 400, 401, 403, 404, 409, 413, 415', async () => {
      const ROTATE = 'POST /webhooks/project/{projectId}/signing-key/rotate';
      const p = await project('alice');
      const path = at(ROTATE.slice(5), p);
      await expect(ROTATE, 404, { path, user: 'alice' });
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const conflict = await expect(ROTATE, 409, { path, user: 'alice' });
      assert.match(String(conflict.detail), /signatureScheme v1a/);
      const patched = await expect('PATCH /webhooks', 200, {
        user: 'alice',
        body: { projectId: p, signatureScheme: 'v1a' },
      });
      assert.match(String(patched.publicKey), /^whpk_/);
      const rotated = await expect(ROTATE, 200, { path, user: 'alice', body: { overlapSeconds: 60 } });
      assert.equal(rotated.previousPublicKey, patched.publicKey);
      await expect(ROTATE, 200, { path, user: 'alice' });
      await expect(ROTATE, 400, { path, user: 'alice', body: { overlapSeconds: 604_801 } });
      await expect(ROTATE, 401, { path });
      await expect(ROTATE, 403, { path, user: 'mallory' });
      await expect(ROTATE, 413, { path, user: 'alice', body: { pad: 'x'.repeat(200_000) } });
      await expect(ROTATE, 415, { path, user: 'alice', raw: 'overlapSeconds=0', contentType: 'text/plain' });
    });

    it('pause and resume: 200, 400, 401, 403, 404, 413, 415, and a TEST while paused is a 409', async () => {
      const PAUSE = 'POST /webhooks/project/{projectId}/pause';
      const RESUME = 'POST /webhooks/project/{projectId}/resume';
      const p = await project('alice');
      const [pause, resume] = [at(PAUSE.slice(5), p), at(RESUME.slice(5), p)];
      await expect(PAUSE, 404, { path: pause, user: 'alice' });
      await expect(RESUME, 404, { path: resume, user: 'alice' });
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const paused = await expect(PAUSE, 200, { path: pause, user: 'alice', body: { hours: 2 } });
      assert.ok(typeof paused.pausedUntil === 'string');
      const test = await expect(TEST, 409, { path: at(TEST.slice(5), p), user: 'alice' });
      assert.equal(test.detail, 'The webhook is paused: resume it to send a test event');
      const problem = await expect(PAUSE, 400, { path: pause, user: 'alice', body: { hours: 100 } });
      assert.equal(problem.detail, 'The request body is invalid: /hours must be at most PAUSE_MAX_HOURS (72)');
      await expect(PAUSE, 400, { path: pause, user: 'alice', body: { until: 'monday' } });
      await expect(PAUSE, 401, { path: pause });
      await expect(PAUSE, 403, { path: pause, user: 'mallory' });
      await expect(PAUSE, 413, { path: pause, user: 'alice', body: { pad: 'x'.repeat(200_000) } });
      await expect(PAUSE, 415, { path: pause, user: 'alice', raw: 'hours=1', contentType: 'text/plain' });
      await expect(RESUME, 400, { path: at(RESUME.slice(5), 'bad%00id'), user: 'alice' });
      await expect(RESUME, 401, { path: resume });
      await expect(RESUME, 403, { path: resume, user: 'mallory' });
      const resumed = await expect(RESUME, 200, { path: resume, user: 'alice' });
      assert.deepEqual([resumed.pausedAt, resumed.pausedUntil], [null, null]);
    });

    it('notification contacts: 200, 400, 401, 403, 404, 413, 415', async () => {
      const GET_CONTACTS = 'GET /webhooks/project/{projectId}/notifications';
      const PUT_CONTACTS = 'PUT /webhooks/project/{projectId}/notifications';
      const p = await project('alice');
      const path = at(PUT_CONTACTS.slice(4), p);
      const contacts = { url: 'https://oncall.example/notices', emails: ['oncall@example.com'] };
      assert.deepEqual(await expect(GET_CONTACTS, 200, { path, user: 'alice' }), { url: null, emails: [] });
      assert.deepEqual(await expect(PUT_CONTACTS, 200, { path, user: 'alice', body: contacts }), contacts);
      assert.deepEqual(await expect(GET_CONTACTS, 200, { path, user: 'alice' }), contacts);
      const bad = await expect(PUT_CONTACTS, 400, { path, user: 'alice', body: { url: null, emails: ['nope'] } });
      assert.match(String(bad.detail), /\/emails\/0 must match pattern/);
      await expect(GET_CONTACTS, 400, { path: at(GET_CONTACTS.slice(4), 'bad%00id'), user: 'alice' });
      for (const operation of [GET_CONTACTS, PUT_CONTACTS]) {
        const body = operation === PUT_CONTACTS ? contacts : undefined;
        await expect(operation, 401, { path, body });
        await expect(operation, 403, { path, user: 'mallory', body });
        await expect(operation, 404, { path: path.replace(p, 'no-such-project'), user: 'alice', body });
      }
      await expect(PUT_CONTACTS, 413, { path, user: 'alice', body: { ...contacts, pad: 'x'.repeat(200_000) } });
      await expect(PUT_CONTACTS, 415, { path, user: 'alice', raw: 'url=x', contentType: 'text/plain' });
    });

    it('every webhook operation: 400 for a projectId outside the safe alphabet, 503 when a dependency is down', async () => {
      for (const operation of [GET, DELETE, TEST]) {
        const problem = await expect(operation, 400, {
          path: at(operation.slice(operation.indexOf(' ') + 1), 'bad%00id'),
          user: 'alice',
        });
        assert.match(String(problem.detail), /The path parameter projectId must be/);
      }
      // The same API on a database that refuses connections and a Temporal that does not answer.
      const deadDb = store.createDb('postgres://u:p@127.0.0.1:1/none', {
        acquireTimeoutMs: 1_000,
        connectTimeoutMs: 500,
      });
      const down = await listenLocal(
        createApp({
          db: deadDb,
          secretBox: createSecretBox(randomBytes(32)),
          logger: pino({ level: 'silent' }),
          auth: { mode: 'secret', secret: TEST_JWT_SECRET },
          sendTestEvent: () => Promise.reject(new DependencyUnavailableError('Temporal')),
          codec: {
            codec: new EncryptionCodec(keyRing('k1')),
            operators: { subjects: new Set([OPERATOR]) },
            corsOrigins: [],
          },
        }).callback(),
      );
      try {
        const base = down.url;
        const p = 'p-down';
        const ROTATE = 'POST /webhooks/project/{projectId}/secret/rotate';
        const SESSIONS = '/webhooks/project/{projectId}/portal-sessions';
        await expect(ROTATE, 503, { base, path: at(ROTATE.slice(5), p), user: 'alice', body: {} });
        const ROTATE_KEY = 'POST /webhooks/project/{projectId}/signing-key/rotate';
        await expect(ROTATE_KEY, 503, { base, path: at(ROTATE_KEY.slice(5), p), user: 'alice', body: {} });
        const notifications = `/webhooks/project/${p}/notifications`;
        await expect('GET /webhooks/project/{projectId}/notifications', 503, {
          base,
          path: notifications,
          user: 'alice',
        });
        await expect('PUT /webhooks/project/{projectId}/notifications', 503, {
          base,
          path: notifications,
          user: 'alice',
          body: { url: null, emails: [] },
        });
        for (const action of ['pause', 'resume'])
          await expect(`POST /webhooks/project/{projectId}/${action}`, 503, {
            base,
            path: `/webhooks/project/${p}/${action}`,
            user: 'alice',
          });
        await expect(`POST ${SESSIONS}`, 503, { base, path: at(SESSIONS, p), user: 'alice', body: {} });
        await expect(`DELETE ${SESSIONS}`, 503, { base, path: at(SESSIONS, p), user: 'alice' });
        // The codec needs no database but its audit row: no row, no answer.
        for (const operation of ['POST /codec/encode', 'POST /codec/decode'])
          await expect(operation, 503, { base, user: OPERATOR, body: { payloads: [] } });
        await expect(REGISTER, 503, { base, user: 'alice', body: body(p) });
        await expect(UPDATE, 503, { base, user: 'alice', body: { projectId: p, types: ['VITAL_THRESHOLD'] } });
        await expect(GET, 503, { base, path: at(GET.slice(4), p), user: 'alice' });
        await expect(DELETE, 503, { base, path: at(DELETE.slice(7), p), user: 'alice' });
        const unavailable = await expect(TEST, 503, { base, path: at(TEST.slice(5), p), user: 'alice' });
        assert.match(String(unavailable.detail), /is not answering/);
      } finally {
        await down.close();
        await deadDb.destroy();
      }
    });

    it('health and the document itself: 200, 503', async () => {
      await expect('GET /healthz', 200);
      for (searchAttributesReport of [
        { state: 'registered' },
        { state: 'missing', missing: ['ProjectId', 'WebhookType'], detail: 'deliveries start and run without them' },
        { state: 'unknown' },
      ] satisfies SearchAttributesReport[])
        assert.deepEqual((await expect('GET /readyz', 200)).searchAttributes, searchAttributesReport);
      temporalUp = false;
      try {
        const down = await expect('GET /readyz', 503);
        assert.equal(down.detail, 'Not ready: Temporal unreachable');
      } finally {
        temporalUp = true;
      }
      await expect('GET /openapi.json', 200);
    });

    it('delivery log, redelivery, recovery, endpoint health and metrics: every documented status', async () => {
      const p = await project('alice');
      const LIST = 'GET /webhooks/project/{projectId}/deliveries';
      const DETAIL = 'GET /webhooks/project/{projectId}/deliveries/{id}';
      const REDELIVER = 'POST /webhooks/project/{projectId}/deliveries/{id}/redeliver';
      const RECOVER = 'POST /webhooks/project/{projectId}/deliveries/recover';
      const HEALTH = 'GET /webhooks/project/{projectId}/health';
      const route = (operation: string, projectId: string, id = '') =>
        operation
          .slice(operation.indexOf(' ') + 1)
          .replace('{projectId}', projectId)
          .replace('{id}', id);
      const key = (id: string) => ({ id, projectId: p, type: 'FALL_DETECTION', workflowId: id });
      await store.upsertDelivery(t.db, key('evt-delivered'), 'delivered');
      await store.upsertDelivery(t.db, key('evt-pending'), 'pending');
      await store.recordDeliveryAttempt(t.db, key('evt-failed'), {
        runAttempt: 1,
        errorCode: 'ECONNREFUSED',
        durationMs: 4,
        error: 'Receiver unreachable: ECONNREFUSED',
        delivered: false,
      });
      await store.markDeliveryFailed(t.db, key('evt-failed'), 'gave up');
      await store.recordEndpointFailure(t.db, p, 'Receiver unreachable: ECONNREFUSED');

      const page = await expect(LIST, 200, { path: route(LIST, p), user: 'alice' });
      assert.equal((page.items as unknown[]).length, 3);
      await expect(LIST, 400, { path: `${route(LIST, p)}?limit=500`, user: 'alice' });
      await expect(LIST, 401, { path: route(LIST, p) });
      await expect(LIST, 403, { path: route(LIST, p), user: 'mallory' });
      await expect(LIST, 404, { path: route(LIST, 'no-such-project'), user: 'alice' });

      const failed = await expect(DETAIL, 200, { path: route(DETAIL, p, 'evt-failed'), user: 'alice' });
      assert.deepEqual((failed.attemptLog as { errorCode: string }[])[0]!.errorCode, 'ECONNREFUSED');
      await expect(DETAIL, 400, { path: route(DETAIL, p, 'evt%00failed'), user: 'alice' });
      await expect(DETAIL, 401, { path: route(DETAIL, p, 'evt-failed') });
      await expect(DETAIL, 403, { path: route(DETAIL, p, 'evt-failed'), user: 'mallory' });
      await expect(DETAIL, 404, { path: route(DETAIL, p, 'evt-none'), user: 'alice' });
      assert.equal(failed.nextAttemptsCursor, null);

      const ATTEMPTS = 'GET /webhooks/project/{projectId}/deliveries/{id}/attempts';
      const attempts = await expect(ATTEMPTS, 200, { path: route(ATTEMPTS, p, 'evt-failed'), user: 'alice' });
      assert.deepEqual(attempts.items, failed.attemptLog);
      await expect(ATTEMPTS, 400, { path: `${route(ATTEMPTS, p, 'evt-failed')}?cursor=nope`, user: 'alice' });
      await expect(ATTEMPTS, 401, { path: route(ATTEMPTS, p, 'evt-failed') });
      await expect(ATTEMPTS, 403, { path: route(ATTEMPTS, p, 'evt-failed'), user: 'mallory' });
      await expect(ATTEMPTS, 404, { path: route(ATTEMPTS, p, 'evt-none'), user: 'alice' });

      // One read a second: each read route's second call within it is refused.
      const limited = await listenLocal(
        createApp({ ...appDeps, readLimits: { perSecond: 1, clock: () => 0 } }).callback(),
      );
      try {
        await expect(LIST, 200, { path: route(LIST, p), user: 'alice', base: limited.url });
        for (const [operation, path] of [
          [LIST, route(LIST, p)],
          [DETAIL, route(DETAIL, p, 'evt-failed')],
          [ATTEMPTS, route(ATTEMPTS, p, 'evt-failed')],
          [HEALTH, route(HEALTH, p)],
        ] as const) {
          const refused = await expect(operation, 429, { path, user: 'alice', base: limited.url });
          assert.match(String(refused.detail), /^At most 1 reads a second per project/);
        }
      } finally {
        await limited.close();
      }

      await expect(REDELIVER, 202, { path: route(REDELIVER, p, 'evt-delivered'), user: 'alice' });
      await expect(REDELIVER, 409, { path: route(REDELIVER, p, 'evt-pending'), user: 'alice' });
      await expect(REDELIVER, 400, { path: route(REDELIVER, p, 'evt%C3%A9'), user: 'alice' });
      await expect(REDELIVER, 401, { path: route(REDELIVER, p, 'evt-failed') });
      await expect(REDELIVER, 403, { path: route(REDELIVER, p, 'evt-failed'), user: 'mallory' });
      await expect(REDELIVER, 404, { path: route(REDELIVER, p, 'evt-none'), user: 'alice' });
      redeliveryRetained = false;
      await expect(REDELIVER, 410, { path: route(REDELIVER, p, 'evt-failed'), user: 'alice' });
      redeliveryRetained = true;
      assert.equal((await store.findDelivery(t.db, p, 'evt-failed'))?.status, 'failed', 'a 410 releases the claim');
      const tooMany = await expect(REDELIVER, 429, { path: route(REDELIVER, p, 'evt-failed'), user: 'alice' });
      assert.match(String(tooMany.detail), /^At most 3 redeliveries a minute per project/);

      const window = { since: '2000-01-01T00:00:00Z' };
      const recovered = await expect(RECOVER, 202, { path: route(RECOVER, p), user: 'alice', body: window });
      assert.equal(recovered.count, 1);
      await expect(RECOVER, 429, { path: route(RECOVER, p), user: 'alice', body: window });
      await expect(RECOVER, 400, { path: route(RECOVER, p), user: 'alice', body: { since: 'yesterday' } });
      await expect(RECOVER, 401, { path: route(RECOVER, p), body: window });
      await expect(RECOVER, 403, { path: route(RECOVER, p), user: 'mallory', body: window });
      await expect(RECOVER, 404, { path: route(RECOVER, 'no-such-project'), user: 'alice', body: window });
      await expect(RECOVER, 413, { path: route(RECOVER, p), user: 'alice', body: { since: 'x'.repeat(200_000) } });
      await expect(RECOVER, 415, { path: route(RECOVER, p), user: 'alice', raw: 'since=x', contentType: 'text/plain' });
      const unstarted = await listenLocal(createApp({ ...appDeps, redelivery: undefined }).callback());
      try {
        await expect(RECOVER, 503, { path: route(RECOVER, p), user: 'alice', body: window, base: unstarted.url });
        await expect(REDELIVER, 503, { path: route(REDELIVER, p, 'evt-failed'), user: 'alice', base: unstarted.url });
      } finally {
        await unstarted.close();
      }

      const health = await expect(HEALTH, 200, { path: route(HEALTH, p), user: 'alice' });
      assert.equal(health.state, 'failing');
      // With a registration whose breaker is open: its state and when the open period ends.
      const registered = await store.createRegistration(t.db, appDeps.secretBox, {
        projectId: p,
        url: 'https://receiver.example/hook',
        types: ['FALL_DETECTION'],
      });
      await store.recordFailure(
        t.db,
        registered!.row.id,
        { failureThreshold: 1, openMs: 60_000, maxOpenMs: 60_000 },
        { message: 'Receiver answered HTTP 503', statusCode: 503 },
      );
      const open = await expect(HEALTH, 200, { path: route(HEALTH, p), user: 'alice' });
      assert.equal((open.breaker as { state: string }).state, 'open');
      await expect(HEALTH, 400, { path: route(HEALTH, 'bad%00id'), user: 'alice' });
      await expect(HEALTH, 401, { path: route(HEALTH, p) });
      await expect(HEALTH, 403, { path: route(HEALTH, p), user: 'mallory' });
      await expect(HEALTH, 404, { path: route(HEALTH, 'no-such-project'), user: 'alice' });

      await expect('GET /metrics', 200);
      appDeps.metricsToken = 'metrics-token-0123456789';
      try {
        await expect('GET /metrics', 401);
      } finally {
        appDeps.metricsToken = undefined;
      }
    });

    it('portal sessions: 201, 204, 400, 401, 403, 404, 409, 413, 415; a portal token’s 401 and 403', async () => {
      const CREATE = 'POST /webhooks/project/{projectId}/portal-sessions';
      const REVOKE = 'DELETE /webhooks/project/{projectId}/portal-sessions';
      const p = await project('alice');
      const path = at(CREATE.slice(5), p);
      const link = await expect(CREATE, 201, { path, user: 'alice', body: { capabilities: ['read'] } });
      assert.match(String(link.url), /\/portal#token=/);
      await expect(CREATE, 201, { path, user: 'alice' });
      await expect(CREATE, 400, { path, user: 'alice', body: { expiresInSeconds: 10 } });
      await expect(CREATE, 401, { path });
      await expect(CREATE, 403, { path, user: 'mallory' });
      await expect(CREATE, 403, { path, token: String(link.token) });
      await expect(CREATE, 404, { path: at(CREATE.slice(5), 'no-such-project'), user: 'alice' });
      await expect(CREATE, 413, { path, user: 'alice', body: { pad: 'x'.repeat(200_000) } });
      await expect(CREATE, 415, { path, user: 'alice', raw: 'capabilities=read', contentType: 'text/plain' });
      // The project filled up to PORTAL_LINKS_PER_PROJECT (default 50) with live links: one more is refused.
      const expiresAt = new Date(Date.now() + 3_600_000);
      await t.db('portal_links').insert(
        Array.from({ length: 48 }, (_, i) => ({
          id: `filler-${p}-${i}`,
          project_id: p,
          generation: 0,
          expires_at: expiresAt,
        })),
      );
      const full = await expect(CREATE, 409, { path, user: 'alice' });
      assert.match(String(full.detail), /already has 50 live portal links/);

      // A read link on an action, and on another project: the shared Forbidden response.
      const TEST_PATH = at(TEST.slice(5), p);
      const readOnly = await expect(TEST, 403, { path: TEST_PATH, token: String(link.token) });
      assert.match(String(readOnly.detail), /read-only/);
      const other = await project('alice');
      await expect(GET, 403, { path: at(GET.slice(4), other), token: String(link.token) });

      await expect(REVOKE, 400, { path: at(REVOKE.slice(7), 'bad%00id'), user: 'alice' });
      await expect(REVOKE, 401, { path });
      await expect(REVOKE, 403, { path, user: 'mallory' });
      await expect(REVOKE, 404, { path: at(REVOKE.slice(7), 'no-such-project'), user: 'alice' });
      await expect(REVOKE, 204, { path, user: 'alice' });
      const revoked = await expect(GET, 401, { path: at(GET.slice(4), p), token: String(link.token) });
      assert.match(String(revoked.detail), /expired or is not valid/);
    });

    it('codec encode and decode: 200, 400, 401, 403, 413, 415', async () => {
      const ENCODE = 'POST /codec/encode';
      const DECODE = 'POST /codec/decode';
      const plain: JsonPayload = {
        metadata: { encoding: Buffer.from('json/plain').toString('base64') },
        data: Buffer.from('{"email":"a@b.example"}').toString('base64'),
      };
      const encoded = await expect(ENCODE, 200, { user: OPERATOR, body: { payloads: [plain] } });
      const sealed = encoded.payloads as JsonPayload[];
      assert.equal(Buffer.from(sealed[0]!.metadata!.encoding!, 'base64').toString(), 'binary/encrypted');
      const decoded = await expect(DECODE, 200, { user: OPERATOR, body: { payloads: sealed } });
      assert.deepEqual(decoded.payloads, [plain]);
      // The nulls the protocol allows are accepted.
      await expect(ENCODE, 200, { user: OPERATOR, body: { payloads: [{ metadata: null, data: null }] } });

      for (const operation of [ENCODE, DECODE]) {
        const invalid = await expect(operation, 400, { user: OPERATOR, body: { payloads: [{ data: 5 }] } });
        assert.deepEqual(invalid.errors, [{ pointer: '/payloads/0/data', detail: 'must be string,null' }]);
        await expect(operation, 400, { user: OPERATOR, raw: '{not json' });
        await expect(operation, 401, { body: { payloads: [plain] } });
        const member = await expect(operation, 403, { user: 'alice', body: { payloads: sealed } });
        assert.match(String(member.detail), /not an operator/);
        await expect(operation, 413, { user: OPERATOR, body: { payloads: [{ data: 'A'.repeat(200_000) }] } });
        await expect(operation, 415, { user: OPERATOR, raw: 'payloads=x', contentType: 'text/plain' });
      }
      // Sealed with a key the API does not hold: the decode 400 names the key id only.
      const foreign = (await new EncryptionCodec(keyRing('k9')).encode([{ data: Buffer.from('secret') }])).map(
        payloadToJson,
      );
      const undecodable = await expect(DECODE, 400, { user: OPERATOR, body: { payloads: foreign } });
      assert.match(String(undecodable.detail), /key "k9", which is not in this process's PAYLOAD_ENCRYPTION_KEYS/);
      assert.equal(undecodable.errors, undefined);
    });

    it('audit trail: 200, 400, 401, 403 (and 404 for a project)', async () => {
      const AUDIT = 'GET /audit';
      const PROJECT_AUDIT = 'GET /webhooks/project/{projectId}/audit';
      const p = await project('alice');
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const all = await expect(AUDIT, 200, { path: `/audit?projectId=${p}&limit=1`, user: OPERATOR });
      assert.equal((all.items as { action: string }[])[0]?.action, 'webhook.register');
      await expect(AUDIT, 400, { path: '/audit?limit=500', user: OPERATOR });
      await expect(AUDIT, 401);
      await expect(AUDIT, 403, { user: 'alice' });
      const own = await expect(PROJECT_AUDIT, 200, {
        path: at('/webhooks/project/{projectId}/audit', p),
        user: 'alice',
      });
      assert.equal((own.items as unknown[]).length, 1);
      await expect(PROJECT_AUDIT, 400, {
        path: `${at('/webhooks/project/{projectId}/audit', p)}?cursor=x`,
        user: 'alice',
      });
      await expect(PROJECT_AUDIT, 401, { path: at('/webhooks/project/{projectId}/audit', p) });
      await expect(PROJECT_AUDIT, 403, { path: at('/webhooks/project/{projectId}/audit', p), user: 'mallory' });
      await expect(PROJECT_AUDIT, 404, { path: '/webhooks/project/no-such-project/audit', user: 'alice' });
    });

    it('erasures: 202, 200, 400, 401, 403, 404, 409, 413, 415, 503', async () => {
      const REQUEST = 'POST /erasures';
      const STATUS = 'GET /erasures/{id}';
      const CERTIFICATE = 'GET /erasures/{id}/certificate';
      const person = { userUUID: randomUUID() };
      const accepted = await expect(REQUEST, 202, { user: OPERATOR, body: person });
      const id = String(accepted.id);
      const pending = await expect(STATUS, 200, { path: `/erasures/${id}`, user: OPERATOR });
      assert.equal(pending.status, 'pending');
      await expect(CERTIFICATE, 409, { path: `/erasures/${id}/certificate`, user: OPERATOR });
      await store.closeErasure(t.db, id, { status: 'completed' });
      const certificate = await expect(CERTIFICATE, 200, { path: `/erasures/${id}/certificate`, user: OPERATOR });
      assert.equal(certificate.erasureId, id);
      const invalid = await expect(REQUEST, 400, { user: OPERATOR, body: { userUUID: 'x' } });
      assert.deepEqual(
        (invalid.errors as { pointer: string }[]).map((e) => e.pointer),
        ['/userUUID'],
      );
      await expect(REQUEST, 400, { user: OPERATOR, raw: '{not json' });
      await expect(REQUEST, 401, { body: person });
      await expect(REQUEST, 403, { user: 'alice', body: person });
      await expect(REQUEST, 413, { user: OPERATOR, body: { userUUID: 'A'.repeat(200_000) } });
      await expect(REQUEST, 415, { user: OPERATOR, raw: 'userUUID=x', contentType: 'text/plain' });
      const recorded = async () => (await t.db('erasures').count<{ count: string }[]>('* as count'))[0]!.count;
      const before = await recorded();
      erasureStarts = false;
      try {
        await expect(REQUEST, 503, { user: OPERATOR, body: person });
      } finally {
        erasureStarts = true;
      }
      assert.equal(await recorded(), before, 'a job Temporal would not start leaves no record');
      for (const [operation, path] of [
        [STATUS, `/erasures/${randomUUID()}`],
        [CERTIFICATE, `/erasures/${randomUUID()}/certificate`],
      ] as const) {
        await expect(operation, 404, { path, user: OPERATOR });
        await expect(operation, 401, { path });
        await expect(operation, 403, { path: path.replace(/[0-9a-f-]{36}/, id), user: 'alice' });
      }
    });

    it('purges: 202, 200, 400, 401, 403, 404, 409, 413, 415, 503; the project’s webhook is 409 while it is purged', async () => {
      const REQUEST = 'POST /purges';
      const STATUS = 'GET /purges/{purgeId}';
      const CERTIFICATE = 'GET /purges/{purgeId}/certificate';
      const p = await project('alice');
      await expect(REGISTER, 201, { user: 'alice', body: body(p) });
      const recorded = async () => (await t.db('purges').count<{ count: string }[]>('* as count'))[0]!.count;
      const before = await recorded();
      purgeStarts = false;
      try {
        await expect(REQUEST, 503, { user: OPERATOR, body: { projectId: p } });
      } finally {
        purgeStarts = true;
      }
      assert.equal(await recorded(), before, 'a job Temporal would not start leaves no record');
      const accepted = await expect(REQUEST, 202, { user: OPERATOR, body: { projectId: p } });
      const id = String(accepted.id);
      assert.equal(accepted.status, 'pending');
      const again = await expect(REQUEST, 200, { user: OPERATOR, body: { projectId: p } });
      assert.equal(again.id, id, 'the pending purge, not another');
      const pending = await expect(STATUS, 200, { path: `/purges/${id}`, user: OPERATOR });
      assert.equal(pending.status, 'pending');
      const refused = await expect(UPDATE, 409, { user: 'alice', body: { projectId: p, types: ['FALL_DETECTION'] } });
      assert.equal(refused.purgeId, id);
      await expect(DELETE, 204, { path: at(DELETE.slice(7), p), user: 'alice' });
      const unregistered = await expect(REGISTER, 409, { user: 'alice', body: body(p) });
      assert.match(String(unregistered.detail), new RegExp(`Project ${p} is being purged \\(purge ${id}\\)`));
      await expect(CERTIFICATE, 409, { path: `/purges/${id}/certificate`, user: OPERATOR });
      await store.closePurge(t.db, id, { status: 'failed', failure: 'stopped by a test' });
      const resumed = await expect(REQUEST, 202, { user: OPERATOR, body: { projectId: p } });
      assert.deepEqual([resumed.id, resumed.status], [id, 'pending']);
      await store.closePurge(t.db, id, { status: 'completed' });
      const certificate = await expect(CERTIFICATE, 200, { path: `/purges/${id}/certificate`, user: OPERATOR });
      assert.equal(certificate.purgeId, id);
      const invalid = await expect(REQUEST, 400, { user: OPERATOR, body: { projectId: 'not a project id' } });
      assert.deepEqual(
        (invalid.errors as { pointer: string }[]).map((e) => e.pointer),
        ['/projectId'],
      );
      await expect(REQUEST, 400, { user: OPERATOR, raw: '{not json' });
      await expect(REQUEST, 404, { user: OPERATOR, body: { projectId: 'no-such-project' } });
      await expect(REQUEST, 401, { body: { projectId: p } });
      await expect(REQUEST, 403, { user: 'alice', body: { projectId: p } });
      await expect(REQUEST, 413, { user: OPERATOR, body: { projectId: 'A'.repeat(200_000) } });
      await expect(REQUEST, 415, { user: OPERATOR, raw: 'projectId=x', contentType: 'text/plain' });
      for (const [operation, path] of [
        [STATUS, `/purges/${randomUUID()}`],
        [CERTIFICATE, `/purges/${randomUUID()}/certificate`],
      ] as const) {
        await expect(operation, 404, { path, user: OPERATOR });
        await expect(operation, 401, { path });
        await expect(operation, 403, { path: path.replace(/[0-9a-f-]{36}/, id), user: 'alice' });
      }
    });

    it('every operation that refuses callers: 429 before it runs once the caller has used up its refusals', async () => {
      const p = await project('alice');
      const limited = await listenLocal(
        createApp({ ...appDeps, refusalLimits: { perMinute: 1, clock: () => 0 } }).callback(),
      );
      try {
        const refusing = Object.keys(EXPECTED_STATUSES).filter((operation) =>
          EXPECTED_STATUSES[operation]!.includes('403'),
        );
        for (const [i, operation] of refusing.entries()) {
          const caller = `intruder-${i}`;
          // One refusal spends the caller's minute: its next call, to any route, is held back.
          const refused = await fetch(`${limited.url}/webhooks/project/${p}`, { headers: bearer(hsToken(caller)) });
          assert.equal(refused.status, 403);
          const [method] = operation.split(' ') as [string, string];
          const path = operation
            .slice(method.length + 1)
            .replace('{projectId}', p)
            .replace('{id}', 'evt-failed')
            .replace('{purgeId}', 'no-such-purge');
          const answer = await expect(operation, 429, {
            path,
            user: caller,
            base: limited.url,
            ...(['POST', 'PUT', 'PATCH'].includes(method) && { body: {} }),
          });
          assert.match(String(answer.detail), /^Too many refused calls: at most 1 a minute per caller/);
        }
      } finally {
        await limited.close();
      }
    });

    it('gave every response the document lists', () => {
      const documented = Object.entries(EXPECTED_STATUSES).flatMap(([operation, statuses]) =>
        statuses.map((status) => `${operation} ${status}`),
      );
      assert.deepEqual([...seen].sort(), documented.sort());
    });
  });
});

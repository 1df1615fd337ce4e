import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Connection } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Knex } from 'knex';
import pino from 'pino';
import { createApp, startApi } from '../../api';
import { SWAGGER_ASSETS } from '../../api/openapi/docs-router';
import { readinessConnection, searchAttributesCheck, type ReadinessDeps } from '../../api/health/router';
import { loadConfig } from '../../common/config';
import { createSecretBox } from '../../common/crypto/secrets';
import { freePort } from '../../dev/ports';
import { createDb } from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import type { TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET } from '../support/tokens';
import { startTemporalAndDatabase } from '../support/setup';
import { captureLogger } from '../support/deliveries';

const PROBLEM = 'application/problem+json';
const TIMEOUT_MS = 500;

interface Readiness {
  status: string | number;
  checks: { postgres: string; temporal: string };
  searchAttributes?: { state: string; missing?: string[] };
  detail?: string;
  title?: string;
}

/** The API with only what readiness needs; each test picks the dependencies it breaks. */
async function serve(
  temporal: ReadinessDeps['temporal'],
  db: Knex,
  searchAttributes?: ReadinessDeps['searchAttributes'],
): Promise<LocalServer> {
  const app = createApp({
    db,
    secretBox: createSecretBox(randomBytes(32)),
    logger: pino({ level: 'silent' }),
    auth: { mode: 'secret', secret: TEST_JWT_SECRET },
    sendTestEvent: () => Promise.reject(new Error('not used')),
    readiness: { temporal, timeoutMs: TIMEOUT_MS, searchAttributes },
  });
  return listenLocal(app.callback());
}

async function readyz(server: LocalServer): Promise<{ status: number; type: string; body: Readiness; ms: number }> {
  const started = Date.now();
  const response = await fetch(`${server.url}/readyz`);
  return {
    status: response.status,
    type: response.headers.get('content-type')?.split(';')[0] ?? '',
    body: (await response.json()) as Readiness,
    ms: Date.now() - started,
  };
}

/** A TCP server that accepts connections and never says a word: a hung dependency. */
async function blackHole(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => void sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('health: /healthz and /readyz', () => {
  let env: TestWorkflowEnvironment;
  let t: TestDatabase;
  let up: LocalServer;
  const cleanups: (() => Promise<unknown>)[] = [];

  before(async () => {
    [env, t] = await startTemporalAndDatabase();
    up = await serve(env.connection, t.db);
  });
  after(async () => {
    await up?.close();
    await t?.destroy();
    await env?.teardown();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A Postgres address where nothing listens. */
  async function deadDb(): Promise<Knex> {
    const db = createDb(`postgres://nobody:nothing@127.0.0.1:${await freePort()}/none`);
    cleanups.push(() => db.destroy());
    return db;
  }

  async function closedTemporal(): Promise<Connection> {
    const connection = await Connection.connect({ address: env.address });
    await connection.close();
    return connection;
  }

  async function serveTracked(
    temporal: ReadinessDeps['temporal'],
    db: Knex,
    searchAttributes?: ReadinessDeps['searchAttributes'],
  ): Promise<LocalServer> {
    const server = await serve(temporal, db, searchAttributes);
    cleanups.push(() => server.close());
    return server;
  }

  it('healthz answers 200 without a token, never cached', async () => {
    const response = await fetch(`${up.url}/healthz`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: 'ok' });
    assert.equal(response.headers.get('cache-control'), 'no-store');
  });

  it('healthz answers 200 even while Postgres and Temporal are both down', async () => {
    const server = await serveTracked(await closedTemporal(), await deadDb());
    const response = await fetch(`${server.url}/healthz`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: 'ok' });
  });

  it('readyz answers 200 without a token when Postgres and a real Temporal dev server answer', async () => {
    const reply = await readyz(up);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.deepEqual(reply.body, { status: 'ready', checks: { postgres: 'up', temporal: 'up' } });
  });

  it('readyz reports the search attributes registered, and says nothing of them in the log', async () => {
    const log = captureLogger();
    const check = searchAttributesCheck(env.connection, 'default', log.logger);
    const reply = await readyz(await serveTracked(env.connection, t.db, check));
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.deepEqual(reply.body.searchAttributes, { state: 'registered' });
    assert.deepEqual(log.lines, []);
  });

  it('readyz reports them unknown, not missing, when the namespace will not list them; the log says so once', async () => {
    const log = captureLogger();
    // What a hosted namespace answers an API key without operator rights.
    const refused = Object.assign(new Error('7 PERMISSION_DENIED: not allowed'), {
      code: 7,
      details: 'Request unauthorized.',
      metadata: {},
    });
    const temporal = Object.assign(Object.create(env.connection) as Connection, {
      operatorService: { listSearchAttributes: () => Promise.reject(refused) },
    });
    const server = await serveTracked(env.connection, t.db, searchAttributesCheck(temporal, 'default', log.logger));
    for (const reply of [await readyz(server), await readyz(server)]) {
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      assert.deepEqual(reply.body.searchAttributes, { state: 'unknown' });
    }
    assert.deepEqual(
      log.lines.map((line) => line.msg),
      ['could not list search attributes; deliveries start with them, and without them if Temporal refuses them'],
    );
  });

  it('says what missing search attributes cost once, however often probed, and once more when they are registered', async () => {
    const log = captureLogger();
    let customAttributes: Record<string, number> = {};
    const temporal = Object.assign(Object.create(env.connection) as Connection, {
      operatorService: { listSearchAttributes: () => Promise.resolve({ customAttributes }) },
    });
    const server = await serveTracked(env.connection, t.db, searchAttributesCheck(temporal, 'default', log.logger));
    for (const reply of [await readyz(server), await readyz(server)])
      assert.deepEqual(reply.body.searchAttributes?.missing, ['ProjectId', 'WebhookType', 'PersonHash']);
    customAttributes = { ProjectId: 2, PersonHash: 2 };
    assert.deepEqual((await readyz(server)).body.searchAttributes?.missing, ['WebhookType']);
    customAttributes = { ProjectId: 2, WebhookType: 2, PersonHash: 2 };
    for (const reply of [await readyz(server), await readyz(server)])
      assert.deepEqual(reply.body.searchAttributes, { state: 'registered' });
    assert.deepEqual(
      log.lines.map((line) => [line.level, line.missing]),
      [
        [40, ['ProjectId', 'WebhookType', 'PersonHash']],
        [40, ['WebhookType']],
        [30, undefined],
      ],
    );
    assert.equal(log.lines[2]!.msg, 'search attributes registered; restart the API and the worker to use them');
  });

  it('readyz answers 503 problem+json naming Temporal when its connection is closed', async () => {
    const reply = await readyz(await serveTracked(await closedTemporal(), t.db));
    assert.equal(reply.status, 503);
    assert.equal(reply.type, PROBLEM);
    assert.equal(reply.body.status, 503);
    assert.equal(reply.body.title, 'Service Unavailable');
    assert.equal(reply.body.detail, 'Not ready: Temporal unreachable');
    assert.deepEqual(reply.body.checks, { postgres: 'up', temporal: 'down' });
  });

  it('readyz answers 503 naming Temporal when nothing listens at its address, within the deadline', async () => {
    const connection = readinessConnection({ address: `127.0.0.1:${await freePort()}` });
    cleanups.push(() => connection.close());
    const started = Date.now();
    const reply = await readyz(await serveTracked(connection, t.db));
    assert.ok(Date.now() - started < 1_000, 'a refused connection is reported at once, not after retries');
    assert.equal(reply.status, 503);
    assert.equal(reply.body.detail, 'Not ready: Temporal unreachable');
    assert.deepEqual(reply.body.checks, { postgres: 'up', temporal: 'down' });
    assert.ok(reply.ms < TIMEOUT_MS + 1_000, `took ${reply.ms} ms`);
  });

  it('readyz answers 503 problem+json naming Postgres when the database is unreachable, within the deadline', async () => {
    const reply = await readyz(await serveTracked(env.connection, await deadDb()));
    assert.equal(reply.status, 503);
    assert.equal(reply.type, PROBLEM);
    assert.equal(reply.body.detail, 'Not ready: Postgres unreachable');
    assert.deepEqual(reply.body.checks, { postgres: 'down', temporal: 'up' });
    assert.ok(reply.ms < TIMEOUT_MS + 1_000, `took ${reply.ms} ms`);
  });

  it('readyz answers 503 naming Postgres when the database accepts connections but never answers', async () => {
    const hole = await blackHole();
    const db = createDb(`postgres://nobody:nothing@127.0.0.1:${hole.port}/none`);
    cleanups.push(
      () => hole.close(),
      () => db.destroy(),
    );
    const server = await serveTracked(env.connection, db);
    const replies = await Promise.all([readyz(server), readyz(server), readyz(server)]);
    for (const reply of replies) {
      assert.equal(reply.status, 503);
      assert.deepEqual(reply.body.checks, { postgres: 'down', temporal: 'up' });
      assert.ok(reply.ms < TIMEOUT_MS + 1_000, `took ${reply.ms} ms`);
    }
  });

  it('readyz names both when both are down', async () => {
    const reply = await readyz(await serveTracked(await closedTemporal(), await deadDb()));
    assert.equal(reply.status, 503);
    assert.equal(reply.body.detail, 'Not ready: Postgres and Temporal unreachable');
    assert.deepEqual(reply.body.checks, { postgres: 'down', temporal: 'down' });
  });

  it('the webhook endpoints still require a token next to the public routes', async () => {
    const response = await fetch(`${up.url}/webhooks/project/any`);
    assert.equal(response.status, 401);
    assert.equal(response.headers.get('content-type')?.split(';')[0], PROBLEM);
  });

  it('startApi serves /healthz, /readyz and /openapi.json on its port', async () => {
    const config = loadConfig(
      {
        PORT: '0',
        DATABASE_URL: t.url,
        TEMPORAL_ADDRESS: env.address,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
      },
      { database: true, auth: true },
    );
    const api = await startApi(config, pino({ level: 'silent' }));
    cleanups.push(() => api.close());
    const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200, await ready.clone().text());
    assert.deepEqual(await ready.json(), {
      status: 'ready',
      checks: { postgres: 'up', temporal: 'up' },
      searchAttributes: { state: 'registered' },
    });
    assert.equal((await fetch(`${base}/openapi.json`)).status, 200);
  });
});

describe('docs: /docs renders the OpenAPI document with local Swagger UI assets', () => {
  let server: LocalServer;
  let db: Knex;
  before(async () => {
    db = createDb('postgres://unused@127.0.0.1:1/unused');
    server = await serve(Connection.lazy({ address: '127.0.0.1:1' }), db);
  });
  after(async () => {
    await server?.close();
    await db?.destroy();
  });

  it('serves an HTML page without a token whose every script and stylesheet answers 200 from this server', async () => {
    const page = await fetch(`${server.url}/docs`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    const html = await page.text();
    const urls = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(urls.includes('/docs/swagger-ui-bundle.js'), html);
    assert.ok(urls.includes('/docs/swagger-ui.css'), html);
    assert.ok(urls.includes('/docs/swagger-initializer.js'), html);
    for (const url of urls) {
      assert.ok(url.startsWith('/'), `${url} must be served locally, not from a CDN`);
      const asset = await fetch(server.url + url);
      assert.equal(asset.status, 200, url);
      assert.ok((await asset.arrayBuffer()).byteLength > 0, url);
    }
  });

  it('serves the Swagger UI bundle and styles from swagger-ui-dist with their types', async () => {
    const bundle = await fetch(`${server.url}/docs/swagger-ui-bundle.js`);
    assert.match(bundle.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.match(await bundle.text(), /SwaggerUIBundle/);
    const css = await fetch(`${server.url}/docs/swagger-ui.css`);
    assert.match(css.headers.get('content-type') ?? '', /^text\/css/);
    assert.equal(Object.keys(SWAGGER_ASSETS).length, 4);
  });

  it('points Swagger UI at /openapi.json, which answers the document', async () => {
    const initializer = await (await fetch(`${server.url}/docs/swagger-initializer.js`)).text();
    assert.match(initializer, /url: '\/openapi\.json'/);
    const document = await fetch(`${server.url}/openapi.json`);
    assert.equal(document.status, 200);
    assert.equal(((await document.json()) as { openapi: string }).openapi, '3.1.0');
  });

  it('serves no other file: unlisted assets and traversal attempts are 404', async () => {
    for (const path of [
      '/docs/index.html',
      '/docs/swagger-ui-bundle.js.map',
      '/docs/package.json',
      '/docs/..%2Fpackage.json',
      '/docs/..%2F..%2F..%2Fpackage.json',
      '/docs/%2e%2e%2fabsolute-path.js',
      '/docs/constructor',
      '/docs/__proto__',
    ]) {
      const response = await fetch(server.url + path);
      assert.equal(response.status, 404, path);
      assert.equal(response.headers.get('content-type')?.split(';')[0], PROBLEM, path);
    }
  });
});

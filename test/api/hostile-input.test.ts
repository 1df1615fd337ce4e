// Hostile input against the real API on a real socket and a real PostgreSQL: no byte sequence gets a 5xx.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { connect, type AddressInfo, type Server } from 'node:net';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { createApp } from '../../api';
import { createHttpServer } from '../../api/http/http-server';
import { readinessConnection } from '../../api/health/router';
import { loggableError } from '../../api/http/dependency-errors';
import { loadConfig } from '../../common/config';
import { createLogger } from '../../common/telemetry/logger';
import { createSecretBox } from '../../common/crypto/secrets';
import { createDb } from '../../db';
import * as store from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, hsToken } from '../support/tokens';

const PROBLEM = 'application/problem+json';

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection without answering. */
  closed: boolean;
}

/** Writes raw bytes on a fresh connection and reads until the server closes it (Connection: close). */
function rawRequest(port: number, request: Buffer | string, options: { keepOpenMs?: number } = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ECONNRESET' ? resolve({ status: 0, headers: {}, body: '', closed: true }) : reject(error),
    );
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      if (text === '') return resolve({ status: 0, headers: {}, body: '', closed: true });
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers = Object.fromEntries(
        headerLines.map((line) => [
          line.slice(0, line.indexOf(':')).toLowerCase(),
          line.slice(line.indexOf(':') + 1).trim(),
        ]),
      );
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n'), closed: false });
    });
    socket.write(request);
    if (options.keepOpenMs === undefined) socket.end();
  });
}

const listen = async (server: Server): Promise<number> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
};

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve());
    (server as Partial<{ closeAllConnections(): void }>).closeAllConnections?.();
  });

/** A string of any code points, with NUL, lone surrogates and non-characters mixed in. */
const hostileString = fc.string({
  unit: fc.oneof(
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    fc.constantFrom('\u0000', '\ud800', '\udfff', '\uffff', '%', '/', '\\', '"'),
  ),
  maxLength: 40,
});

describe('hostile input: every route answers 4xx problem+json, never 5xx', () => {
  let t: TestDatabase;
  let server: Server;
  let port: number;
  let projectId: string;
  const token = hsToken('alice');
  const errorLines: string[] = [];
  const logLines: string[] = [];
  const limits = { HTTP_HEADERS_TIMEOUT_MS: 1_000, HTTP_REQUEST_TIMEOUT_MS: 2_000, HTTP_MAX_CONNECTIONS: 50 };

  before(async () => {
    t = await createTestDatabase();
    projectId = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId, 'Hostile project');
    await store.addMember(t.db, projectId, 'alice');
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        const line = chunk.toString();
        logLines.push(line);
        if ((JSON.parse(line) as { level: number }).level >= 50) errorLines.push(line);
        done();
      },
    });
    const db = t.db;
    const app = createApp({
      db,
      secretBox: createSecretBox(randomBytes(32)),
      logger: createLogger('info', 'webhooks', sink),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: (id) =>
        Promise.resolve({ delivered: true, statusCode: 200, durationMs: 1, workflowId: `wf-${id}` }),
      readiness: { temporal: readinessConnection({ address: '127.0.0.1:1' }) },
    });
    server = createHttpServer(app, limits);
    port = await listen(server);
  });
  after(async () => {
    if (server) await closeServer(server);
    await t?.destroy();
  });

  const registrations = async () => Number((await t.db('webhook_registrations').count({ n: '*' }))[0]!.n);

  async function call(
    method: string,
    path: string,
    body?: string,
  ): Promise<{ status: number; type: string; json: Record<string, unknown> }> {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      body,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    });
    const text = await response.text();
    const type = response.headers.get('content-type')?.split(';')[0] ?? '';
    return {
      status: response.status,
      type,
      json: type.includes('json') ? (JSON.parse(text) as Record<string, unknown>) : {},
    };
  }

  it('refuses a projectId with NUL, a lone surrogate or letters outside ASCII with 400 naming projectId', async () => {
    const before = await registrations();
    for (const bad of [`p\u0000`, `p\ud800`, 'p\udfffq', 'projét', 'p😀', '-leading-dash', 'a'.repeat(201), 'a b', ''])
      for (const [method, path] of [
        ['POST', '/webhooks/register'],
        ['PATCH', '/webhooks'],
      ] as const) {
        const body = JSON.stringify({ projectId: bad, url: 'https://r.example/hook', types: ['FALL_DETECTION'] });
        const reply = await call(method, path, body);
        assert.equal(reply.status, 400, `${method} ${JSON.stringify(bad)}`);
        assert.equal(reply.type, PROBLEM);
        assert.match(String(reply.json.detail), /\/projectId/);
      }
    for (const bad of ['p%00', 'p%ED%A0%80', 'p%FF', 'proj%C3%A9t', 'p%F0%9F%98%80', '-x', '.hidden'])
      for (const [method, path] of [
        ['GET', `/webhooks/project/${bad}`],
        ['DELETE', `/webhooks/project/${bad}`],
        ['POST', `/webhooks/test/project/${bad}`],
      ] as const) {
        const reply = await call(method, path);
        assert.equal(reply.status, 400, `${method} ${path}`);
        assert.equal(reply.type, PROBLEM);
        assert.match(String(reply.json.detail), /^The path parameter projectId must be 1 to 200 characters from A-Z/);
      }
    assert.equal(await registrations(), before, 'no registration was written');
    assert.deepEqual(errorLines, [], 'nothing was logged as an error');
  });

  it('answers 405 with Allow to TRACE and any undeclared method on every route, before authentication', async () => {
    for (const [method, path, allow] of [
      ['TRACE', '/webhooks/register', 'POST'],
      ['PUT', '/webhooks', 'PATCH'],
      ['TRACE', '/webhooks/project/p1', 'DELETE'],
      ['POST', '/webhooks/project/p1', 'GET'],
      ['GET', '/webhooks/test/project/p1', 'POST'],
      ['TRACE', '/healthz', 'GET'],
      ['DELETE', '/readyz', 'GET'],
      ['POST', '/openapi.json', 'GET'],
    ] as const) {
      const reply = await rawRequest(port, `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.equal(reply.status, 405, `${method} ${path}`);
      assert.equal(reply.headers['content-type']?.split(';')[0], PROBLEM);
      assert.match(reply.headers.allow ?? '', new RegExp(`\\b${allow}\\b`), `${method} ${path}: Allow`);
      assert.match(reply.body, new RegExp(`The method ${method} is not allowed on this resource`));
    }
    const options = await rawRequest(
      port,
      'OPTIONS /webhooks/project/p1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    assert.equal(options.status, 204);
    assert.match(options.headers.allow ?? '', /GET.*DELETE|DELETE.*GET/);
    // An unknown path is a 404 whatever the method, TRACE too (once fast-check found a 501 from the router).
    for (const method of ['TRACE', 'GET', 'PUT']) {
      const reply = await rawRequest(
        port,
        `${method} /webhooks/register0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${token}\r\n\r\n`,
      );
      assert.equal(reply.status, 404, `${method} /webhooks/register0`);
      assert.equal(reply.headers['content-type']?.split(';')[0], PROBLEM);
    }
  });

  it('answers 400 to __proto__, constructor, deep nesting and huge numbers in a body', async () => {
    const bodies = [
      `{"__proto__":{"projectId":"${projectId}"},"url":"https://r.example","types":["FALL_DETECTION"]}`,
      `{"projectId":"${projectId}","url":"https://r.example","types":["FALL_DETECTION"],"__proto__":{"admin":true}}`,
      `{"projectId":"${projectId}","constructor":{"prototype":{"x":1}}}`,
      '['.repeat(50_000) + ']'.repeat(50_000),
      `{"projectId":${'9'.repeat(5_000)}}`,
      `{"projectId":1e999999,"url":-1e-999999,"types":[1.7976931348623157e309]}`,
      `{"projectId":"${projectId}","url":"https://r.example/\\u0000","types":["FALL_DETECTION"]}`,
      `{"projectId":"${projectId}","url":"https://r.example/\\ud800","types":["FALL_DETECTION"]}`,
      `{"projectId":"${projectId}","url":"https://r\\u0000.example/","types":["FALL_DETECTION"]}`,
      `{"projectId":"${projectId}","url":"https://r.example","types":["FALL_DETECTION\\u0000"]}`,
    ];
    for (const body of bodies)
      for (const [method, path] of [
        ['POST', '/webhooks/register'],
        ['PATCH', '/webhooks'],
      ] as const) {
        const reply = await call(method, path, body);
        assert.ok(reply.status === 400 || reply.status === 413, `${method} ${body.slice(0, 60)}: ${reply.status}`);
        assert.equal(reply.type, PROBLEM);
      }
    assert.equal(({} as Record<string, unknown>).admin, undefined, 'Object.prototype is untouched');
    assert.deepEqual(errorLines, []);
  });

  it('answers 4xx problem+json, never 5xx, to any bytes in the path, query, headers and body', async () => {
    const paths = [
      '/webhooks/register',
      '/webhooks',
      `/webhooks/project/${projectId}`,
      `/webhooks/test/project/${projectId}`,
    ];
    const methods = ['GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'TRACE', 'OPTIONS', 'HEAD'];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...methods),
        fc.constantFrom(...paths),
        fc.uint8Array({ maxLength: 30 }),
        fc.uint8Array({ maxLength: 30 }),
        fc.uint8Array({ maxLength: 30 }),
        fc.oneof(
          fc.uint8Array({ maxLength: 300 }),
          hostileString.map((s) => Buffer.from(JSON.stringify({ projectId: s, url: s, types: [s] }))),
        ),
        async (method, path, pathBytes, queryBytes, headerBytes, body) => {
          const request = Buffer.concat([
            Buffer.from(`${method} ${path}`),
            Buffer.from(pathBytes),
            Buffer.from('?q='),
            Buffer.from(queryBytes),
            Buffer.from(` HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${token}\r\nX-Any: `),
            Buffer.from(headerBytes),
            Buffer.from(`\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`),
            Buffer.from(body),
          ]);
          const reply = await rawRequest(port, request);
          if (reply.closed) return; // the parser refused the bytes before a request existed; nothing ran
          assert.ok(
            reply.status >= 200 && reply.status < 500,
            `${reply.status} for ${request.toString('latin1').slice(0, 120)}`,
          );
          if (reply.status >= 400 && method !== 'HEAD')
            assert.equal(reply.headers['content-type']?.split(';')[0], PROBLEM, `${reply.status} ${reply.body}`);
        },
      ),
      { numRuns: 300 },
    );
    assert.deepEqual(errorLines, [], 'no request failed with a logged error');
  });

  it('answers a request Node cannot parse (NUL in a header, a broken request line) with a 400 problem', async () => {
    for (const request of [
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0000b\r\n\r\n',
      'GET /hea lthz HTTP/1.1\r\nHost: x\r\n\r\n',
      '\u0000\u0001\u0002\r\n\r\n',
    ]) {
      const reply = await rawRequest(port, Buffer.from(request, 'latin1'));
      assert.equal(reply.status, 400, JSON.stringify(request));
      assert.equal(reply.headers['content-type'], PROBLEM);
      assert.equal((JSON.parse(reply.body) as { status: number }).status, 400);
    }
  });

  it('cuts off a client that sends its headers too slowly (408 after HTTP_HEADERS_TIMEOUT_MS)', async () => {
    const started = Date.now();
    const reply = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n', { keepOpenMs: 0 });
    const waited = Date.now() - started;
    assert.equal(reply.status, 408);
    assert.equal(reply.headers['content-type'], PROBLEM);
    assert.ok(waited >= limits.HTTP_HEADERS_TIMEOUT_MS - 50, `cut off after ${waited} ms`);
  });

  it('cuts off a client that sends its body too slowly (408 after HTTP_REQUEST_TIMEOUT_MS)', async () => {
    const started = Date.now();
    const reply = await rawRequest(
      port,
      `POST /webhooks/register HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pro`,
      { keepOpenMs: 0 },
    );
    const waited = Date.now() - started;
    assert.ok(reply.closed || reply.status === 408, `status ${reply.status}`);
    assert.ok(waited >= limits.HTTP_REQUEST_TIMEOUT_MS - 50, `cut off after ${waited} ms`);
  });

  const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const deliveries = (query: string) => call('GET', `/webhooks/project/${projectId}/deliveries?${query}`);

  it('answers a crafted cursor (a time past any date, NUL or non-ASCII in the id, the wrong shape) with 400', async () => {
    const crafted = [
      cursorOf([9007199254740991, 'x']),
      cursorOf([Date.now(), 'x']),
      cursorOf(['275760-09-13T00:00:00.000001Z', 'x']),
      cursorOf(['+275760-09-13T00:00:00.000Z', 'x']),
      cursorOf(['9999-99-99T00:00:00.000000Z', 'x']),
      cursorOf(['2026-02-30T00:00:00.000000Z', 'x']),
      cursorOf(['2026-06-30T23:59:60.000000Z', 'x']),
      cursorOf(['0000-01-01T00:00:00.000000Z', 'x']),
      cursorOf(['2026-01-01T00:00:00.000000Z', 'x\u0000y']),
      cursorOf(['2026-01-01T00:00:00.000000Z', 'projét']),
      cursorOf(['2026-01-01T00:00:00.000000Z', '\ud800']),
      cursorOf(['2026-01-01T00:00:00.000000Z', '']),
      cursorOf(['2026-01-01T00:00:00.000000Z', 'x'.repeat(301)]),
      cursorOf(['2026-01-01T00:00:00.000000Z', 1]),
      cursorOf(['2026-01-01T00:00:00.000000Z']),
      cursorOf(['2026-01-01T00:00:00.000000Z', 'x', 'y']),
      cursorOf({ createdAt: '2026-01-01T00:00:00.000000Z', id: 'x' }),
      cursorOf(null),
      'not base64 at all!',
      '%00',
      '%C3%A9',
      '',
    ];
    for (const cursor of crafted) {
      const reply = await deliveries(`cursor=${cursor}`);
      assert.equal(reply.status, 400, `cursor ${cursor}: ${JSON.stringify(reply.json)}`);
      assert.equal(reply.type, PROBLEM);
      assert.equal(reply.json.detail, 'The query is invalid: cursor is not one this API returned', cursor);
    }
    assert.equal((await deliveries(`cursor=${cursorOf(['2026-01-01T00:00:00.000000Z', 'x'])}`)).status, 200);
    assert.deepEqual(errorLines, [], 'nothing was logged as an error');
  });

  it('answers a leap-second since or until, in the list query or the recover body, with 400 naming it', async () => {
    for (const name of ['since', 'until']) {
      const reply = await deliveries(`${name}=2026-06-30T23:59:60Z`);
      assert.equal(reply.status, 400, name);
      assert.equal(reply.type, PROBLEM);
      assert.equal(
        reply.json.detail,
        `The query is invalid: ${name} is a leap second (:60), which this API cannot take: use :59`,
      );
    }
    for (const query of ['since=2026-02-30T00:00:00Z', 'until=2026-01-01T00:00:00', 'since=2026-01-01T10:00 foo'])
      assert.match(
        String((await deliveries(query)).json.detail),
        /^The query is invalid: (since|until) must be an ISO 8601 date-time with a time zone/,
        query,
      );
    for (const body of [
      { since: '2026-06-30T23:59:60Z' },
      { since: '2026-01-01T00:00:00Z', until: '2026-06-30T23:59:60Z' },
    ]) {
      const reply = await call('POST', `/webhooks/project/${projectId}/deliveries/recover`, JSON.stringify(body));
      assert.equal(reply.status, 400, JSON.stringify(body));
      assert.equal(reply.type, PROBLEM);
      assert.match(String(reply.json.detail), /^The request body is invalid: \/(since|until) is a leap second/);
    }
    assert.deepEqual(errorLines, [], 'nothing was logged as an error');
  });

  /** Two digits from 00 to 99: dates and times next to the valid ones (month 13, hour 24, second 60, day 31 in February). */
  const twoDigits = fc.integer({ min: 0, max: 99 }).map((n) => String(n).padStart(2, '0'));
  const year = fc.oneof(
    fc.constantFrom('0000', '0001', '1969', '1970', '2026', '9999'),
    fc.integer({ min: 0, max: 9999 }).map((n) => String(n).padStart(4, '0')),
  );
  const nearTime = (fraction: fc.Arbitrary<string>, zone: fc.Arbitrary<string>) =>
    fc
      .tuple(
        year,
        twoDigits,
        twoDigits,
        fc.constantFrom('T', 't', ' '),
        twoDigits,
        twoDigits,
        twoDigits,
        fraction,
        zone,
      )
      .map(([y, mo, d, sep, h, mi, sec, f, z]) => `${y}-${mo}-${d}${sep}${h}:${mi}:${sec}${f}${z}`);
  const offset = fc.oneof(
    fc.constantFrom('Z', 'z', '', '+00:00', '-23:59', '+24:00'),
    fc.tuple(fc.constantFrom('+', '-'), twoDigits, twoDigits).map(([sign, h, m]) => `${sign}${h}:${m}`),
  );

  it('answers any cursor string, and any base64url of any JSON, with 200 or 400 (property)', async () => {
    const positionTime = nearTime(
      fc.integer({ min: 0, max: 999_999 }).map((n) => `.${String(n).padStart(6, '0')}`),
      fc.constant('Z'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          hostileString.map((text) => Buffer.from(text)),
          fc.uint8Array({ maxLength: 60 }).map((bytes) => Buffer.from(bytes)),
          fc.jsonValue().map(cursorOf),
          fc
            .tuple(fc.oneof(fc.double(), fc.integer(), fc.string(), fc.date().map(String)), hostileString)
            .map(cursorOf),
          fc.tuple(positionTime, fc.oneof(hostileString, fc.stringMatching(/^[\x21-\x7e]{1,300}$/))).map(cursorOf),
        ),
        async (cursor) => {
          // Every byte percent-encoded: invalid UTF-8 and lone surrogates reach the API as they are.
          const bytes = typeof cursor === 'string' ? Buffer.from(cursor) : cursor;
          const reply = await deliveries(
            `cursor=${[...bytes].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('')}`,
          );
          assert.ok(reply.status === 200 || reply.status === 400, `${reply.status} for ${JSON.stringify(cursor)}`);
          if (reply.status === 400) assert.equal(reply.type, PROBLEM);
        },
      ),
      { numRuns: 300 },
    );
    assert.deepEqual(errorLines, [], 'no request failed with a logged error');
  });

  it('answers any since or until, near-valid dates and times included, with 200 or 400 (property)', async () => {
    const fraction = fc.oneof(fc.constant(''), fc.stringMatching(/^\.\d{1,12}$/));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('since', 'until'),
        fc.oneof(hostileString, nearTime(fraction, offset)),
        async (name, value) => {
          const bytes = [...Buffer.from(value)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('');
          const reply = await deliveries(`${name}=${bytes}`);
          assert.ok(
            reply.status === 200 || reply.status === 400,
            `${reply.status} for ${name}=${JSON.stringify(value)}`,
          );
          if (reply.status === 400)
            assert.match(String(reply.json.detail), new RegExp(`^The query is invalid: ${name} `));
        },
      ),
      { numRuns: 300 },
    );
    assert.deepEqual(errorLines, [], 'no request failed with a logged error');
  });

  it('logs a database error with its SQLSTATE and table, never the SQL text or the values', async () => {
    const secret = `secret-value-${randomUUID()}`;
    const error = await t
      .db('projects')
      .insert([{ id: projectId, name: secret }])
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    assert.ok(error instanceof Error, 'the duplicate insert failed');
    const logged = JSON.stringify(loggableError(error));
    assert.match(logged, /"code":"23505"/);
    assert.doesNotMatch(logged, /insert into|projects"? \(|secret-value|Key \(/i);
  });
});

describe('dependencies down: the database', () => {
  it('answers 503 with Retry-After (not 500, not a hang) when the database does not answer, and logs no SQL', async () => {
    // A port that accepts TCP but never speaks: the silent database of the issue.
    const { createServer } = await import('node:net');
    const sockets: import('node:net').Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    const silentPort = await listen(silent);
    const db = createDb(`postgres://u:p@127.0.0.1:${silentPort}/none`, {
      acquireTimeoutMs: 1_000,
      connectTimeoutMs: 500,
    });
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _e, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const app = createApp({
      db,
      secretBox: createSecretBox(randomBytes(32)),
      logger: createLogger('info', 'webhooks', sink),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.reject(new Error('not used')),
    });
    const config = loadConfig({});
    const server = createHttpServer(app, config);
    const apiPort = await listen(server);
    try {
      const response = await fetch(`http://127.0.0.1:${apiPort}/webhooks/project/p1`, {
        headers: { authorization: `Bearer ${hsToken('alice')}` },
      });
      assert.equal(response.status, 503);
      assert.equal(response.headers.get('content-type')?.split(';')[0], PROBLEM);
      assert.equal(response.headers.get('retry-after'), '5');
      assert.match(((await response.json()) as { detail: string }).detail, /The database is not answering/);
      const warning = lines.find((l) => l.includes('dependency unavailable'));
      assert.ok(warning, lines.join('\n'));
      assert.doesNotMatch(warning, /select|projects|project_members/i);
    } finally {
      await closeServer(server);
      await db.destroy();
      for (const socket of sockets) socket.destroy();
      await closeServer(silent);
    }
  });
});

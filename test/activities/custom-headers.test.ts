// A registration's custom headers: set through the API, validated with a 400 naming each problem,
// sealed at rest and shown by name only, and sent on every attempt of a real delivery (Temporal dev server, real
// PostgreSQL, a real receiver), unsigned, beside the spec's signed headers.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import Ajv from 'ajv';
import fc from 'fast-check';
import { customHeadersSchema } from '../../api/webhooks/schemas';
import { customHeaderProblems } from '../../common/registration/custom-headers';
import { createSecretBox, registrationHeadersAad, registrationSecretAad } from '../../common/crypto/secrets';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { fallEvent, fallPayload, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { independentSignatureValid, startTestReceiver } from '../support/receiver';
import { makeCertificates } from '../support/certificates';
import { createLocalEnvironment } from '../support/temporal';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { bearer, hsToken } from '../support/tokens';

interface Problem {
  detail: string;
  errors: { pointer: string; detail: string }[];
}

describe('custom headers: set through the API, sealed at rest, sent on every delivery (Temporal dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx);

  async function member(): Promise<string> {
    const projectId = newProjectId();
    await store.addProject(fx.database.db, projectId, 'Headers');
    await store.addMember(fx.database.db, projectId, 'alice');
    return projectId;
  }

  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${api.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...bearer(hsToken('alice')) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
  };
  const register = (projectId: string, headers?: unknown, url = fx.receiver.url) =>
    call('POST', '/webhooks/register', {
      projectId,
      url,
      types: ['FALL_DETECTION'],
      ...(headers !== undefined && { headers }),
    });

  async function deliverOnce(projectId: string) {
    return fx.runWorker(async (taskQueue) => {
      const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId: `webhook-event-${randomUUID()}`,
      });
      return handle.result();
    });
  }

  it('a receiver behind an X-Api-Key check gets the key on every delivery; the signature is unchanged', async () => {
    const projectId = await member();
    const apiKey = `key-${randomBytes(12).toString('hex')}`;
    const created = await register(projectId, { 'X-Api-Key': apiKey, Authorization: 'Bearer gateway token' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body.headerNames, ['X-Api-Key', 'Authorization']);
    assert.doesNotMatch(JSON.stringify(created.body), new RegExp(apiKey), 'the value is not echoed');

    // GET shows the names, never the values.
    const read = await call('GET', `/webhooks/project/${projectId}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body.headerNames, ['X-Api-Key', 'Authorization']);
    assert.doesNotMatch(JSON.stringify(read.body), /gateway token|key-/);

    // At rest: sealed under the headers' own AAD, bound to the row; nothing in the clear.
    const row = (await store.findRegistration(fx.database.db, projectId))!;
    const raw = JSON.stringify(await fx.database.db('webhook_registrations').where({ project_id: projectId }).first());
    assert.doesNotMatch(raw, new RegExp(`${apiKey}|gateway token`));
    const box = fx.registrations.secretBox;
    assert.deepEqual(JSON.parse(box.open(row.customHeadersSealed!, registrationHeadersAad(row.id))), [
      ['X-Api-Key', apiKey],
      ['Authorization', 'Bearer gateway token'],
    ]);
    assert.throws(() => box.open(row.customHeadersSealed!, registrationSecretAad(row.id)), 'not the secret’s AAD');

    const result = await deliverOnce(projectId);
    assert.equal(result.status, 'delivered');
    const [request] = fx.receiver.requests;
    assert.equal(request!.headers['x-api-key'], apiKey);
    assert.equal(request!.headers.authorization, 'Bearer gateway token');
    assert.equal(request!.rawBody.toString('utf8'), JSON.stringify(fallPayload));
    assert.ok(independentSignatureValid(created.body.secret as string, request!), 'signed over the body, as always');
  });

  it('PATCH replaces the set (a rotated value goes out on the next delivery) and {} removes them', async () => {
    const projectId = await member();
    assert.equal((await register(projectId, { 'X-Api-Key': 'old-key', 'X-Tenant': 'ward-7' })).status, 201);
    const patched = await call('PATCH', '/webhooks', { projectId, headers: { 'X-Api-Key': 'new-key' } });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.deepEqual(patched.body.headerNames, ['X-Api-Key']);
    await deliverOnce(projectId);
    assert.equal(fx.receiver.requests[0]!.headers['x-api-key'], 'new-key');
    assert.equal(fx.receiver.requests[0]!.headers['x-tenant'], undefined);

    // A PATCH without headers leaves them as they are.
    assert.equal(
      (await call('PATCH', '/webhooks', { projectId, types: ['FALL_DETECTION', 'VITAL_THRESHOLD'] })).status,
      200,
    );
    assert.deepEqual((await call('GET', `/webhooks/project/${projectId}`)).body.headerNames, ['X-Api-Key']);

    const cleared = await call('PATCH', '/webhooks', { projectId, headers: {} });
    assert.deepEqual(cleared.body.headerNames, []);
    assert.equal((await store.findRegistration(fx.database.db, projectId))!.customHeadersSealed, null);
    await deliverOnce(projectId);
    assert.equal(fx.receiver.requests[1]!.headers['x-api-key'], undefined);
    assert.equal(typeof fx.receiver.requests[1]!.headers['x-signature'], 'string');
  });

  it('headers belong to their origin: a URL moved elsewhere must restate them, and the new origin never gets them', async () => {
    const projectId = await member();
    const elsewhere = await startTestReceiver();
    try {
      assert.notEqual(new URL(elsewhere.url).origin, new URL(fx.receiver.url).origin, 'another port: another origin');
      assert.equal((await register(projectId, { 'X-Api-Key': 'k-secret-123' })).status, 201);
      const before = (await store.findRegistration(fx.database.db, projectId))!;

      // Only the URL, to another origin: refused, naming the headers; nothing stored.
      const moved = await call('PATCH', '/webhooks', { projectId, url: elsewhere.url });
      assert.equal(moved.status, 400, JSON.stringify(moved.body));
      const problem = moved.body as unknown as Problem;
      assert.deepEqual(
        problem.errors.map((e) => e.pointer),
        ['/headers'],
      );
      assert.match(
        problem.detail,
        /\/headers must be given again \(or \{\} to remove them\) when the url moves to another origin/,
      );
      assert.match(problem.detail, /X-Api-Key/);
      assert.doesNotMatch(problem.detail, /k-secret-123/);
      assert.deepEqual(await store.findRegistration(fx.database.db, projectId), before, 'nothing stored');
      await deliverOnce(projectId);
      assert.equal(elsewhere.requests.length, 0, 'the other origin got nothing');
      assert.equal(fx.receiver.requests[0]!.headers['x-api-key'], 'k-secret-123');

      // Within the origin (another path), the headers stay.
      const samePlace = `${new URL(fx.receiver.url).origin}/hooks/moved?v=2`;
      assert.equal((await call('PATCH', '/webhooks', { projectId, url: samePlace })).status, 200);
      await deliverOnce(projectId);
      assert.equal(fx.receiver.requests[1]!.path, '/hooks/moved?v=2');
      assert.equal(fx.receiver.requests[1]!.headers['x-api-key'], 'k-secret-123');

      // Restated with the URL: accepted, and the new origin gets only what was given for it.
      const restated = await call('PATCH', '/webhooks', {
        projectId,
        url: elsewhere.url,
        headers: { 'X-Api-Key': 'k-b' },
      });
      assert.equal(restated.status, 200, JSON.stringify(restated.body));
      await deliverOnce(projectId);
      assert.equal(elsewhere.requests[0]!.headers['x-api-key'], 'k-b');

      // Removed with the URL: accepted, and the origin after gets none.
      const back = await call('PATCH', '/webhooks', { projectId, url: fx.receiver.url, headers: {} });
      assert.equal(back.status, 200, JSON.stringify(back.body));
      assert.deepEqual(back.body.headerNames, []);
      await deliverOnce(projectId);
      assert.equal(fx.receiver.requests[2]!.headers['x-api-key'], undefined);
      assert.equal(
        [...fx.receiver.requests, ...elsewhere.requests].filter((r) => r.headers['x-api-key'] === 'k-secret-123')
          .length,
        2,
        'the first key only ever went to its own origin',
      );
    } finally {
      await elsewhere.close();
    }
  });

  it('a client certificate belongs to its origin too: a URL moved elsewhere must restate or remove it', async () => {
    const projectId = await member();
    const certs = makeCertificates();
    const created = await call('POST', '/webhooks/register', {
      projectId,
      url: 'https://a.receiver.example/hook',
      types: ['FALL_DETECTION'],
      headers: { 'X-Api-Key': 'k-1' },
      clientCertificate: certs.client,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const before = (await store.findRegistration(fx.database.db, projectId))!;

    // Another port is another origin: both credentials named, nothing stored.
    const moved = await call('PATCH', '/webhooks', { projectId, url: 'https://a.receiver.example:8443/hook' });
    assert.equal(moved.status, 400, JSON.stringify(moved.body));
    const problem = moved.body as unknown as Problem;
    assert.deepEqual(
      problem.errors.map((e) => e.pointer),
      ['/headers', '/clientCertificate'],
    );
    assert.match(problem.detail, /\/clientCertificate must be given again \(or null to remove it\)/);
    assert.deepEqual(await store.findRegistration(fx.database.db, projectId), before, 'nothing stored');

    // Headers restated, the certificate not: still refused, naming only the certificate.
    const half = await call('PATCH', '/webhooks', {
      projectId,
      url: 'https://b.receiver.example/hook',
      headers: { 'X-Api-Key': 'k-2' },
    });
    assert.equal(half.status, 400);
    assert.deepEqual(
      (half.body as unknown as Problem).errors.map((e) => e.pointer),
      ['/clientCertificate'],
    );
    assert.deepEqual(await store.findRegistration(fx.database.db, projectId), before, 'nothing stored');

    // Within the origin the certificate stays.
    const path = await call('PATCH', '/webhooks', { projectId, url: 'https://a.receiver.example/other' });
    assert.equal(path.status, 200);
    assert.equal(
      (path.body.clientCertificate as { fingerprint: string }).fingerprint,
      before.clientCertificate!.fingerprint,
    );

    // Removed with the new URL: accepted.
    const removed = await call('PATCH', '/webhooks', {
      projectId,
      url: 'https://b.receiver.example/hook',
      headers: {},
      clientCertificate: null,
    });
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    const after = (await store.findRegistration(fx.database.db, projectId))!;
    assert.deepEqual(
      [after.url, after.clientCertificate, after.customHeadersSealed],
      ['https://b.receiver.example/hook', null, null],
    );
  });

  const refusals: [string, unknown, { pointer: string; detail: RegExp }][] = [
    [
      'a reserved name (the signature)',
      { 'X-Signature': 'forged' },
      { pointer: '/headers/X-Signature', detail: /header X-Signature is reserved/ },
    ],
    [
      'a reserved prefix (Standard Webhooks)',
      { 'Webhook-Id': 'x' },
      { pointer: '/headers/Webhook-Id', detail: /header Webhook-Id is reserved/ },
    ],
    [
      'a body header',
      { 'content-type': 'text/plain' },
      { pointer: '/headers/content-type', detail: /is reserved: the service describes the body/ },
    ],
    ['Host', { Host: 'evil.example' }, { pointer: '/headers/Host', detail: /header Host is reserved/ }],
    [
      'a hop-by-hop header',
      { 'Transfer-Encoding': 'chunked' },
      { pointer: '/headers/Transfer-Encoding', detail: /hop-by-hop/ },
    ],
    [
      'a proxy header',
      { 'Proxy-Authorization': 'Basic x' },
      { pointer: '/headers/Proxy-Authorization', detail: /hop-by-hop/ },
    ],
    ['traceparent', { traceparent: '00-x' }, { pointer: '/headers/traceparent', detail: /tracing/ }],
    [
      'a name that is not a token',
      { 'X Api Key': 'v' },
      { pointer: '/headers/X Api Key', detail: /must be 1 to 64 .*HTTP token/ },
    ],
    [
      'a value with CR LF (header injection)',
      { 'X-Api-Key': 'v\r\nX-Signature: forged' },
      { pointer: '/headers/X-Api-Key', detail: /must not contain CR, LF or NUL/ },
    ],
    ['a value with NUL', { 'X-Api-Key': 'v\u0000' }, { pointer: '/headers/X-Api-Key', detail: /CR, LF or NUL/ }],
    [
      'a value over 1024 characters',
      { 'X-Api-Key': 'k'.repeat(1025) },
      { pointer: '/headers/X-Api-Key', detail: /at most 1024 characters/ },
    ],
    [
      'a value outside visible ASCII',
      { 'X-Api-Key': 'clé' },
      { pointer: '/headers/X-Api-Key', detail: /visible ASCII/ },
    ],
    ['an empty value', { 'X-Api-Key': '' }, { pointer: '/headers/X-Api-Key', detail: /must not be empty/ }],
    ['a value that is not a string', { 'X-Api-Key': 42 }, { pointer: '/headers/X-Api-Key', detail: /string value/ }],
    [
      'a name twice in different case',
      { 'X-Api-Key': 'a', 'x-api-key': 'b' },
      { pointer: '/headers/x-api-key', detail: /case-insensitive/ },
    ],
    [
      'eleven headers',
      Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, 'v'])),
      { pointer: '/headers', detail: /at most 10 headers/ },
    ],
    ['not an object', ['X-Api-Key: v'], { pointer: '/headers', detail: /must be an object/ }],
  ];

  for (const [name, headers, expected] of refusals) {
    it(`refuses ${name} with a 400 naming it, storing nothing`, async () => {
      const projectId = await member();
      const refused = await register(projectId, headers);
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      const problem = refused.body as unknown as Problem;
      const match = problem.errors.find((e) => e.pointer === expected.pointer);
      assert.ok(match, JSON.stringify(problem.errors));
      assert.match(match.detail, expected.detail);
      assert.equal(await store.findRegistration(fx.database.db, projectId), undefined, 'nothing stored');

      // The same on PATCH: the stored registration and its headers are untouched.
      assert.equal((await register(projectId, { 'X-Api-Key': 'kept' })).status, 201);
      const before = (await store.findRegistration(fx.database.db, projectId))!;
      const patch = await call('PATCH', '/webhooks', { projectId, url: 'https://elsewhere.example/h', headers });
      assert.equal(patch.status, 400);
      assert.ok((patch.body as unknown as Problem).errors.some((e) => e.pointer === expected.pointer));
      assert.deepEqual(await store.findRegistration(fx.database.db, projectId), before);
    });
  }

  it('allows Authorization (for receivers’ gateways) and ten headers at the caps', async () => {
    const projectId = await member();
    const headers = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`X-${String(i).padStart(62, 'h')}`, `v ${'x'.repeat(1021)}`]),
    );
    headers['Authorization'] = 'Basic dXNlcjpwYXNz';
    delete headers[Object.keys(headers)[0]!];
    const created = await register(projectId, headers);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await deliverOnce(projectId);
    assert.equal(fx.receiver.requests[0]!.headers.authorization, 'Basic dXNlcjpwYXNz');
    assert.equal(Object.keys(fx.receiver.requests[0]!.headers).filter((h) => h.startsWith('x-hhh')).length, 9);
  });
});

describe('custom headers: the document states what the API enforces', () => {
  const validate = new Ajv({ strict: true, allErrors: true }).compile(customHeadersSchema);
  const name = fc.oneof(
    fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,70}$/),
    fc.constantFrom(
      'X-Signature',
      'content-length',
      'WEBHOOK-ID',
      'Proxy-Foo',
      'TE',
      'te-x',
      'Hosts',
      'user-agent',
      'Authorization',
    ),
    fc.string({ maxLength: 8 }),
  );
  const value = fc.oneof(fc.string({ maxLength: 20 }), fc.stringMatching(/^[\t\x20-\x7e]{0,1030}$/), fc.constant(' x'));

  it('a headers object the schema accepts is one the API accepts, and the other way round', () => {
    fc.assert(
      fc.property(fc.dictionary(name, value, { maxKeys: 12 }), (headers) => {
        const lower = Object.keys(headers).map((n) => n.toLowerCase());
        fc.pre(new Set(lower).size === lower.length);
        assert.equal(validate(headers), customHeaderProblems(headers).length === 0, JSON.stringify(headers));
      }),
      { numRuns: 500 },
    );
  });
});

describe('custom headers: secrets reseal rewrites them under the newest key (real PostgreSQL)', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  before(async () => (database = await createTestDatabase()));
  after(() => database?.destroy());

  it('the headers’ AAD names the registration and is not the secret’s', () => {
    const id = randomUUID();
    assert.equal(registrationHeadersAad(id), `webhook-registration-headers:${id}`);
    assert.notEqual(registrationHeadersAad(id), registrationSecretAad(id));
  });

  it('a registration without headers has nothing sealed, and the reseal counts only its secret', async () => {
    const key = { id: 'k1', key: randomBytes(32) };
    const projectId = newProjectId();
    await store.addProject(database.db, projectId);
    await store.createRegistration(database.db, createSecretBox([key]), {
      projectId,
      url: 'https://receiver.example/h',
      types: ['FALL_DETECTION'],
    });
    const row = (await store.findRegistration(database.db, projectId))!;
    assert.deepEqual([row.customHeaderNames, row.customHeadersSealed], [[], null]);
    assert.deepEqual(store.openCustomHeaders(createSecretBox([key]), row), []);
    await store.deleteRegistration(database.db, projectId);
  });

  it('sealed under the old key, opened under the new one alone after the reseal', async () => {
    const oldKey = { id: 'k1', key: randomBytes(32) };
    const newKey = { id: 'k2', key: randomBytes(32) };
    const projectId = newProjectId();
    await store.addProject(database.db, projectId);
    await store.createRegistration(database.db, createSecretBox([oldKey]), {
      projectId,
      url: 'https://receiver.example/h',
      types: ['FALL_DETECTION'],
      headers: { 'X-Api-Key': 'k-123' },
    });
    const report = await store.resealRegistrationSecrets(database.db, createSecretBox([newKey, oldKey]));
    assert.deepEqual(report, { total: 2, resealed: 2 });
    const row = (await store.findRegistration(database.db, projectId))!;
    assert.deepEqual(store.openCustomHeaders(createSecretBox([newKey]), row), [['X-Api-Key', 'k-123']]);
  });
});

// OAuth 2.0 client credentials to receivers: set through the API (checked, sealed, shown without its secret,
// audited), and carried by real deliveries through the Temporal dev server: tokens from a real oidc-provider on
// 127.0.0.1 that live a few seconds, a real receiver that checks every signature and introspects every bearer token,
// private_key_jwt clients, a token revoked under the worker's feet, a token endpoint down and back, a token URL the
// SSRF guard refuses. The pure parts (how long a token is kept, the client assertion, the token endpoint's answer, the
// upload's checks) are unit tested at the end.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes, randomUUID, verify, type KeyObject } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import { createWebhookHttpClient } from '../../activities';
import {
  createTokenCache,
  DEFAULT_TOKEN_LIFETIME_MS,
  oauthClientCredentials,
  readTokenAnswer,
  tokenUsableUntil,
} from '../../activities/delivery-options/oauth-client-credentials';
import { validateRegisterBody } from '../../api/webhooks/schemas';
import { describeReceiverError } from '../../api/webhooks/test-event';
import { FailureType } from '../../common/contract';
import { createSecretBox, registrationOAuthCredentialAad, registrationSecretAad } from '../../common/crypto/secrets';
import {
  CLIENT_ASSERTION_LIFETIME_SECONDS,
  inspectOAuthClient,
  signClientAssertion,
} from '../../common/registration/oauth-client';
import { HTTPS_REQUIRED } from '../../common/registration/webhook-url';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { captureLogger, fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { createLocalEnvironment } from '../support/temporal';
import { startTinyproxy } from '../support/tinyproxy';
import { bearer, hsToken } from '../support/tokens';
import {
  SCOPE,
  startProtectedReceiver,
  startTestProvider,
  type ProtectedReceiver,
  type TestProvider,
} from './oauth-provider';

/** How long the provider's client-credentials tokens live. */
const TOKEN_SECONDS = 3;

const es384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
const rs = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pemOf = (key: KeyObject) => key.export({ type: 'pkcs8', format: 'pem' }) as string;
const jwkOf = (key: KeyObject, kid: string, alg: string) => ({
  ...key.export({ format: 'jwk' }),
  kid,
  alg,
  use: 'sig',
});

const clients = {
  basic: { clientId: 'webhooks-basic', clientSecret: `cs-${randomBytes(12).toString('hex')}` },
  post: { clientId: 'webhooks-post', clientSecret: `cs-${randomBytes(12).toString('hex')}` },
  revocable: { clientId: 'webhooks-long', clientSecret: `cs-${randomBytes(12).toString('hex')}` },
  es384: { clientId: 'webhooks-es384', kid: 'webhooks-es384-1' },
  rs384: { clientId: 'webhooks-rs384', kid: 'webhooks-rs384-1' },
};

describe('OAuth client credentials: bearer tokens from a real provider on real deliveries (Temporal dev server)', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx);
  let provider: TestProvider;
  let receiver: ProtectedReceiver;

  before(async () => {
    provider = await startTestProvider(
      [
        { ...clients.basic, method: 'client_secret_basic' },
        { ...clients.post, method: 'client_secret_post' },
        { ...clients.revocable, method: 'client_secret_basic', tokenSeconds: 120 },
        {
          clientId: clients.es384.clientId,
          method: 'private_key_jwt',
          jwk: jwkOf(es384.publicKey, clients.es384.kid, 'ES384'),
        },
        {
          clientId: clients.rs384.clientId,
          method: 'private_key_jwt',
          jwk: jwkOf(rs.publicKey, clients.rs384.kid, 'RS384'),
        },
      ],
      TOKEN_SECONDS,
    );
    receiver = await startProtectedReceiver(provider);
  });
  after(async () => {
    await receiver?.close();
    await provider?.close();
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${api.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...bearer(hsToken('alice')) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
  };

  /** A project of alice's with its webhook at the protected receiver, expecting `clientId`'s tokens. */
  async function register(oauth: Record<string, unknown>, expectedClient = oauth.clientId as string) {
    const projectId = newProjectId();
    await store.addProject(fx.database.db, projectId, 'OAuth');
    await store.addMember(fx.database.db, projectId, 'alice');
    const created = await call('POST', '/webhooks/register', {
      projectId,
      url: receiver.urlFor(projectId),
      types: ['FALL_DETECTION'],
      oauth,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    receiver.expect(projectId, created.body.secret as string, expectedClient);
    return { projectId, registrationId: created.body._id as string, view: created.body };
  }

  /** A project whose webhook gets its tokens from a client with a secret (`clients.basic` unless named), with SCOPE. */
  const registerSecretClient = (
    client: { clientId: string; clientSecret: string } = clients.basic,
    fields: Record<string, unknown> = {},
  ) =>
    register({
      tokenUrl: provider.tokenUrl,
      clientId: client.clientId,
      clientSecret: client.clientSecret,
      scope: SCOPE,
      ...fields,
    });

  const start = (projectId: string, taskQueue: string) =>
    fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
      args: [fallEvent(projectId)],
      taskQueue,
      workflowId: `webhook-event-${randomUUID()}`,
    });

  /** The delivery's row once its first failed attempt is logged and the breaker has counted it (written after). */
  async function firstFailure(projectId: string, workflowId: string, registrationId: string) {
    for (let i = 0; i < 200; i++) {
      const row = await store.findDelivery(fx.database.db, projectId, workflowId);
      const breaker = await store.findBreaker(fx.database.db, registrationId);
      if (row?.attempts && breaker?.lastFailure) return { row, breaker };
      await sleep(50);
    }
    assert.fail('no failed attempt counted');
  }

  const verdictsOf = (projectId: string) => receiver.verdicts.filter((v) => v.projectId === projectId);

  it('client_secret_basic: deliveries across several token expiries, each with an active token, none lost, tokens reused', async () => {
    const { projectId } = await registerSecretClient();
    const { logger, raw } = captureLogger();
    const count = 14;
    const results = await fx.runWorker(
      async (taskQueue) => {
        const handles = [];
        for (let i = 0; i < count; i++) {
          handles.push(await start(projectId, taskQueue));
          await sleep(700);
        }
        return Promise.all(handles.map((handle) => handle.result()));
      },
      { logger },
    );
    assert.deepEqual(
      results.map((r) => [r.status, r.attempts]),
      Array.from({ length: count }, () => ['delivered', 1]),
    );
    const verdicts = verdictsOf(projectId);
    // Each event once, each with a valid signature and a token the provider called active: none sent expired.
    assert.equal(verdicts.length, count, JSON.stringify(verdicts.map((v) => v.status)));
    for (const verdict of verdicts) {
      assert.equal(verdict.signatureValid, true);
      assert.equal(verdict.active, true, 'an active token of the expected client');
      assert.equal(verdict.clientId, clients.basic.clientId);
      assert.ok(verdict.scope?.split(' ').includes(SCOPE));
    }
    // About 10 s of deliveries with 3 s tokens: several tokens, each used for several deliveries.
    const tokens = new Set(verdicts.map((v) => v.token));
    const issued = provider.issued.get(clients.basic.clientId) ?? 0;
    assert.ok(tokens.size >= 3, `${tokens.size} tokens across the expiries`);
    assert.equal(issued, tokens.size, 'every token issued was used');
    assert.ok(issued <= count / 2, `${issued} tokens for ${count} deliveries: kept between them`);
    // Neither the client secret nor any token reaches the worker's log.
    const log = raw.join('\n');
    assert.doesNotMatch(log, new RegExp(clients.basic.clientSecret));
    for (const token of tokens) assert.ok(token && !log.includes(token), 'no token in the log');
  });

  it('private_key_jwt (ES384 and RS384 assertions, with their kid) and client_secret_post clients get their tokens', async () => {
    const jwtEs = await register({
      tokenUrl: provider.tokenUrl,
      clientId: clients.es384.clientId,
      privateKey: pemOf(es384.privateKey),
      keyId: clients.es384.kid,
      scope: SCOPE,
    });
    assert.deepEqual(jwtEs.view.oauth, {
      tokenUrl: provider.tokenUrl,
      clientId: clients.es384.clientId,
      clientAuthentication: 'private_key_jwt',
      scope: SCOPE,
      keyId: clients.es384.kid,
    });
    assert.doesNotMatch(JSON.stringify(jwtEs.view), /PRIVATE KEY/);
    const jwtRs = await register({
      tokenUrl: provider.tokenUrl,
      clientId: clients.rs384.clientId,
      clientAuthentication: 'private_key_jwt',
      privateKey: pemOf(rs.privateKey),
      keyId: clients.rs384.kid,
      scope: SCOPE,
    });
    const post = await registerSecretClient(clients.post, { clientAuthentication: 'client_secret_post' });
    const projects = [jwtEs.projectId, jwtRs.projectId, post.projectId];
    const results = await fx.runWorker(async (taskQueue) => {
      const handles = [];
      for (const projectId of projects)
        handles.push(await start(projectId, taskQueue), await start(projectId, taskQueue));
      return Promise.all(handles.map((handle) => handle.result()));
    });
    assert.ok(results.every((r) => r.status === 'delivered' && r.attempts === 1));
    for (const [projectId, clientId] of [
      [jwtEs.projectId, clients.es384.clientId],
      [jwtRs.projectId, clients.rs384.clientId],
      [post.projectId, clients.post.clientId],
    ] as const) {
      const verdicts = verdictsOf(projectId);
      assert.deepEqual(
        verdicts.map((v) => [v.status, v.clientId, v.signatureValid]),
        [
          [200, clientId, true],
          [200, clientId, true],
        ],
      );
    }
  });

  it('a receiver answering 401 to a token revoked while kept: a fresh token and the delivery sent again in the same attempt', async () => {
    const { projectId } = await registerSecretClient(clients.revocable);
    const { first, second } = await fx.runWorker(async (taskQueue) => {
      const first = await (await start(projectId, taskQueue)).result();
      // The provider forgets the token the worker keeps (it would live two minutes more).
      const [kept] = verdictsOf(projectId);
      await provider.revoke(kept!.token!, clients.revocable);
      const second = await (await start(projectId, taskQueue)).result();
      return { first, second };
    });
    assert.deepEqual([first.status, first.attempts], ['delivered', 1]);
    assert.deepEqual([second.status, second.attempts], ['delivered', 1], 'delivered within its first attempt');
    const verdicts = verdictsOf(projectId);
    assert.deepEqual(
      verdicts.map((v) => v.status),
      [200, 401, 200],
    );
    assert.equal(verdicts[1]!.token, verdicts[0]!.token, 'the revoked token was tried once');
    assert.notEqual(verdicts[2]!.token, verdicts[0]!.token, 'then a fresh one');
    assert.ok(verdicts.every((v) => v.signatureValid));
    assert.equal(provider.issued.get(clients.revocable.clientId), 2);
  });

  it('a token endpoint down fails the attempt retryably, naming the token endpoint (log, breaker, health); back, the delivery goes', async () => {
    const { projectId, registrationId } = await registerSecretClient();
    await provider.stop();
    let restarted = false;
    try {
      const result = await fx.runWorker(
        async (taskQueue) => {
          const handle = await start(projectId, taskQueue);
          // The first failed attempt, as members see it.
          const { row, breaker } = await firstFailure(projectId, handle.workflowId, registrationId);
          assert.equal(row?.status, 'pending', 'retried, not given up');
          assert.equal(row?.lastError, 'OAuth token endpoint unreachable: ECONNREFUSED');
          const [attempt] = await store.listDeliveryAttempts(fx.database.db, row);
          assert.equal(attempt?.errorCode, 'OAUTH_TOKEN_ECONNREFUSED');
          assert.equal(attempt?.statusCode, null);
          assert.equal(breaker?.lastFailure?.message, 'OAuth token endpoint unreachable: ECONNREFUSED');
          const health = await store.findEndpointHealth(fx.database.db, projectId);
          assert.equal(health?.lastError, 'OAuth token endpoint unreachable: ECONNREFUSED');
          assert.equal(verdictsOf(projectId).length, 0, 'the receiver was not asked without a token');
          await provider.start();
          restarted = true;
          return handle.result();
        },
        { config: { ...fastConfig, BREAKER_FAILURE_THRESHOLD: 1_000 } },
      );
      assert.equal(result.status, 'delivered');
      assert.ok(result.attempts >= 2, `${result.attempts} attempts`);
      assert.deepEqual(
        verdictsOf(projectId).map((v) => v.status),
        [200],
      );
    } finally {
      if (!restarted) await provider.start();
    }
  });

  it('a wrong client secret names the token endpoint’s answer; a PATCH fixes it, and another PATCH changes the client kept', async () => {
    const { projectId, registrationId } = await register(
      { tokenUrl: provider.tokenUrl, clientId: clients.basic.clientId, clientSecret: 'not-the-secret', scope: SCOPE },
      clients.basic.clientId,
    );
    const outcome = await fx.runWorker(async (taskQueue) => {
      const handle = await start(projectId, taskQueue);
      const { row, breaker } = await firstFailure(projectId, handle.workflowId, registrationId);
      assert.equal(row?.lastError, 'OAuth token endpoint answered HTTP 401: invalid_client');
      assert.equal(breaker?.lastFailure?.message, 'OAuth token endpoint answered HTTP 401: invalid_client');
      const fixed = await call('PATCH', '/webhooks', {
        projectId,
        oauth: {
          tokenUrl: provider.tokenUrl,
          clientId: clients.basic.clientId,
          clientSecret: clients.basic.clientSecret,
          scope: SCOPE,
        },
      });
      assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
      const first = await handle.result();
      // Another client for the same registration: its token, not the one kept for the previous configuration.
      receiver.expectClient(projectId, clients.post.clientId);
      const changed = await call('PATCH', '/webhooks', {
        projectId,
        oauth: {
          tokenUrl: provider.tokenUrl,
          clientId: clients.post.clientId,
          clientAuthentication: 'client_secret_post',
          clientSecret: clients.post.clientSecret,
          scope: SCOPE,
        },
      });
      assert.equal(changed.status, 200);
      const second = await (await start(projectId, taskQueue)).result();
      return { first, second };
    });
    assert.equal(outcome.first.status, 'delivered');
    assert.deepEqual([outcome.second.status, outcome.second.attempts], ['delivered', 1]);
    assert.deepEqual(
      verdictsOf(projectId).map((v) => [v.status, v.clientId]),
      [
        [200, clients.basic.clientId],
        [200, clients.post.clientId],
      ],
      'no 401: the PATCH changed the token the worker sends',
    );
  });

  it('a token URL at a private address is refused by the SSRF guard like a receiver: no token request, not retried', async () => {
    const { projectId } = await registerSecretClient(clients.basic, { scope: undefined });
    const answers = provider.tokenAnswers.length;
    const failure = await fx
      .runWorker(async (taskQueue) => (await start(projectId, taskQueue)).result(), {
        config: { ...fastConfig, ALLOW_PRIVATE_WEBHOOK_URLS: false },
      })
      .then(
        () => assert.fail('delivered'),
        (error: unknown) => error,
      );
    // The workflow's WebhookDeliveryFailed, caused by the attempt's failure (under an ActivityFailure, if durable).
    let attemptFailure = failure as { type?: string; message?: string; cause?: unknown } | undefined;
    while (attemptFailure && attemptFailure.type !== FailureType.TargetForbidden)
      attemptFailure = attemptFailure.cause as typeof attemptFailure;
    assert.ok(attemptFailure, 'failed as WebhookTargetForbidden');
    assert.match(
      attemptFailure.message ?? '',
      /^Refused to request an OAuth token: the token URL leads to a loopback address/,
    );
    assert.equal(provider.tokenAnswers.length, answers, 'the token endpoint was never asked');
    assert.equal(verdictsOf(projectId).length, 0);
  });

  it('through the egress proxy: the token request is tunnelled like the delivery', async () => {
    const { projectId } = await registerSecretClient();
    const proxy = await startTinyproxy();
    try {
      const answers = provider.tokenAnswers.length;
      const result = await fx.runWorker(async (taskQueue) => (await start(projectId, taskQueue)).result(), {
        config: { ...fastConfig, HTTP_PROXY: proxy.url },
      });
      assert.equal(result.status, 'delivered');
      assert.equal(provider.tokenAnswers.length, answers + 1);
      const log = proxy.log();
      assert.ok(log.includes(`CONNECT ${new URL(provider.tokenUrl).host} HTTP/1.1`), 'the token request tunnelled');
      assert.ok(log.includes(`CONNECT ${new URL(receiver.urlFor(projectId)).host} HTTP/1.1`), 'the delivery tunnelled');
      assert.deepEqual(
        verdictsOf(projectId).map((v) => v.status),
        [200],
      );
    } finally {
      await proxy.close();
    }
  });

  it('through the API: checked (400 naming the field, nothing stored), sealed under its own AAD, shown and audited without the secret, replaced and removed', async () => {
    const projectId = newProjectId();
    await store.addProject(fx.database.db, projectId, 'OAuth');
    await store.addMember(fx.database.db, projectId, 'alice');
    const body = (oauth: unknown) => ({ projectId, url: receiver.urlFor(projectId), types: ['FALL_DETECTION'], oauth });
    const refusals: [unknown, string[]][] = [
      [{ tokenUrl: 'ftp://auth.example/token', clientId: 'c', clientSecret: 's' }, ['/oauth/tokenUrl']],
      [{ tokenUrl: 'https://auth.example/token#f', clientId: 'c', clientSecret: 's' }, ['/oauth/tokenUrl']],
      [{ tokenUrl: 'https://u:p@auth.example/token', clientId: 'c', clientSecret: 's' }, ['/oauth/tokenUrl']],
      [{ tokenUrl: provider.tokenUrl, clientId: 'c' }, ['/oauth/clientSecret']],
      [{ tokenUrl: provider.tokenUrl, clientId: 'c', privateKey: 'not a key' }, ['/oauth/privateKey']],
      [
        { tokenUrl: provider.tokenUrl, clientId: 'c', privateKey: pemOf(es384.privateKey), clientSecret: 's' },
        ['/oauth/clientSecret'],
      ],
      [
        { tokenUrl: provider.tokenUrl, clientId: 'c', clientAuthentication: 'private_key_jwt', clientSecret: 's' },
        ['/oauth/clientSecret', '/oauth/privateKey'],
      ],
      [{ tokenUrl: provider.tokenUrl, clientId: 'c', clientSecret: 's', keyId: 'k' }, ['/oauth/keyId']],
      [{ tokenUrl: provider.tokenUrl, clientId: 'c', clientSecret: 's', scope: 'a  b' }, ['/oauth/scope']],
      [{ tokenUrl: provider.tokenUrl, clientId: 'c', clientSecret: 's', extra: 1 }, ['/oauth']],
    ];
    for (const [oauth, pointers] of refusals) {
      const refused = await call('POST', '/webhooks/register', body(oauth));
      assert.equal(refused.status, 400, JSON.stringify(oauth));
      const errors = (refused.body.errors as { pointer: string }[]).map((e) => e.pointer);
      assert.deepEqual(errors, pointers, JSON.stringify(refused.body));
    }
    assert.equal((await call('GET', `/webhooks/project/${projectId}`)).status, 404, 'nothing stored');

    // Where receivers must be https, so must the token endpoint.
    assert.throws(
      () =>
        validateRegisterBody(
          {
            ...body({ tokenUrl: 'http://auth.example/token', clientId: 'c', clientSecret: 's' }),
            url: 'https://r.example/h',
          },
          { httpsOnly: true },
        ),
      (error: { errors?: { pointer: string; detail: string }[] }) =>
        JSON.stringify(error.errors) === JSON.stringify([{ pointer: '/oauth/tokenUrl', detail: HTTPS_REQUIRED }]),
    );

    const secret = `cs-${randomBytes(12).toString('hex')}`;
    const created = await call(
      'POST',
      '/webhooks/register',
      body({ tokenUrl: provider.tokenUrl, clientId: 'ward-7', clientSecret: secret, scope: SCOPE }),
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const facts = {
      tokenUrl: provider.tokenUrl,
      clientId: 'ward-7',
      clientAuthentication: 'client_secret_basic',
      scope: SCOPE,
      keyId: null,
    };
    assert.deepEqual(created.body.oauth, facts);
    const read = await call('GET', `/webhooks/project/${projectId}`);
    assert.deepEqual(read.body.oauth, facts);
    assert.doesNotMatch(JSON.stringify([created.body, read.body]), new RegExp(secret));

    const row = (await store.findRegistration(fx.database.db, projectId))!;
    const raw = JSON.stringify(await fx.database.db('webhook_registrations').where({ project_id: projectId }).first());
    assert.doesNotMatch(raw, new RegExp(secret), 'sealed at rest');
    const box = fx.registrations.secretBox;
    assert.equal(box.open(row.oauth!.credentialSealed, registrationOAuthCredentialAad(row.id)), secret);
    assert.throws(() => box.open(row.oauth!.credentialSealed, registrationSecretAad(row.id)), 'not the secret’s AAD');

    // Replaced by a private_key_jwt client, then removed; a URL moving elsewhere must restate it.
    const replaced = await call('PATCH', '/webhooks', {
      projectId,
      oauth: { tokenUrl: provider.tokenUrl, clientId: 'ward-8', privateKey: pemOf(rs.privateKey), keyId: 'k-1' },
    });
    assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
    assert.deepEqual(replaced.body.oauth, {
      tokenUrl: provider.tokenUrl,
      clientId: 'ward-8',
      clientAuthentication: 'private_key_jwt',
      scope: null,
      keyId: 'k-1',
    });
    const moved = await call('PATCH', '/webhooks', { projectId, url: 'https://elsewhere.example/hooks' });
    assert.equal(moved.status, 400);
    assert.deepEqual(
      (moved.body.errors as { pointer: string }[]).map((e) => e.pointer),
      ['/oauth'],
    );
    const removed = await call('PATCH', '/webhooks', { projectId, oauth: null });
    assert.equal(removed.status, 200);
    assert.equal(removed.body.oauth, null);
    const columns = await fx.database.db('webhook_registrations').where({ project_id: projectId }).first();
    assert.deepEqual(
      Object.entries(columns as Record<string, unknown>).filter(
        ([name, value]) => name.startsWith('oauth_') && value !== null,
      ),
      [],
    );

    const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
      action: string;
      changes?: { oauth?: { before?: unknown; after?: unknown } };
    }[];
    assert.doesNotMatch(JSON.stringify(trail), new RegExp(`${secret}|PRIVATE KEY`), 'no secret in the trail');
    const registered = trail.find((e) => e.action === 'webhook.register');
    assert.deepEqual(registered?.changes?.oauth, { after: facts });
    const updates = trail.filter((e) => e.action === 'webhook.update' && e.changes?.oauth);
    assert.deepEqual(
      updates
        .map((e) => [
          (e.changes!.oauth!.before as { clientId?: string } | null)?.clientId ?? null,
          (e.changes!.oauth!.after as { clientId?: string } | null)?.clientId ?? null,
        ])
        .sort(),
      [
        ['ward-7', 'ward-8'],
        ['ward-8', null],
      ],
    );
  });
});

describe('OAuth client credentials: secrets reseal rewrites the client secret under the newest key (real PostgreSQL)', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  before(async () => (database = await createTestDatabase()));
  after(() => database?.destroy());

  it('sealed under the old key, opened under the new one alone after the reseal', async () => {
    const oldKey = { id: 'k1', key: randomBytes(32) };
    const newKey = { id: 'k2', key: randomBytes(32) };
    const projectId = newProjectId();
    await store.addProject(database.db, projectId);
    const oauth = {
      info: {
        tokenUrl: 'https://auth.example/token',
        clientId: 'c',
        clientAuthentication: 'client_secret_basic' as const,
        scope: null,
        keyId: null,
      },
      credential: 'cs-123',
    };
    await store.createRegistration(database.db, createSecretBox([oldKey]), {
      projectId,
      url: 'https://receiver.example/h',
      types: ['FALL_DETECTION'],
      oauth,
    });
    const report = await store.resealRegistrationSecrets(database.db, createSecretBox([newKey, oldKey]));
    assert.deepEqual(report, { total: 2, resealed: 2 });
    const row = (await store.findRegistration(database.db, projectId))!;
    assert.equal(store.openOAuthCredential(createSecretBox([newKey]), { id: row.id, oauth: row.oauth! }), 'cs-123');
  });
});

describe('OAuth client credentials: the token request’s own timeout (a real token endpoint that never answers)', function () {
  this.timeout(30_000);
  // Accepts every connection and never answers: only the token request's timeout ends the wait.
  const sockets = new Set<Socket>();
  const silent = createServer(() => undefined).on('connection', (socket) => sockets.add(socket));
  const secretBox = createSecretBox(randomBytes(32));
  // The receiver's timeout is far longer: the token request must not wait for it.
  const http = createWebhookHttpClient({ timeoutMs: 20_000, allowPrivate: true });
  let tokenUrl: string;
  before(async () => {
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    tokenUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/token`;
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    await http.close();
  });

  /** The option prepared for one attempt of a registration whose token endpoint is the silent one. */
  async function authorizationUntil(deadlineMs: number | undefined) {
    const id = randomUUID();
    const prepare = oauthClientCredentials.setUp({ config: { WEBHOOK_TIMEOUT_MS: 20_000 }, secretBox, http });
    const registration = {
      id,
      oauth: {
        tokenUrl,
        clientId: 'c',
        clientAuthentication: 'client_secret_post' as const,
        scope: null,
        keyId: null,
        credentialSealed: secretBox.seal('cs-1', registrationOAuthCredentialAad(id)),
      },
    } as unknown as store.RegistrationRow;
    const contribution = await prepare(registration, {
      url: new URL('http://127.0.0.1/hook'),
      log: captureLogger().logger,
      attempt: 2,
      ...(deadlineMs !== undefined && { deadlineMs }),
    });
    return contribution!.authorization!;
  }

  it('ends at what is left of the attempt’s deadline, not the receiver’s timeout, naming the wait in seconds', async () => {
    const started = Date.now();
    const authorization = await authorizationUntil(started + 400);
    const failure = await authorization.headers().then(
      () => assert.fail('a token from a silent endpoint'),
      (error: unknown) => error,
    );
    const took = Date.now() - started;
    assert.ok(failure instanceof ApplicationFailure, String(failure));
    assert.match(failure.message, /^OAuth token endpoint did not answer within 0\.[34]\d* s \(TIMEOUT\)$/);
    assert.equal(failure.type, FailureType.ReceiverUnreachable);
    assert.equal(failure.nonRetryable, false, 'retried like an unreachable receiver');
    assert.deepEqual((failure.details?.[0] as { attempt: number; errorCode: string }).errorCode, 'OAUTH_TOKEN_TIMEOUT');
    assert.ok(took >= 300 && took < 5_000, `${took} ms`);
  });
});

describe('OAuth client credentials: the pure parts', () => {
  it('a token is kept until shortly before it expires (a second less for the rounding, then 30 s or a tenth of a short life); 5 min without expires_in', () => {
    assert.equal(tokenUsableUntil(1_000, 3600), 1_000 + 3_599_000 - 30_000);
    assert.equal(tokenUsableUntil(1_000, 3), 1_000 + 2_000 - 200);
    assert.equal(tokenUsableUntil(1_000, 301), 1_000 + 300_000 - 30_000);
    assert.equal(tokenUsableUntil(1_000, 1), 1_000, 'a one-second token is not kept');
    for (const missing of [undefined, 0, -5, Number.NaN])
      assert.equal(tokenUsableUntil(1_000, missing), 1_000 + DEFAULT_TOKEN_LIFETIME_MS - 30_000);
  });

  it('the cache: kept until usable no more, one request for concurrent attempts, a new configuration or a dropped token fetched afresh, a failure not kept', async () => {
    let now = 0;
    const cache = createTokenCache(() => now);
    let fetched = 0;
    const fetch = () => Promise.resolve({ accessToken: `t-${++fetched}`, usableUntil: now + 1_000 });
    const [a, b] = await Promise.all([cache.get('r', 'fp', fetch), cache.get('r', 'fp', fetch)]);
    assert.deepEqual([a, b, fetched], ['t-1', 't-1', 1], 'one request for both');
    now = 999;
    assert.equal(await cache.get('r', 'fp', fetch), 't-1');
    now = 1_000;
    assert.equal(await cache.get('r', 'fp', fetch), 't-2', 'expired: fetched again');
    assert.equal(await cache.get('r', 'fp-2', fetch), 't-3', 'another configuration');
    assert.equal(await cache.get('other', 'fp-2', fetch), 't-4', 'another registration');
    cache.drop('r', 't-2');
    assert.equal(await cache.get('r', 'fp-2', fetch), 't-3', 'a token no longer kept is not dropped');
    cache.drop('r', 't-3');
    assert.equal(await cache.get('r', 'fp-2', fetch), 't-5', 'dropped: fetched again');
    await assert.rejects(
      cache.get('x', 'fp', () => Promise.reject(new Error('down'))),
      /down/,
    );
    assert.equal(await cache.get('x', 'fp', fetch), 't-6', 'a failure is not kept');
  });

  it('the client assertion: iss = sub = client id, aud = token URL, a new jti, exp five minutes on; ES384 and RS384 signatures verify', () => {
    const decode = (jwt: string) =>
      jwt.split('.').map((part, i): unknown => (i < 2 ? JSON.parse(Buffer.from(part, 'base64url').toString()) : part));
    const now = Date.UTC(2026, 10, 29, 1, 0, 0);
    for (const [pair, alg, hash] of [
      [es384, 'ES384', 'sha384'],
      [rs, 'RS384', 'sha384'],
    ] as const) {
      const client = {
        clientId: 'ward-7',
        tokenUrl: 'https://auth.example/token',
        privateKey: pemOf(pair.privateKey),
        keyId: 'k-1',
      };
      const jwt = signClientAssertion(client, now);
      const [header, claims] = decode(jwt) as [Record<string, unknown>, Record<string, unknown>];
      assert.deepEqual(header, { alg, typ: 'JWT', kid: 'k-1' });
      assert.deepEqual(
        { ...claims, jti: typeof claims.jti },
        { iss: 'ward-7', sub: 'ward-7', aud: client.tokenUrl, jti: 'string', iat: now / 1000, exp: now / 1000 + 300 },
      );
      assert.ok((claims.exp as number) - (claims.iat as number) <= CLIENT_ASSERTION_LIFETIME_SECONDS);
      const [h, c, s] = jwt.split('.') as [string, string, string];
      assert.ok(
        verify(
          hash,
          Buffer.from(`${h}.${c}`),
          { key: pair.publicKey, dsaEncoding: 'ieee-p1363' },
          Buffer.from(s, 'base64url'),
        ),
        `${alg} verifies`,
      );
      const again = decode(signClientAssertion({ ...client, keyId: null }, now)) as [
        Record<string, unknown>,
        Record<string, unknown>,
      ];
      assert.notEqual(again[1].jti, claims.jti, 'a new jti each time');
      assert.equal(again[0].kid, undefined);
    }
  });

  it('the token endpoint’s answer: the token and its lifetime, or the problem in words without the body', () => {
    assert.deepEqual(readTokenAnswer(200, '{"access_token":"abc","token_type":"Bearer","expires_in":60}'), {
      accessToken: 'abc',
      expiresIn: 60,
    });
    assert.deepEqual(readTokenAnswer(200, '{"access_token":"abc","token_type":"bearer","expires_in":"60"}'), {
      accessToken: 'abc',
      expiresIn: 60,
    });
    assert.deepEqual(readTokenAnswer(200, '{"access_token":"abc"}'), { accessToken: 'abc' });
    assert.deepEqual(readTokenAnswer(401, '{"error":"invalid_client","error_description":"client secret is wrong"}'), {
      problem: 'OAuth token endpoint answered HTTP 401: invalid_client',
      errorCode: 'OAUTH_TOKEN_HTTP_401',
    });
    assert.deepEqual(readTokenAnswer(503, '<html>down</html>'), {
      problem: 'OAuth token endpoint answered HTTP 503',
      errorCode: 'OAUTH_TOKEN_HTTP_503',
    });
    assert.deepEqual(readTokenAnswer(400, `{"error":"${'x'.repeat(65)}"}`), {
      problem: 'OAuth token endpoint answered HTTP 400',
      errorCode: 'OAUTH_TOKEN_HTTP_400',
    });
    for (const body of ['{}', '{"access_token":""}', '{"access_token":"a\\r\\nb"}', 'not json', undefined])
      assert.deepEqual(readTokenAnswer(200, body), {
        problem: 'OAuth token endpoint answered HTTP 200 without an access_token',
        errorCode: 'OAUTH_TOKEN_MISSING',
      });
    assert.deepEqual(readTokenAnswer(200, '{"access_token":"abc","token_type":"DPoP"}'), {
      problem: 'OAuth token endpoint issued a token of type DPoP, not Bearer',
      errorCode: 'OAUTH_TOKEN_TYPE',
    });
  });

  it('the test endpoint names a token endpoint’s failure as such', () => {
    assert.deepEqual(describeReceiverError('OAUTH_TOKEN_HTTP_401'), {
      category: 'unreachable',
      reason: 'the OAuth token endpoint did not issue a token (OAUTH_TOKEN_HTTP_401)',
    });
    assert.equal(describeReceiverError('OAUTH_TOKEN_TIMEOUT').category, 'unreachable');
  });

  it('the upload’s checks: the method defaults by credential; keys of other types and small RSA keys are refused', () => {
    const policy = { httpsOnly: false };
    const ok = inspectOAuthClient(
      { tokenUrl: 'https://a.example/t', clientId: 'c', privateKey: pemOf(es384.privateKey) },
      policy,
    );
    assert.ok('info' in ok && ok.info.clientAuthentication === 'private_key_jwt');
    const basic = inspectOAuthClient({ tokenUrl: 'https://a.example/t', clientId: 'c', clientSecret: 's' }, policy);
    assert.ok('info' in basic && basic.info.clientAuthentication === 'client_secret_basic' && basic.credential === 's');
    const ed = generateKeyPairSync('ed25519').privateKey;
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey;
    const encrypted = es384.privateKey.export({
      type: 'pkcs8',
      format: 'pem',
      cipher: 'aes-256-cbc',
      passphrase: 'p',
    }) as string;
    for (const [pem, detail] of [
      [pemOf(ed), /RSA key \(RS384\) or an EC key/],
      [pemOf(small), /at least 2048 bits/],
      [encrypted, /must not be encrypted/],
    ] as const) {
      const refused = inspectOAuthClient({ tokenUrl: 'https://a.example/t', clientId: 'c', privateKey: pem }, policy);
      assert.ok('problems' in refused);
      assert.equal(refused.problems[0]?.pointer, '/oauth/privateKey');
      assert.match(refused.problems[0].detail, detail);
    }
  });
});

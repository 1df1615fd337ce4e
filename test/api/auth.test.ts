import assert from 'node:assert/strict';
import jwt from 'jsonwebtoken';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { createApp } from '../../api';
import { authOptionsFromConfig, type AuthOptions } from '../../api/auth/authenticate';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import {
  ecKey,
  listenLocal,
  rsaKey,
  signWith,
  startJwksServer,
  type JwksServer,
  type LocalServer,
} from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import {
  TEST_JWT_SECRET,
  expiredHsToken,
  hsToken,
  hsTokenWithKey,
  hsTokenWithoutExp,
  unsignedToken,
} from '../support/tokens';

interface Problem {
  status: number;
  title: string;
  detail: string;
}

describe('auth: bearer tokens', () => {
  let t: TestDatabase;
  let jwks: JwksServer;
  const servers: LocalServer[] = [];
  const PROJECT = 'auth-project';

  before(async () => {
    t = await createTestDatabase();
    await store.addProject(t.db, PROJECT);
    await store.addMember(t.db, PROJECT, 'alice');
    await store.insertRegistration(t.db, {
      id: '00000000-0000-4000-8000-000000000001',
      projectId: PROJECT,
      url: 'https://receiver.example/h',
      types: ['FALL_DETECTION'],
      secretSealed: 'sealed',
    });
    jwks = await startJwksServer();
  });
  after(async () => {
    for (const server of servers) await server.close();
    await jwks?.close();
    await t?.destroy();
  });

  async function serve(
    auth: AuthOptions,
  ): Promise<(token?: string, header?: string) => Promise<{ status: number; type: string; body: Problem }>> {
    const app = createApp({
      db: t.db,
      secretBox: createSecretBox(randomBytes(32)),
      logger: pino({ level: 'silent' }),
      auth,
      sendTestEvent: () => Promise.reject(new Error('not used')),
    });
    const server = await listenLocal(app.callback());
    servers.push(server);
    return async (token, header) => {
      const authorization = header ?? (token === undefined ? undefined : `Bearer ${token}`);
      const response = await fetch(`${server.url}/webhooks/project/${PROJECT}`, {
        headers: authorization ? { authorization } : {},
      });
      return {
        status: response.status,
        type: response.headers.get('content-type') ?? '',
        body: (await response.json()) as Problem,
      };
    };
  }

  function assertUnauthorized(reply: { status: number; type: string; body: Problem }) {
    assert.equal(reply.status, 401);
    assert.match(reply.type, /^application\/problem\+json/);
    assert.equal(reply.body.status, 401);
    assert.equal(reply.body.title, 'Unauthorized');
  }

  describe('JWT_SECRET mode (HS256)', () => {
    let get: Awaited<ReturnType<typeof serve>>;
    before(async () => {
      get = await serve({ mode: 'secret', secret: TEST_JWT_SECRET });
    });

    it('accepts a valid token of a member', async () => {
      assert.equal((await get(hsToken('alice'))).status, 200);
    });

    it('refuses a missing token or a malformed Authorization header', async () => {
      assertUnauthorized(await get());
      assertUnauthorized(await get(undefined, `Basic ${Buffer.from('alice:pw').toString('base64')}`));
      assertUnauthorized(await get(undefined, 'Bearer'));
      assertUnauthorized(await get('not.a.jwt'));
    });

    it('refuses a forged token (signed with another secret)', async () => {
      assertUnauthorized(await get(hsToken('alice', { secret: 'another-secret-0123456789abcdef-0123456789' })));
    });

    it('refuses a token whose payload was altered after signing', async () => {
      const [header, , signature] = hsToken('bob').split('.');
      const payload = Buffer.from(JSON.stringify({ sub: 'alice', exp: Math.floor(Date.now() / 1000) + 600 })).toString(
        'base64url',
      );
      assertUnauthorized(await get(`${header}.${payload}.${signature}`));
    });

    it('refuses an expired token', async () => {
      assertUnauthorized(await get(expiredHsToken('alice')));
    });

    it('refuses an alg: none token', async () => {
      assertUnauthorized(await get(unsignedToken('alice')));
    });

    it('refuses a token without exp, or without sub', async () => {
      assertUnauthorized(await get(hsTokenWithoutExp('alice')));
      const noSub = hsToken('', { claims: { sub: undefined } });
      assertUnauthorized(await get(noSub));
    });

    it('refuses an RS256 token, whatever key signed it', async () => {
      assertUnauthorized(await get(signWith(rsaKey('k'), 'alice')));
    });

    it('checks JWT_ISSUER and JWT_AUDIENCE when set', async () => {
      const strict = await serve({
        mode: 'secret',
        secret: TEST_JWT_SECRET,
        issuer: 'https://idp.example/',
        audience: 'webhooks',
      });
      const ok = { issuer: 'https://idp.example/', audience: 'webhooks' };
      assert.equal((await strict(hsToken('alice', ok))).status, 200);
      assertUnauthorized(await strict(hsToken('alice')));
      assertUnauthorized(await strict(hsToken('alice', { ...ok, issuer: 'https://evil.example/' })));
      assertUnauthorized(await strict(hsToken('alice', { ...ok, audience: 'other-api' })));
    });
  });

  describe('JWT_JWKS_URI mode (RS256/ES256 from a JWKS)', () => {
    let get: Awaited<ReturnType<typeof serve>>;
    before(async () => {
      get = await serve({ mode: 'jwks', jwksUri: jwks.jwksUri });
    });

    it('accepts RS256 and ES256 tokens signed by published keys, fetching the JWKS from the server', async () => {
      assert.equal((await get(jwks.sign('alice'))).status, 200);
      assert.equal((await get(jwks.sign('alice', { key: jwks.ec }))).status, 200);
      assert.ok(jwks.fetches > 0);
    });

    it('answers 403 to a valid token of a non-member (authenticated, not authorised)', async () => {
      assert.equal((await get(jwks.sign('mallory'))).status, 403);
    });

    it('refuses a token signed by an unpublished key under a published kid', async () => {
      assertUnauthorized(await get(signWith(rsaKey('x'), 'alice', { kid: jwks.rsa.kid })));
      assertUnauthorized(await get(signWith(ecKey('x'), 'alice', { kid: jwks.ec.kid })));
    });

    it('refuses a token with an unknown kid', async () => {
      assertUnauthorized(await get(signWith(jwks.rsa, 'alice', { kid: 'unknown-kid' })));
    });

    it('refuses an HS256 token signed with the public key (algorithm confusion)', async () => {
      const pem = jwks.rsa.publicKey.export({ type: 'spki', format: 'pem' });
      assertUnauthorized(await get(hsTokenWithKey('alice', pem, { kid: jwks.rsa.kid })));
      assertUnauthorized(await get(hsTokenWithKey('alice', TEST_JWT_SECRET, { kid: jwks.rsa.kid })));
    });

    it('refuses alg: none and expired tokens', async () => {
      assertUnauthorized(await get(unsignedToken('alice')));
      assertUnauthorized(await get(jwks.sign('alice', { expiresIn: -60 })));
    });

    it('checks JWT_ISSUER and JWT_AUDIENCE when set', async () => {
      const strict = await serve({
        mode: 'jwks',
        jwksUri: jwks.jwksUri,
        issuer: 'https://idp.example/',
        audience: 'webhooks',
      });
      const ok = { issuer: 'https://idp.example/', audience: 'webhooks' };
      assert.equal((await strict(jwks.sign('alice', ok))).status, 200);
      assertUnauthorized(await strict(jwks.sign('alice')));
      assertUnauthorized(await strict(jwks.sign('alice', { ...ok, audience: 'other' })));
    });

    it('accepts any of several audiences (JWT_AUDIENCE=api,temporal: the Temporal UI’s token at the codec)', async () => {
      const { audience } = authOptionsFromConfig({
        JWT_JWKS_URI: jwks.jwksUri,
        JWT_AUDIENCE: 'urn:webhooks:api, urn:webhooks:temporal',
      });
      assert.deepEqual(audience, ['urn:webhooks:api', 'urn:webhooks:temporal']);
      const either = await serve({ mode: 'jwks', jwksUri: jwks.jwksUri, audience });
      assert.equal((await either(jwks.sign('alice', { audience: 'urn:webhooks:api' }))).status, 200);
      assert.equal((await either(jwks.sign('alice', { audience: 'urn:webhooks:temporal' }))).status, 200);
      assertUnauthorized(await either(jwks.sign('alice', { audience: 'urn:webhooks' })));
      assertUnauthorized(await either(jwks.sign('alice', { audience: 'urn:webhooks:api, urn:webhooks:temporal' })));
    });

    it('refuses a token older than JWT_MAX_AGE (1 h by default) whatever its exp, and one without iat', async () => {
      const now = Math.floor(Date.now() / 1000);
      const aged = (iat: number | undefined) =>
        jwt.sign(
          { sub: 'alice', ...(iat === undefined ? { exp: now + 86_400 } : { iat, exp: iat + 86_400 }) },
          jwks.rsa.privateKey,
          {
            algorithm: jwks.rsa.alg,
            keyid: jwks.rsa.kid,
            noTimestamp: iat === undefined,
          },
        );
      assert.equal((await get(aged(now - 60))).status, 200);
      const old = await get(aged(now - 3_700));
      assertUnauthorized(old);
      assert.equal(old.body.detail, 'The bearer token is older than the 3600 s the API accepts');
      assert.equal((await get(aged(undefined))).body.detail, 'The bearer token must carry an iat claim');
      const short = await serve({ mode: 'jwks', jwksUri: jwks.jwksUri, maxAgeSeconds: 30 });
      assertUnauthorized(await short(aged(now - 60)));
      assert.equal((await short(aged(now - 5))).status, 200);
    });

    it('refuses every token when the JWKS cannot be fetched', async () => {
      const down = await serve({ mode: 'jwks', jwksUri: `${jwks.url}/missing.json` });
      assertUnauthorized(await down(jwks.sign('alice')));
    });
  });

  describe('authOptionsFromConfig', () => {
    it('picks the mode from the configuration and carries issuer and audience', () => {
      assert.deepEqual(authOptionsFromConfig({ JWT_SECRET: 's', JWT_ISSUER: 'i', JWT_AUDIENCE: 'a' }), {
        mode: 'secret',
        secret: 's',
        issuer: 'i',
        audience: 'a',
      });
      assert.deepEqual(authOptionsFromConfig({ JWT_JWKS_URI: 'https://idp.example/jwks' }), {
        mode: 'jwks',
        jwksUri: 'https://idp.example/jwks',
        issuer: undefined,
        audience: undefined,
      });
      assert.throws(() => authOptionsFromConfig({}), /JWT_SECRET or JWT_JWKS_URI/);
    });
  });
});

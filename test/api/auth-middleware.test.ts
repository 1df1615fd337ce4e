// The bearer-token middleware (api/auth/authenticate.ts) in process without a database: the claims it requires and the words of
// each refusal, how it tells a portal link's token from a member's, and who the caller is on a route.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import jwt from 'jsonwebtoken';
import Koa from 'koa';
import { authenticate, authOptionsFromConfig, callerId, type AuthOptions } from '../../api/auth/authenticate';
import { problemDetails } from '../../api/http/errors';
import { createPortalTokens, type PortalTokens } from '../../api/auth/portal-tokens';
import { captureLogger } from '../support/deliveries';
import { listenLocal, startJwksServer, type LocalServer } from '../support/jwks-server';
import { TEST_JWT_SECRET, hsToken, hsTokenWithoutExp } from '../support/tokens';

interface Reply {
  status: number;
  body: { detail?: string; user?: Record<string, unknown>; portal?: Record<string, unknown> };
}

describe('the bearer-token middleware: required claims, portal tokens, the caller', () => {
  const servers: LocalServer[] = [];
  const portal = createPortalTokens([{ id: 'p1', key: randomBytes(32) }]);
  const secretMode: AuthOptions = { mode: 'secret', secret: TEST_JWT_SECRET };
  after(async () => {
    await Promise.all(servers.map((server) => server.close()));
  });

  /** An app that authenticates and answers with what the middleware left in ctx.state. */
  async function serve(options: AuthOptions, tokens?: PortalTokens) {
    const app = new Koa();
    app.use(problemDetails(captureLogger().logger));
    app.use(authenticate(options, tokens));
    app.use((ctx) => {
      ctx.body = { user: ctx.state.user as unknown, portal: ctx.state.portal as unknown };
    });
    const server = await listenLocal(app.callback());
    servers.push(server);
    return async (authorization?: string): Promise<Reply> => {
      const response = await fetch(server.url, { headers: authorization ? { authorization } : {} });
      return { status: response.status, body: (await response.json()) as Reply['body'] };
    };
  }

  const portalToken = () =>
    portal.sign({ projectId: 'p', capabilities: ['read'], createdBy: 'alice', membership: 'm', generation: 2 }, 600)
      .token;

  it('leaves a member’s verified claims in ctx.state.user', async () => {
    const get = await serve(secretMode, portal);
    const reply = await get(`Bearer ${hsToken('alice')}`);
    assert.equal(reply.status, 200);
    assert.equal(reply.body.user?.sub, 'alice');
    assert.equal(reply.body.portal, undefined);
  });

  it('names the missing claim: exp, then a non-empty string sub', async () => {
    const get = await serve(secretMode, portal);
    const noExp = await get(`Bearer ${hsTokenWithoutExp('alice')}`);
    assert.equal(noExp.status, 401);
    assert.equal(noExp.body.detail, 'The bearer token must carry an exp claim');
    for (const sub of ['', 5, undefined]) {
      const reply = await get(`Bearer ${hsToken('x', { claims: { sub } })}`);
      assert.equal(reply.status, 401, String(sub));
      assert.equal(reply.body.detail, 'The bearer token must carry a sub claim');
    }
  });

  it('with a shared secret, neither requires iat nor bounds a token’s age', async () => {
    const get = await serve(secretMode, portal);
    const now = Math.floor(Date.now() / 1000);
    const old = jwt.sign({ sub: 'alice', iat: now - 7_200, exp: now + 600 }, TEST_JWT_SECRET, { algorithm: 'HS256' });
    assert.equal((await get(`Bearer ${old}`)).status, 200);
    const noIat = jwt.sign({ sub: 'alice', exp: now + 600 }, TEST_JWT_SECRET, {
      algorithm: 'HS256',
      noTimestamp: true,
    });
    assert.equal((await get(`Bearer ${noIat}`)).status, 200);
  });

  it('fetches an identity provider’s JWKS once for many requests', async () => {
    const jwks = await startJwksServer();
    try {
      const get = await serve({ mode: 'jwks', jwksUri: jwks.jwksUri }, portal);
      for (let i = 0; i < 3; i += 1) assert.equal((await get(`Bearer ${jwks.sign('alice')}`)).status, 200);
      assert.equal(jwks.fetches, 1);
    } finally {
      await jwks.close();
    }
  });

  it('takes a portal link’s token (any case of Bearer) into ctx.state.portal, naming no user', async () => {
    const get = await serve(secretMode, portal);
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const reply = await get(`${scheme} ${portalToken()}`);
      assert.equal(reply.status, 200, scheme);
      assert.equal(reply.body.user, undefined);
      assert.equal(reply.body.portal?.projectId, 'p');
      assert.equal(reply.body.portal?.createdBy, 'alice');
      assert.equal(reply.body.portal?.generation, 2);
    }
  });

  it('refuses a portal token in a malformed header, a forged one, and any when the app has no portal', async () => {
    const get = await serve(secretMode, portal);
    for (const header of [`xBearer ${portalToken()}`, `Bearer ${portalToken()} extra`, `Bearer  ${portalToken()}`]) {
      const reply = await get(header);
      assert.equal(reply.status, 401, header);
      assert.equal(reply.body.portal, undefined);
    }
    const forged = createPortalTokens([{ id: 'p1', key: randomBytes(32) }]).sign(
      { projectId: 'p', capabilities: ['read'], createdBy: 'alice', membership: 'm', generation: 2 },
      600,
    ).token;
    const refused = await get(`Bearer ${forged}`);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.detail, 'This portal link has expired or is not valid; ask for a new one');
    const withoutPortal = await serve(secretMode);
    assert.equal((await withoutPortal(`Bearer ${portalToken()}`)).status, 401);
  });

  it('callerId: the user’s sub; a portal token alone is refused with 403', () => {
    assert.equal(callerId({ user: { sub: 'alice', exp: 1 } }), 'alice');
    assert.equal(callerId({ user: { sub: 'alice', exp: 1 }, portal: {} }), 'alice', 'a guard let the link act');
    assert.throws(
      () => callerId({ portal: {} }),
      (error: Error & { status?: number }) =>
        error.status === 403 && error.message === 'A portal link does not give access to this route',
    );
  });

  it('authOptionsFromConfig: JWT_MAX_AGE bounds an identity provider’s tokens only', () => {
    assert.deepEqual(authOptionsFromConfig({ JWT_JWKS_URI: 'https://idp.example/jwks', JWT_MAX_AGE: 120 }), {
      mode: 'jwks',
      jwksUri: 'https://idp.example/jwks',
      maxAgeSeconds: 120,
      issuer: undefined,
      audience: undefined,
    });
    assert.deepEqual(authOptionsFromConfig({ JWT_SECRET: 's', JWT_MAX_AGE: 120 }), {
      mode: 'secret',
      secret: 's',
      issuer: undefined,
      audience: undefined,
    });
    assert.throws(
      () => authOptionsFromConfig({}),
      (error: Error) => error.message === 'JWT_SECRET or JWT_JWKS_URI is required to authenticate API callers',
    );
  });
});

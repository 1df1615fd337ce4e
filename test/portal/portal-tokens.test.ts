// Portal links' tokens (api/auth/portal-tokens.ts) and the portal page's headers (api/portal/router.ts) as units: what a
// token carries, every claim verify insists on, the derived keys, and the page's files and policies.
import assert from 'node:assert/strict';
import { hkdfSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import jwt from 'jsonwebtoken';
import Koa from 'koa';
import {
  createPortalTokens,
  isPortalToken,
  portalSigningKeys,
  PORTAL_TOKEN_TYPE,
  type PortalGrant,
} from '../../api/auth/portal-tokens';
import { portalPageRouter } from '../../api/portal/router';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { hsToken } from '../support/tokens';

const INVALID = 'This portal link has expired or is not valid; ask for a new one';
const grant: Omit<PortalGrant, 'iat' | 'exp'> = {
  projectId: 'p1',
  capabilities: ['read', 'manage'],
  createdBy: 'alice',
  membership: '2026-11-26T00:00:00.000001Z',
  generation: 4,
};

describe('portal link tokens', () => {
  const first = { id: 'k1', key: randomBytes(32) };
  const second = { id: 'k2', key: randomBytes(32) };
  const tokens = createPortalTokens([first, second]);

  /** A token signed with `key` as the portal would, with these claims replacing the grant's. */
  const signed = (claims: Record<string, unknown>, options: jwt.SignOptions = {}, key = first.key) => {
    const merged: jwt.SignOptions = {
      algorithm: 'HS256',
      keyid: 'k1',
      header: { alg: 'HS256', typ: PORTAL_TOKEN_TYPE },
      audience: 'webhook-portal',
      subject: 'alice',
      expiresIn: 600,
      ...options,
    };
    // An option given as undefined is left out of the token.
    const given = Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== undefined));
    return jwt.sign({ prj: 'p1', cap: ['read'], gen: 0, mbr: 'm', ...claims }, key, given);
  };

  it('signs with the first key: its kid, HS256, the portal’s typ and audience, and the grant as claims', () => {
    const before = Math.floor(Date.now() / 1000);
    const { token, expiresAt } = tokens.sign(grant, 600);
    const { header, payload } = jwt.decode(token, { complete: true })!;
    assert.deepEqual(header, { alg: 'HS256', typ: PORTAL_TOKEN_TYPE, kid: 'k1' });
    const claims = payload as jwt.JwtPayload;
    assert.deepEqual(
      { prj: claims.prj, cap: claims.cap, gen: claims.gen, mbr: claims.mbr, sub: claims.sub, aud: claims.aud },
      { prj: 'p1', cap: ['read', 'manage'], gen: 4, mbr: grant.membership, sub: 'alice', aud: 'webhook-portal' },
    );
    assert.ok(claims.exp! - before >= 600 && claims.exp! - before <= 601);
    assert.equal(expiresAt.getTime(), claims.exp! * 1000);
    jwt.verify(token, first.key, { algorithms: ['HS256'] });
    assert.deepEqual(tokens.verify(token), { ...grant, iat: claims.iat, exp: claims.exp });
  });

  it('makes each link a token of its own, even two alike signed in the same second', () => {
    const one = tokens.sign(grant, 600).token;
    const two = tokens.sign(grant, 600).token;
    assert.notEqual(one, two);
    const ids = [one, two].map((token) => (jwt.decode(token) as jwt.JwtPayload).jti);
    assert.ok(ids.every((id) => typeof id === 'string' && id.length >= 32));
  });

  it('verifies by kid with any key of the ring', () => {
    const underSecond = signed({}, { keyid: 'k2' }, second.key);
    assert.equal(tokens.verify(underSecond).projectId, 'p1');
  });

  it('refuses a token without a kid, with an unknown kid, another key, audience or algorithm', () => {
    const refused = [
      signed({}, { keyid: undefined }),
      signed({}, { keyid: 'k9' }),
      signed({}, { keyid: 'k2' }),
      signed({}, { audience: 'webhooks' }),
      signed({}, { algorithm: 'HS384', header: { alg: 'HS384', typ: PORTAL_TOKEN_TYPE } }),
      signed({}, { expiresIn: -10 }),
      'not-a-token',
    ];
    for (const token of refused)
      assert.throws(
        () => tokens.verify(token),
        (error: Error & { status?: number }) => error.status === 401 && error.message === INVALID,
        token,
      );
  });

  it('refuses a token missing any claim of a link, or with capabilities it does not know', () => {
    const cases: [string, string][] = [
      ['prj not a string', signed({ prj: 7 })],
      ['no sub', signed({}, { subject: undefined })],
      ['mbr missing', signed({ mbr: undefined })],
      ['gen not an integer', signed({ gen: 1.5 })],
      ['gen a string', signed({ gen: '1' })],
      ['no iat', signed({}, { noTimestamp: true })],
      ['no exp', signed({}, { expiresIn: undefined })],
      ['cap not a list', signed({ cap: 'read' })],
      ['cap empty', signed({ cap: [] })],
      ['cap unknown', signed({ cap: ['read', 'admin'] })],
    ];
    for (const [what, token] of cases) assert.throws(() => tokens.verify(token), { message: INVALID }, what);
    assert.deepEqual(tokens.verify(signed({ cap: ['manage', 'read'], gen: 0 })).capabilities, ['manage', 'read']);
  });

  it('refuses to be made without a key', () => {
    assert.throws(() => createPortalTokens([]), { message: 'the portal signing key ring is empty' });
  });

  it('tells a portal token from others by its typ alone', () => {
    assert.equal(isPortalToken(tokens.sign(grant, 60).token), true);
    assert.equal(isPortalToken(hsToken('alice')), false);
    assert.equal(isPortalToken(signed({}, { header: { alg: 'HS256', typ: 'JWT' } })), false);
    assert.equal(isPortalToken('garbage'), false);
  });

  it('derives the signing keys from the at-rest ring by HKDF-SHA256 for this purpose, keeping the ids', () => {
    const derived = portalSigningKeys([first, second]);
    assert.deepEqual(
      derived.map(({ id }) => id),
      ['k1', 'k2'],
    );
    const expected = Buffer.from(
      hkdfSync('sha256', first.key, Buffer.alloc(0), 'webhook-service portal link signing v1', 32),
    );
    assert.ok(derived[0]!.key.equals(expected));
    assert.equal(derived[0]!.key.length, 32);
    assert.ok(!derived[0]!.key.equals(first.key));
    assert.ok(!derived[0]!.key.equals(derived[1]!.key));
  });
});

describe('the portal page’s files and headers', () => {
  const servers: LocalServer[] = [];
  after(async () => {
    await Promise.all(servers.map((server) => server.close()));
  });
  const serve = async (options?: Parameters<typeof portalPageRouter>[0]) => {
    const app = new Koa();
    app.use(portalPageRouter(options).routes());
    const server = await listenLocal(app.callback());
    servers.push(server);
    return server.url;
  };

  it('serves each file with its type, no caching surprises, no sniffing, no referrer', async () => {
    const url = await serve();
    const files: [string, string, string][] = [
      ['/portal', 'index.html', 'text/html; charset=utf-8'],
      ['/portal/portal.js', 'portal.js', 'text/javascript; charset=utf-8'],
      ['/portal/portal.css', 'portal.css', 'text/css; charset=utf-8'],
    ];
    for (const [path, file, type] of files) {
      const response = await fetch(`${url}${path}`);
      assert.equal(response.status, 200, path);
      assert.equal(response.headers.get('content-type'), type, path);
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(response.headers.get('cache-control'), 'no-cache');
      assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
      assert.equal(await response.text(), readFileSync(`portal/${file}`, 'utf8'), path);
    }
    assert.equal((await fetch(`${url}/portal/other.js`)).status, 404);
  });

  it('lets no page embed it by default or with an empty list, and the listed origins otherwise', async () => {
    for (const [options, ancestors] of [
      [undefined, "'none'"],
      [{}, "'none'"],
      [{ frameAncestors: [] }, "'none'"],
      [{ frameAncestors: ['https://a.example', 'https://b.example'] }, 'https://a.example https://b.example'],
    ] as const) {
      const url = await serve(options as Parameters<typeof portalPageRouter>[0]);
      const csp = (await fetch(`${url}/portal`)).headers.get('content-security-policy');
      assert.equal(
        csp,
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
          `base-uri 'none'; form-action 'none'; frame-ancestors ${ancestors}`,
      );
    }
  });
});

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import jwt from 'jsonwebtoken';
import pino from 'pino';
import { createApp, type AppDeps } from '../../api';
import { createPortalTokens, portalSigningKeys, PORTAL_TOKEN_TYPE } from '../../api/auth/portal-tokens';
import { loadConfig } from '../../common/config';
import { WEBHOOK_TYPES } from '../../common/contract';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { newProjectId } from '../support/deliveries';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

describe('portal links: made by members, scoped to one project and its capabilities, revocable', () => {
  let t: TestDatabase;
  let api: LocalServer;
  const ring = [{ id: 'k1', key: randomBytes(32) }];
  const tokens = createPortalTokens(portalSigningKeys(ring));
  let tested = 0;

  before(async () => {
    t = await createTestDatabase();
    const deps: AppDeps = {
      db: t.db,
      secretBox: createSecretBox(ring[0]!.key),
      logger: pino({ level: 'silent' }),
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => {
        tested += 1;
        return Promise.resolve({ delivered: true, statusCode: 200, durationMs: 4, workflowId: 'wf-test' });
      },
      portal: { tokens, publicBaseUrl: 'https://hooks.example.com/', frameAncestors: ['https://app.example.com'] },
    };
    api = await listenLocal(createApp(deps).callback());
  });
  after(async () => {
    await api?.close();
    await t?.destroy();
  });

  async function call(method: string, path: string, token?: string, body?: unknown): Promise<Reply> {
    const headers: Record<string, string> = { ...(token && bearer(token)) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(api.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return {
      status: response.status,
      body: (text && /json/.test(response.headers.get('content-type') ?? '') ? JSON.parse(text) : {}) as Reply['body'],
      headers: response.headers,
    };
  }

  /** A project with alice as member and a registered webhook. */
  async function project(): Promise<string> {
    const id = newProjectId();
    await store.addProject(t.db, id);
    await store.addMember(t.db, id, 'alice');
    await store.createRegistration(t.db, createSecretBox(ring[0]!.key), {
      projectId: id,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    return id;
  }

  async function link(projectId: string, body: unknown = {}): Promise<string> {
    const made = await call('POST', `/webhooks/project/${projectId}/portal-sessions`, hsToken('alice'), body);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    return String(made.body.token);
  }

  it('answers 201 with a fragment URL under PUBLIC_BASE_URL, the token and its expiry; 400, 401, 403 otherwise', async () => {
    const p = await project();
    const before = Date.now();
    const made = await call('POST', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'), {
      expiresInSeconds: 600,
      capabilities: ['read'],
    });
    assert.equal(made.status, 201);
    assert.deepEqual(Object.keys(made.body).sort(), ['expiresAt', 'token', 'url']);
    assert.equal(made.body.url, `https://hooks.example.com/portal#token=${String(made.body.token)}`);
    const expiresAt = Date.parse(String(made.body.expiresAt));
    assert.ok(Math.abs(expiresAt - (before + 600_000)) < 5_000, String(made.body.expiresAt));
    const claims = jwt.decode(String(made.body.token), { complete: true })!;
    assert.equal(claims.header.typ, PORTAL_TOKEN_TYPE);
    assert.deepEqual((claims.payload as jwt.JwtPayload).cap, ['read']);
    assert.equal((claims.payload as jwt.JwtPayload).prj, p);

    const defaults = jwt.decode(await link(p)) as jwt.JwtPayload;
    assert.deepEqual(defaults.cap, ['read', 'manage']);
    assert.equal(defaults.exp! - defaults.iat!, 3600);

    for (const body of [{ expiresInSeconds: 59 }, { expiresInSeconds: 604_801 }, { capabilities: ['manage'] }]) {
      const refused = await call('POST', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'), body);
      assert.equal(refused.status, 400, JSON.stringify(body));
      assert.match(String(refused.body.detail), /^The request body is invalid: \/(expiresInSeconds|capabilities)/);
    }
    const anonymous = await call('POST', `/webhooks/project/${p}/portal-sessions`);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.detail, 'A valid bearer token is required');
    const stranger = await call('POST', `/webhooks/project/${p}/portal-sessions`, hsToken('mallory'));
    assert.equal(stranger.status, 403);
    assert.equal(stranger.body.detail, 'The caller is not a member of this project');
    assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`, hsToken('mallory'))).status, 403);
    assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`)).status, 401);
  });

  it('a manage link cannot carry the custom headers to another origin: 400 naming them, nothing stored', async () => {
    const p = await project();
    const box = createSecretBox(ring[0]!.key);
    await store.updateRegistration(
      t.db,
      p,
      {},
      {
        headers: { secretBox: box, values: { 'X-Api-Key': 'k-secret-123' } },
      },
    );
    const before = await store.findRegistration(t.db, p);
    const manage = await link(p);
    const moved = await call('PATCH', '/webhooks', manage, { projectId: p, url: 'https://attacker.example/hook' });
    assert.equal(moved.status, 400, JSON.stringify(moved.body));
    assert.match(String(moved.body.detail), /^The request body is invalid: \/headers must be given again/);
    assert.deepEqual(await store.findRegistration(t.db, p), before, 'nothing stored');
    // As the portal sends it with its box ticked: the headers go with the old origin.
    const dropped = await call('PATCH', '/webhooks', manage, {
      projectId: p,
      url: 'https://attacker.example/hook',
      types: ['FALL_DETECTION'],
      headers: {},
      clientCertificate: null,
    });
    assert.equal(dropped.status, 200, JSON.stringify(dropped.body));
    assert.deepEqual(dropped.body.headerNames, []);
    // The portal saves the whole form: the same again changes nothing, and writes nothing.
    const trail = await t.db('audit_events').where({ project_id: p }).count<{ count: string }[]>('* as count');
    const again = await call('PATCH', '/webhooks', manage, {
      projectId: p,
      url: 'https://attacker.example/hook',
      types: ['FALL_DETECTION'],
      headers: {},
      clientCertificate: null,
    });
    assert.equal(again.status, 200);
    assert.equal(again.body.updatedAt, dropped.body.updatedAt, 'no update');
    assert.deepEqual(
      await t.db('audit_events').where({ project_id: p }).count<{ count: string }[]>('* as count'),
      trail,
      'no audit row',
    );
  });

  it('a manage link lives a day at most (the default capabilities manage), a read-only link a week', async () => {
    const p = await project();
    const day = jwt.decode(await link(p, { expiresInSeconds: 86_400 })) as jwt.JwtPayload;
    assert.equal(day.exp! - day.iat!, 86_400);
    const week = jwt.decode(await link(p, { expiresInSeconds: 604_800, capabilities: ['read'] })) as jwt.JwtPayload;
    assert.equal(week.exp! - week.iat!, 604_800);
    for (const body of [
      { expiresInSeconds: 86_401 },
      { expiresInSeconds: 604_800, capabilities: ['read', 'manage'] },
      { expiresInSeconds: 86_401, capabilities: ['manage', 'read'] },
    ]) {
      const refused = await call('POST', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'), body);
      assert.equal(refused.status, 400, JSON.stringify(body));
      assert.equal(refused.body.detail, 'The request body is invalid: /expiresInSeconds must be <= 86400');
    }
  });

  it('a read-only link sees the receiver URL’s origin only; a manage link and members the whole URL', async () => {
    const p = await project();
    await call('PATCH', '/webhooks', hsToken('alice'), {
      projectId: p,
      url: 'https://receiver.example:8443/hooks/s3cr3t-path?key=capability',
    });
    const read = await call('GET', `/webhooks/project/${p}`, await link(p, { capabilities: ['read'] }));
    assert.equal(read.status, 200);
    assert.equal(read.body.url, 'https://receiver.example:8443');
    for (const token of [await link(p), hsToken('alice')]) {
      const whole = await call('GET', `/webhooks/project/${p}`, token);
      assert.equal(whole.body.url, 'https://receiver.example:8443/hooks/s3cr3t-path?key=capability');
    }
  });

  it('takes the capabilities in either order, written read first in the token; refuses duplicates and manage alone', async () => {
    const p = await project();
    const reversed = await link(p, { capabilities: ['manage', 'read'] });
    assert.deepEqual((jwt.decode(reversed) as jwt.JwtPayload).cap, ['read', 'manage']);
    const rotated = await call('POST', `/webhooks/project/${p}/secret/rotate`, reversed, { overlapSeconds: 60 });
    assert.equal(rotated.status, 200, 'it manages');
    for (const capabilities of [['read', 'read'], ['manage', 'read', 'manage'], ['manage'], [], ['read', 'admin']]) {
      const refused = await call('POST', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'), { capabilities });
      assert.equal(refused.status, 400, JSON.stringify(capabilities));
      assert.equal(
        refused.body.detail,
        'The request body is invalid: /capabilities must be equal to one of the allowed values',
      );
    }
  });

  it('a manage link reads and acts on its project; a read link reads and is refused every action', async () => {
    const p = await project();
    const manage = await link(p);
    const read = await link(p, { capabilities: ['read'] });
    for (const token of [manage, read]) {
      assert.equal((await call('GET', `/webhooks/project/${p}`, token)).status, 200);
      assert.equal((await call('GET', `/webhooks/project/${p}/deliveries`, token)).status, 200);
      assert.equal((await call('GET', `/webhooks/project/${p}/health`, token)).status, 200);
      assert.equal((await call('GET', `/webhooks/project/${p}/deliveries/no-such`, token)).status, 404);
    }
    const actions: [string, string, unknown?][] = [
      ['POST', `/webhooks/test/project/${p}`],
      ['POST', `/webhooks/project/${p}/secret/rotate`, { overlapSeconds: 60 }],
      ['POST', `/webhooks/project/${p}/signing-key/rotate`, { overlapSeconds: 60 }],
      ['PATCH', '/webhooks', { projectId: p, types: ['VITAL_THRESHOLD'] }],
      ['PATCH', '/webhooks', { projectId: p, signatureScheme: 'v1a' }],
      ['POST', `/webhooks/project/${p}/deliveries/recover`, { since: new Date(0).toISOString() }],
      ['POST', `/webhooks/project/${p}/deliveries/some-id/redeliver`],
    ];
    const testedBefore = tested;
    for (const [method, path, body] of actions) {
      const refused = await call(method, path, read, body);
      assert.equal(refused.status, 403, `${method} ${path}`);
      assert.equal(refused.body.detail, 'This portal link does not allow manage: it is read-only');
    }
    assert.equal(tested, testedBefore, 'no test event was sent for the read link');
    const registration = (await call('GET', `/webhooks/project/${p}`, read)).body;
    assert.deepEqual(registration.types, ['FALL_DETECTION'], 'nothing changed');

    assert.equal((await call('POST', `/webhooks/test/project/${p}`, manage)).status, 200);
    assert.equal(tested, testedBefore + 1);
    const rotated = await call('POST', `/webhooks/project/${p}/secret/rotate`, manage, { overlapSeconds: 60 });
    assert.equal(rotated.status, 200);
    assert.match(String(rotated.body.secret), /^whsec_/);
    const updated = await call('PATCH', '/webhooks', manage, { projectId: p, types: ['VITAL_THRESHOLD'] });
    assert.equal(updated.status, 200);
    assert.deepEqual(updated.body.types, ['VITAL_THRESHOLD']);
    // No redelivery starter in this app: the guard let the request through to the handler, which answers 503.
    const recover = await call('POST', `/webhooks/project/${p}/deliveries/recover`, manage, {
      since: '2026-01-01T00:00:00Z',
    });
    assert.equal(recover.status, 503);
  });

  it('a link works on its own project only, and never on the members-only routes', async () => {
    const p = await project();
    const other = await project();
    const token = await link(p);
    for (const path of [`/webhooks/project/${other}`, `/webhooks/project/${other}/deliveries`]) {
      const refused = await call('GET', path, token);
      assert.equal(refused.status, 403, path);
      assert.equal(refused.body.detail, 'This portal link is for another project');
    }
    const patch = await call('PATCH', '/webhooks', token, { projectId: other, types: ['VITAL_THRESHOLD'] });
    assert.equal(patch.status, 403);
    const membersOnly: [string, string, unknown?][] = [
      ['DELETE', `/webhooks/project/${p}`],
      ['POST', '/webhooks/register', { projectId: p, url: 'https://x.example/h', types: ['FALL_DETECTION'] }],
      ['POST', `/webhooks/project/${p}/portal-sessions`],
      ['DELETE', `/webhooks/project/${p}/portal-sessions`],
    ];
    for (const [method, path, body] of membersOnly) {
      const refused = await call(method, path, token, body);
      assert.equal(refused.status, 403, `${method} ${path}`);
      assert.equal(refused.body.detail, 'A portal link does not give access to this route');
    }
    assert.equal((await call('GET', `/webhooks/project/${p}`, hsToken('alice'))).status, 200, 'not deleted');
  });

  it('a link on a request naming a malformed project, or none, is answered 400 naming the field, as a member is', async () => {
    const token = await link(await project());
    const nul = await call('GET', '/webhooks/project/%00/deliveries', token);
    assert.equal(nul.status, 400);
    assert.match(String(nul.body.detail), /^The path parameter projectId must be 1 to \d+ characters/);
    const unnamed = await call('PATCH', '/webhooks', token, { types: ['VITAL_THRESHOLD'] });
    assert.equal(unnamed.status, 400);
    assert.equal(
      unnamed.body.detail,
      "The request body is invalid: /projectId must have required property 'projectId'",
    );
    const malformed = await call('PATCH', '/webhooks', token, { projectId: 'no spaces', types: ['VITAL_THRESHOLD'] });
    assert.equal(malformed.status, 400);
    assert.match(
      String(malformed.body.detail),
      /^The request body is invalid: \/projectId must be 1 to \d+ characters/,
    );
  });

  it('revoking ends every earlier link of the project with 401; later links work; a member who leaves ends theirs', async () => {
    const p = await project();
    const other = await project();
    const [first, second, otherLink] = [await link(p), await link(p, { capabilities: ['read'] }), await link(other)];
    const revoked = await call('DELETE', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'));
    assert.equal(revoked.status, 204);
    for (const token of [first, second]) {
      const refused = await call('GET', `/webhooks/project/${p}/deliveries`, token);
      assert.equal(refused.status, 401);
      assert.equal(refused.body.detail, 'This portal link has expired or is not valid; ask for a new one');
    }
    assert.equal(
      (await call('GET', `/webhooks/project/${other}`, otherLink)).status,
      200,
      'other projects keep theirs',
    );
    const fresh = await link(p);
    assert.equal((await call('GET', `/webhooks/project/${p}`, fresh)).status, 200);

    await store.removeMember(t.db, p, 'alice');
    const left = await call('GET', `/webhooks/project/${p}`, fresh);
    assert.equal(left.status, 401);
    assert.equal(left.body.detail, 'This portal link has expired or is not valid; ask for a new one');
    // Added again, alice is another membership: her earlier link stays dead, a new one works.
    await store.addMember(t.db, p, 'alice');
    assert.equal((await call('GET', `/webhooks/project/${p}`, fresh)).status, 401, 'not revived by re-adding');
    assert.equal((await call('GET', `/webhooks/project/${p}`, await link(p))).status, 200);
  });

  it('a revoked manage link is refused by the guard on every manage route, before the handler reads anything', async () => {
    const p = await project();
    const manage = await link(p);
    assert.equal((await call('DELETE', `/webhooks/project/${p}/portal-sessions`, hsToken('alice'))).status, 204);
    const actions: [string, string, unknown?][] = [
      ['POST', `/webhooks/test/project/${p}`],
      ['POST', `/webhooks/project/${p}/secret/rotate`, { overlapSeconds: -1 }],
      ['PATCH', '/webhooks', { projectId: p, types: ['NO_SUCH_TYPE'] }],
      ['POST', `/webhooks/project/${p}/deliveries/recover`, { since: 'not a time' }],
      ['POST', `/webhooks/project/${p}/deliveries/no-such-id/redeliver`],
    ];
    for (const [method, path, body] of actions) {
      const refused = await call(method, path, manage, body);
      assert.equal(refused.status, 401, `${method} ${path}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.detail, 'This portal link has expired or is not valid; ask for a new one');
    }
  });

  it('a test already past the guard when its link is revoked stops before it sends', async () => {
    const p = await project();
    const manage = await link(p);
    // The TEST slot's admission (after the guard, before the send) revokes the project's links, in its transaction.
    await t.db.raw(`
      CREATE FUNCTION revoke_on_admission() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN UPDATE projects SET portal_link_generation = portal_link_generation + 1 WHERE id = NEW.project_id;
      RETURN NEW; END $$;
      CREATE TRIGGER revoke_on_admission AFTER UPDATE ON webhook_send_limits
        FOR EACH ROW EXECUTE FUNCTION revoke_on_admission();`);
    const testedBefore = tested;
    try {
      const refused = await call('POST', `/webhooks/test/project/${p}`, manage);
      assert.equal(refused.status, 401, JSON.stringify(refused.body));
      assert.equal(tested, testedBefore, 'nothing sent');
    } finally {
      await t.db.raw('DROP TRIGGER revoke_on_admission ON webhook_send_limits; DROP FUNCTION revoke_on_admission()');
    }
    const member = await call('POST', `/webhooks/test/project/${p}`, hsToken('alice'));
    assert.equal(member.status, 200, 'the slot was freed');
  });

  it('a recovery already past the guard when its link is revoked starts nothing more', async () => {
    const p = await project();
    for (let i = 0; i < 3; i += 1) {
      const id = `webhook-event-${p}-${i}`;
      await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    }
    const started: string[] = [];
    const withRedelivery = await listenLocal(
      createApp({
        db: t.db,
        secretBox: createSecretBox(ring[0]!.key),
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: TEST_JWT_SECRET },
        sendTestEvent: () => Promise.reject(new Error('unused')),
        portal: { tokens },
        // The first start revokes the project's links: the recovery is past its guard by then.
        redelivery: async (delivery) => {
          started.push(delivery.id);
          await store.revokePortalLinks(t.db, p);
          return `webhook-redelivery-${started.length}`;
        },
      }).callback(),
    );
    try {
      const manage = await link(p);
      const refused = await fetch(`${withRedelivery.url}/webhooks/project/${p}/deliveries/recover`, {
        method: 'POST',
        headers: { ...bearer(manage), 'content-type': 'application/json' },
        body: JSON.stringify({ since: new Date(0).toISOString() }),
      });
      assert.equal(refused.status, 401, await refused.text());
      assert.equal(started.length, 1, 'one start before the revocation, none after');
      const failed = await store.listDeliveries(t.db, p, { status: 'failed', limit: 10 });
      assert.equal(failed.length, 2, 'the rest stay failed, for a later recovery');
    } finally {
      await withRedelivery.close();
    }
  });

  it('refuses expired, forged and re-signed tokens with 401', async () => {
    const p = await project();
    const path = `/webhooks/project/${p}`;
    const expired = jwt.sign(
      { prj: p, cap: ['read'], gen: 0, exp: Math.floor(Date.now() / 1000) - 1 },
      portalSigningKeys(ring)[0]!.key,
      {
        algorithm: 'HS256',
        keyid: 'k1',
        header: { alg: 'HS256', typ: PORTAL_TOKEN_TYPE },
        audience: 'webhook-portal',
        subject: 'alice',
      },
    );
    const otherKey = createPortalTokens(portalSigningKeys([{ id: 'k1', key: randomBytes(32) }])).sign(
      { projectId: p, capabilities: ['read', 'manage'], createdBy: 'alice', membership: '', generation: 0 },
      600,
    ).token;
    // The at-rest key itself (not the derived one) does not sign portal links either.
    const rawKey = jwt.sign({ prj: p, cap: ['read'], gen: 0 }, ring[0]!.key, {
      algorithm: 'HS256',
      keyid: 'k1',
      header: { alg: 'HS256', typ: PORTAL_TOKEN_TYPE },
      audience: 'webhook-portal',
      subject: 'alice',
      expiresIn: 600,
    });
    const valid = await link(p);
    const [head, body] = valid.split('.');
    const claims = JSON.parse(Buffer.from(body!, 'base64url').toString()) as Record<string, unknown>;
    const tampered = [
      head,
      Buffer.from(JSON.stringify({ ...claims, cap: ['read', 'manage'], prj: 'x' })).toString('base64url'),
      valid.split('.')[2],
    ].join('.');
    const memberSecret = hsToken('alice', { claims: { prj: p, cap: ['read', 'manage'], gen: 0 } });
    const forgedTyp = jwt.sign({ sub: 'alice', prj: p, cap: ['read', 'manage'], gen: 0 }, TEST_JWT_SECRET, {
      algorithm: 'HS256',
      header: { alg: 'HS256', typ: PORTAL_TOKEN_TYPE, kid: 'k1' },
      expiresIn: 600,
      audience: 'webhook-portal',
    });
    // Signed right, but made before links were bound to a membership (no mbr claim): refused, to be made again.
    const unbound = jwt.sign({ prj: p, cap: ['read'], gen: 0 }, portalSigningKeys(ring)[0]!.key, {
      algorithm: 'HS256',
      keyid: 'k1',
      header: { alg: 'HS256', typ: PORTAL_TOKEN_TYPE },
      audience: 'webhook-portal',
      subject: 'alice',
      expiresIn: 600,
    });
    for (const token of [expired, otherKey, rawKey, tampered, forgedTyp, unbound]) {
      const refused = await call('GET', path, token);
      assert.equal(refused.status, 401, token);
      assert.equal(refused.body.detail, 'This portal link has expired or is not valid; ask for a new one');
    }
    // A member token carrying the same claims is a member token: alice is a member, so it reads.
    assert.equal((await call('GET', path, memberSecret)).status, 200);
  });

  it('links signed under a key of the ring still verify after the ring rotates', () => {
    const old = { id: 'k1', key: randomBytes(32) };
    const next = { id: 'k2', key: randomBytes(32) };
    const made = createPortalTokens(portalSigningKeys([old])).sign(
      {
        projectId: 'p',
        capabilities: ['read'],
        createdBy: 'alice',
        membership: '2026-11-26T00:00:00.000001Z',
        generation: 3,
      },
      60,
    );
    const grant = createPortalTokens(portalSigningKeys([next, old])).verify(made.token);
    assert.deepEqual(
      [grant.projectId, grant.capabilities, grant.createdBy, grant.membership, grant.generation],
      ['p', ['read'], 'alice', '2026-11-26T00:00:00.000001Z', 3],
    );
    assert.throws(() => createPortalTokens(portalSigningKeys([next])).verify(made.token), /expired or is not valid/);
  });

  it('serves the page without a token, under a strict Content-Security-Policy and PORTAL_FRAME_ANCESTORS', async () => {
    for (const path of ['/portal', '/portal/portal.js', '/portal/portal.css']) {
      const page = await call('GET', path);
      assert.equal(page.status, 200, path);
      const csp = page.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
      assert.match(csp, /frame-ancestors https:\/\/app\.example\.com(;|$)/);
      // Every directive pinned: the page talks to its own origin only (no `https:` source anywhere).
      assert.equal(
        csp,
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
          "base-uri 'none'; form-action 'none'; frame-ancestors https://app.example.com",
      );
      assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    }
    const html = await (await fetch(`${api.url}/portal`)).text();
    assert.doesNotMatch(
      html,
      /<script>|<script [^>]*src="https?:|<link [^>]*href="https?:|style=/,
      'no inline or remote code',
    );
    const bare = await listenLocal(
      createApp({
        db: t.db,
        secretBox: createSecretBox(randomBytes(32)),
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: TEST_JWT_SECRET },
        sendTestEvent: () => Promise.reject(new Error('unused')),
      }).callback(),
    );
    try {
      const page = await fetch(`${bare.url}/portal`);
      assert.match(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
      // Without PUBLIC_BASE_URL (development only) the link points at this server on loopback, whatever the Host.
      const p = await project();
      const made = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = httpRequest(`${bare.url}/webhooks/project/${p}/portal-sessions`, {
          method: 'POST',
          headers: { ...bearer(hsToken('alice')), host: 'evil.example', 'x-forwarded-host': 'evil.example' },
        });
        request.once('error', reject).once('response', (response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
          response.once('end', () => resolve({ status: response.statusCode ?? 0, body }));
        });
        request.end();
      });
      assert.equal(made.status, 201, made.body);
      const port = new URL(bare.url).port;
      assert.match(
        (JSON.parse(made.body) as { url: string }).url,
        new RegExp(`^http://127\\.0\\.0\\.1:${port}/portal#token=ey`),
      );
    } finally {
      await bare.close();
    }
  });

  it('serves a page that names no event type: it reads them from the API’s OpenAPI document', async () => {
    const script = await (await fetch(`${api.url}/portal/portal.js`)).text();
    for (const type of WEBHOOK_TYPES) assert.doesNotMatch(script, new RegExp(`\\b${type}\\b`), type);
    assert.match(script, /fetch\('\/openapi\.json'\)/);
  });

  it('reads PUBLIC_BASE_URL and PORTAL_FRAME_ANCESTORS from the environment, refusing malformed ones', () => {
    const config = loadConfig({
      PUBLIC_BASE_URL: 'https://hooks.example.com',
      PORTAL_FRAME_ANCESTORS: 'https://a.example,https://b.example',
    });
    assert.equal(config.PUBLIC_BASE_URL, 'https://hooks.example.com');
    assert.equal(config.PORTAL_FRAME_ANCESTORS, 'https://a.example,https://b.example');
    assert.throws(() => loadConfig({ PUBLIC_BASE_URL: 'hooks.example.com' }), /PUBLIC_BASE_URL must match/);
    assert.throws(
      () => loadConfig({ PORTAL_FRAME_ANCESTORS: "https://a.example; script-src 'unsafe-inline'" }),
      /PORTAL_FRAME_ANCESTORS must match/,
    );
  });

  it('drops every trailing slash of PUBLIC_BASE_URL from the link', async () => {
    const slashes = await listenLocal(
      createApp({
        db: t.db,
        secretBox: createSecretBox(ring[0]!.key),
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: TEST_JWT_SECRET },
        sendTestEvent: () => Promise.reject(new Error('unused')),
        portal: { tokens, publicBaseUrl: 'https://hooks.example.com/base//' },
      }).callback(),
    );
    try {
      const p = await project();
      const made = await fetch(`${slashes.url}/webhooks/project/${p}/portal-sessions`, {
        method: 'POST',
        headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(made.status, 201);
      const { url, token } = (await made.json()) as { url: string; token: string };
      assert.equal(url, `https://hooks.example.com/base/portal#token=${token}`);
    } finally {
      await slashes.close();
    }
  });
});

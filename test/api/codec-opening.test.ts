// The codec endpoint's development opening (DEV_CODEC_WITHOUT_TOKEN, api/codec/router.ts) as a pure unit: which
// requests it lets through without a token, built from the configuration as `startApi` builds it.
import assert from 'node:assert/strict';
import type { Context, Middleware } from 'koa';
import { loadConfig } from '../../common/config';
import { EncryptionCodec, generatePayloadKey, parsePayloadKeyRing } from '../../common/crypto/payload-codec';
import { codecAccessFromConfig, codecAuthentication } from '../../api/codec/router';

interface Request {
  path?: string;
  remoteAddress?: string;
  headers?: Record<string, string>;
}

/** 'open' when the opening let the request through without a token, 'token' when it went to authentication. */
async function through(env: NodeJS.ProcessEnv, request: Request = {}): Promise<'open' | 'token'> {
  const codec = new EncryptionCodec(parsePayloadKeyRing(generatePayloadKey()));
  let outcome: 'open' | 'token' | undefined;
  const authenticate: Middleware = () => {
    outcome = 'token';
    return Promise.resolve();
  };
  const middleware = codecAuthentication({ codec, ...codecAccessFromConfig(loadConfig(env)) }, authenticate);
  const headers = { host: 'localhost:3000', ...request.headers };
  const ctx = {
    path: request.path ?? '/codec/decode',
    get: (name: string) => headers[name.toLowerCase() as keyof typeof headers] ?? '',
    req: { headers, socket: { remoteAddress: request.remoteAddress ?? '127.0.0.1' } },
    state: {} as Record<string, unknown>,
  };
  await middleware(ctx as unknown as Context, () => {
    outcome = ctx.state.localCodecCaller === true ? 'open' : 'token';
    return Promise.resolve();
  });
  return outcome!;
}

const OPEN = { DEV_CODEC_WITHOUT_TOKEN: 'true' };

describe('the codec endpoint’s development opening (DEV_CODEC_WITHOUT_TOKEN)', () => {
  it('opens /codec/decode to a loopback caller asking for a loopback host', async () => {
    assert.equal(await through(OPEN), 'open');
    for (const remoteAddress of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1'])
      assert.equal(await through(OPEN, { remoteAddress }), 'open', remoteAddress);
    for (const host of ['127.0.0.1:3000', '[::1]:3000', 'LOCALHOST'])
      assert.equal(await through(OPEN, { headers: { host } }), 'open', host);
  });

  it('is closed unless the configuration sets it, and outside development', async () => {
    assert.equal(await through({}), 'token');
    assert.equal(await through({ DEV_CODEC_WITHOUT_TOKEN: 'false' }), 'token');
    const built = { OPERATOR_SUBJECTS: 'ops', CODEC_CORS_ORIGINS: undefined, OPERATOR_ROLE: undefined };
    assert.equal(
      codecAccessFromConfig({ ...built, NODE_ENV: 'test', DEV_CODEC_WITHOUT_TOKEN: true }).localCallersWithoutToken,
      false,
      'a config built without loadConfig is held to the same rule',
    );
  });

  it('asks a token of a remote peer whose address merely contains a loopback one', async () => {
    for (const remoteAddress of ['2001:db8::1', '10.0.0.1', '::ffff:10.127.0.0', 'fe80::1', '203.0.113.127'])
      assert.equal(await through(OPEN, { remoteAddress }), 'token', remoteAddress);
    for (const host of ['evil.example', 'localhost.evil.example', '127.0.0.1.evil.example:3000'])
      assert.equal(await through(OPEN, { headers: { host } }), 'token', host);
  });

  it('asks a token of a request that came through a proxy (any Forwarded or X-Forwarded-* header)', async () => {
    for (const header of ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'via', 'x-real-ip'])
      assert.equal(await through(OPEN, { headers: { [header]: '203.0.113.7' } }), 'token', header);
  });

  it('never opens /codec/encode: encryption with the payload key always needs an operator’s token', async () => {
    assert.equal(await through(OPEN, { path: '/codec/encode' }), 'token');
  });

  it('from a browser, opens to the allowed origins only (CODEC_CORS_ORIGINS)', async () => {
    const withUi = { ...OPEN, CODEC_CORS_ORIGINS: 'http://localhost:8080' };
    assert.equal(await through(withUi, { headers: { origin: 'http://localhost:8080' } }), 'open');
    for (const origin of ['http://evil.example', 'http://localhost:8081'])
      assert.equal(await through(withUi, { headers: { origin } }), 'token', origin);
  });
});

import assert from 'node:assert/strict';
import { loadConfig } from '../../common/config';
import { temporalConnectionOptions } from '../../common/temporal/connection';
import {
  fetchClientCredentialsToken,
  renewalDelayMs,
  retryDelayMs,
  startTokenRefresher,
  type AccessToken,
  type TokenSettings,
} from '../../common/temporal/token';

const SETTINGS: TokenSettings = {
  TEMPORAL_OAUTH_TOKEN_URL: 'https://idp.test/token',
  TEMPORAL_OAUTH_CLIENT_ID: 'webhooks worker',
  TEMPORAL_OAUTH_CLIENT_SECRET: 's3cr:t',
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A token endpoint that records each request and answers `reply`. */
function tokenEndpoint(reply: (call: number) => { status: number; body: unknown }) {
  const requests: { url: string; init: RequestInit }[] = [];
  const fetchImpl = ((url: string, init: RequestInit) => {
    requests.push({ url, init });
    const { status, body } = reply(requests.length);
    return Promise.resolve(
      new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } }),
    );
  }) as unknown as typeof fetch;
  return { requests, fetchImpl };
}

describe('Temporal access tokens by client credentials', () => {
  it('asks the token endpoint with client_secret_basic and the configured scope, resource and audience', async () => {
    const endpoint = tokenEndpoint(() => ({
      status: 200,
      body: { access_token: 'eyJ.token', expires_in: 60, token_type: 'Bearer' },
    }));
    const token = await fetchClientCredentialsToken(
      {
        ...SETTINGS,
        TEMPORAL_OAUTH_SCOPE: 'temporal',
        TEMPORAL_OAUTH_RESOURCE: 'urn:temporal',
        TEMPORAL_OAUTH_AUDIENCE: 'temporal-api',
      },
      endpoint.fetchImpl,
    );
    assert.deepEqual(token, { value: 'eyJ.token', lifetimeMs: 60_000 });
    const [request] = endpoint.requests;
    assert.equal(request!.url, 'https://idp.test/token');
    assert.equal(request!.init.method, 'POST');
    const headers = request!.init.headers as Record<string, string>;
    // RFC 6749 §2.3.1: id and secret form-encoded, then base64.
    assert.equal(headers.authorization, `Basic ${Buffer.from('webhooks%20worker:s3cr%3At').toString('base64')}`);
    assert.equal(headers['content-type'], 'application/x-www-form-urlencoded');
    assert.deepEqual(Object.fromEntries(new URLSearchParams(request!.init.body as string)), {
      grant_type: 'client_credentials',
      scope: 'temporal',
      resource: 'urn:temporal',
      audience: 'temporal-api',
    });
  });

  it('sends only the grant type when no scope, resource or audience is configured', async () => {
    const endpoint = tokenEndpoint(() => ({ status: 200, body: { access_token: 't', expires_in: 3600 } }));
    await fetchClientCredentialsToken(SETTINGS, endpoint.fetchImpl);
    assert.equal(endpoint.requests[0]!.init.body as string, 'grant_type=client_credentials');
  });

  it('takes a token without a stated lifetime as living a minute', async () => {
    for (const expires of [undefined, 0, -5, 'soon']) {
      const endpoint = tokenEndpoint(() => ({ status: 200, body: { access_token: 't', expires_in: expires } }));
      assert.equal((await fetchClientCredentialsToken(SETTINGS, endpoint.fetchImpl)).lifetimeMs, 60_000);
    }
  });

  it('a refusal names the status and the provider’s error, never the secret', async () => {
    const refused = tokenEndpoint(() => ({ status: 401, body: { error: 'invalid_client' } }));
    await assert.rejects(fetchClientCredentialsToken(SETTINGS, refused.fetchImpl), (error: Error) => {
      assert.match(error.message, /401 invalid_client/);
      assert.doesNotMatch(error.message, /s3cr/);
      return true;
    });
    const noToken = tokenEndpoint(() => ({ status: 200, body: { token_type: 'Bearer' } }));
    await assert.rejects(fetchClientCredentialsToken(SETTINGS, noToken.fetchImpl), /200 no access_token/);
  });

  it('renews 30 s before expiry, a quarter of the life before for long tokens, never before half of it', () => {
    assert.equal(renewalDelayMs(60_000), 30_000);
    assert.equal(renewalDelayMs(300_000), 225_000);
    assert.equal(renewalDelayMs(3_600_000), 2_700_000);
    assert.equal(renewalDelayMs(100_000), 70_000);
    assert.equal(renewalDelayMs(10_000), 5_000);
    assert.equal(renewalDelayMs(0), 0);
  });

  it('retries a failed renewal after 1 s, 2 s, 4 s… up to 30 s', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 20].map(retryDelayMs), [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    assert.equal(retryDelayMs(0), 1_000);
  });

  it('renews before expiry, hands each token over, and keeps the current one while the provider fails', async () => {
    let issued = 0;
    let failing = false;
    const fetchToken = (): Promise<AccessToken> => {
      if (failing) return Promise.reject(new Error('provider down'));
      issued += 1;
      return Promise.resolve({ value: `token-${issued}`, lifetimeMs: 200 });
    };
    const handed: string[] = [];
    const errors: number[] = [];
    const logged: number[] = [];
    const tokens = await startTokenRefresher({
      fetchToken,
      onRenewed: (token) => void handed.push(token),
      onError: (_error, retryInMs) => void errors.push(retryInMs),
      onRenewedLog: (renewals) => void logged.push(renewals),
    });
    try {
      assert.equal(tokens.current(), 'token-1');
      assert.equal(tokens.renewals(), 0);
      await sleep(90);
      assert.equal(tokens.current(), 'token-1', 'not renewed before half its life');
      await sleep(200);
      assert.ok(tokens.renewals() >= 1, 'renewed within its life');
      assert.equal(tokens.current(), `token-${issued}`);
      assert.deepEqual(
        handed,
        Array.from({ length: issued - 1 }, (_, i) => `token-${i + 2}`),
      );
      assert.deepEqual(
        logged,
        Array.from({ length: tokens.renewals() }, (_, i) => i + 1),
      );
      failing = true;
      const last = tokens.current();
      await sleep(300);
      assert.equal(tokens.current(), last, 'the current token still serves');
      assert.deepEqual(errors.slice(0, 1), [1_000]);
      failing = false;
      await sleep(1_200);
      assert.notEqual(tokens.current(), last, 'renewed once the provider answers again');
    } finally {
      tokens.stop();
    }
    const stoppedAt = issued;
    await sleep(300);
    assert.equal(issued, stoppedAt, 'no renewal after stop');
  });

  it('a token the connection refuses to take counts as a failed renewal', async () => {
    let issued = 0;
    const errors: string[] = [];
    const tokens = await startTokenRefresher({
      fetchToken: () => Promise.resolve({ value: `token-${++issued}`, lifetimeMs: 100 }),
      onRenewed: () => Promise.reject(new Error('connection closed')),
      onError: (error) => void errors.push(error.message),
    });
    await sleep(150);
    tokens.stop();
    assert.equal(tokens.current(), 'token-1');
    assert.equal(tokens.renewals(), 0);
    assert.deepEqual(errors, ['connection closed']);
  });

  it('the first token’s refusal rejects the start', async () => {
    await assert.rejects(
      startTokenRefresher({ fetchToken: () => Promise.reject(new Error('invalid_client')) }),
      /invalid_client/,
    );
  });

  it('a connection that carries the provider’s tokens is TLS, like one with an API key', () => {
    const plain = temporalConnectionOptions({ TEMPORAL_ADDRESS: 'temporal:7233' });
    assert.equal(plain.tls, undefined);
    const withTokens = temporalConnectionOptions({ TEMPORAL_ADDRESS: 'temporal:7233', ...SETTINGS });
    assert.deepEqual(withTokens.tls, {
      serverNameOverride: undefined,
      serverRootCACertificate: undefined,
      clientCertPair: undefined,
    });
    assert.ok(temporalConnectionOptions({ TEMPORAL_API_KEY: 'k' }).tls);
  });

  it('config: the token endpoint needs the client’s id and secret, excludes TEMPORAL_API_KEY, and is https in production', () => {
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig(env);
        return '';
      } catch (error) {
        return (error as Error).message;
      }
    };
    const base = { NODE_ENV: 'development' };
    assert.equal(problems({ ...base, ...SETTINGS }), '');
    assert.match(
      problems({ ...base, TEMPORAL_OAUTH_TOKEN_URL: 'https://idp.test/token', TEMPORAL_OAUTH_CLIENT_ID: 'w' }),
      /TEMPORAL_OAUTH_CLIENT_ID and TEMPORAL_OAUTH_CLIENT_SECRET are required with TEMPORAL_OAUTH_TOKEN_URL/,
    );
    assert.match(
      problems({ ...base, TEMPORAL_OAUTH_CLIENT_ID: 'w', TEMPORAL_OAUTH_CLIENT_SECRET: 's' }),
      /TEMPORAL_OAUTH_TOKEN_URL is required with/,
    );
    assert.match(
      problems({ ...base, ...SETTINGS, TEMPORAL_API_KEY: 'k' }),
      /set only one of TEMPORAL_API_KEY and TEMPORAL_OAUTH_TOKEN_URL/,
    );
    assert.match(problems({ ...base, ...SETTINGS, TEMPORAL_OAUTH_TOKEN_URL: 'ftp://idp' }), /TEMPORAL_OAUTH_TOKEN_URL/);
    assert.match(
      problems({ NODE_ENV: 'production', ...SETTINGS, TEMPORAL_OAUTH_TOKEN_URL: 'http://idp.test/token' }),
      /TEMPORAL_OAUTH_TOKEN_URL must be an https:\/\/ URL in production/,
    );
    assert.doesNotMatch(
      problems({ NODE_ENV: 'production', ...SETTINGS }),
      /TEMPORAL_OAUTH/,
      'https is accepted in production',
    );
  });
});

// The OAuth client's pure rules (common/registration/oauth-client.ts): the upload's checks, the key types a client
// assertion accepts, the assertion itself, and the token request's timeout. The API and real deliveries are in
// test/activities/oauth.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync, verify, type KeyObject } from 'node:crypto';
import {
  CLIENT_ASSERTION_LIFETIME_SECONDS,
  OAUTH_SCOPE_PATTERN,
  OAUTH_TOKEN_TIMEOUT_MS,
  OAUTH_VISIBLE_ASCII_PATTERN,
  assertionKey,
  clientAssertionClaims,
  inspectOAuthClient,
  signClientAssertion,
  tokenRequestTimeoutMs,
  tokenTimeoutMessage,
  type OAuthClientUpload,
} from '../../common/registration/oauth-client';
import { HTTPS_REQUIRED } from '../../common/registration/webhook-url';

const pemOf = (key: KeyObject) => key.export({ type: 'pkcs8', format: 'pem' }) as string;
const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
const p521 = generateKeyPairSync('ec', { namedCurve: 'P-521' });
const rsa2048 = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsa1024 = generateKeyPairSync('rsa', { modulusLength: 1024 });
const ed25519 = generateKeyPairSync('ed25519');

const TOKEN_URL = 'https://auth.example/oauth2/token';
const open = { httpsOnly: false };
const httpsOnly = { httpsOnly: true };
const NOT_A_URL = 'must be an absolute http or https URL without credentials or fragment';
const KEY_TYPES = 'must be an RSA key (RS384) or an EC key on P-384 (ES384) or P-256 (ES256)';

/** The problems of an upload, or a failure when it passed. */
function problemsOf(upload: OAuthClientUpload, policy = open) {
  const inspected = inspectOAuthClient(upload, policy);
  assert.ok('problems' in inspected, `refused: ${JSON.stringify(upload)}`);
  return inspected.problems;
}

describe('OAuth client: the rules of common/registration/oauth-client.ts (pure)', () => {
  describe('the upload’s checks', () => {
    it('a client secret: client_secret_basic unless named; what is stored, scope and keyId null when absent', () => {
      assert.deepEqual(inspectOAuthClient({ tokenUrl: TOKEN_URL, clientId: 'c', clientSecret: 's' }, httpsOnly), {
        info: {
          tokenUrl: TOKEN_URL,
          clientId: 'c',
          clientAuthentication: 'client_secret_basic',
          scope: null,
          keyId: null,
        },
        credential: 's',
      });
      assert.deepEqual(
        inspectOAuthClient(
          {
            tokenUrl: TOKEN_URL,
            clientId: 'c',
            clientAuthentication: 'client_secret_post',
            clientSecret: 's-2',
            scope: 'system/Observation.write',
          },
          open,
        ),
        {
          info: {
            tokenUrl: TOKEN_URL,
            clientId: 'c',
            clientAuthentication: 'client_secret_post',
            scope: 'system/Observation.write',
            keyId: null,
          },
          credential: 's-2',
        },
      );
    });

    it('a private key: private_key_jwt unless named, its keyId kept, the PEM the credential', () => {
      const pem = pemOf(p384.privateKey);
      assert.deepEqual(inspectOAuthClient({ tokenUrl: TOKEN_URL, clientId: 'c', privateKey: pem, keyId: 'k' }, open), {
        info: { tokenUrl: TOKEN_URL, clientId: 'c', clientAuthentication: 'private_key_jwt', scope: null, keyId: 'k' },
        credential: pem,
      });
      const named = inspectOAuthClient(
        { tokenUrl: TOKEN_URL, clientId: 'c', clientAuthentication: 'private_key_jwt', privateKey: pem },
        open,
      );
      assert.ok('info' in named);
      assert.equal(named.credential, pem);
    });

    it('a token URL that is not an absolute http(s) URL, has credentials or a fragment is refused; http only where allowed', () => {
      for (const tokenUrl of [
        'not a url',
        '/token',
        'ftp://auth.example/token',
        'https://user:pw@auth.example/token',
        'https://auth.example/token#frag',
      ])
        assert.deepEqual(problemsOf({ tokenUrl, clientId: 'c', clientSecret: 's' }), [
          { pointer: '/oauth/tokenUrl', detail: NOT_A_URL },
        ]);
      const http = { tokenUrl: 'http://auth.example/token', clientId: 'c', clientSecret: 's' };
      assert.deepEqual(problemsOf(http, httpsOnly), [{ pointer: '/oauth/tokenUrl', detail: HTTPS_REQUIRED }]);
      assert.ok('info' in inspectOAuthClient(http, open), 'http where http receivers are allowed');
      assert.ok('info' in inspectOAuthClient({ ...http, tokenUrl: 'https://auth.example/token?x=1' }, httpsOnly));
    });

    it('private_key_jwt: a client secret is refused beside it, the key is required and must be of a signing type', () => {
      const jwt = { tokenUrl: TOKEN_URL, clientId: 'c', clientAuthentication: 'private_key_jwt' as const };
      assert.deepEqual(problemsOf({ ...jwt, clientSecret: 's', privateKey: pemOf(p256.privateKey) }), [
        { pointer: '/oauth/clientSecret', detail: 'must not be given with private_key_jwt' },
      ]);
      assert.deepEqual(problemsOf(jwt), [{ pointer: '/oauth/privateKey', detail: 'is required with private_key_jwt' }]);
      assert.deepEqual(problemsOf({ ...jwt, clientSecret: 's' }), [
        { pointer: '/oauth/clientSecret', detail: 'must not be given with private_key_jwt' },
        { pointer: '/oauth/privateKey', detail: 'is required with private_key_jwt' },
      ]);
      assert.deepEqual(problemsOf({ ...jwt, privateKey: pemOf(ed25519.privateKey) }), [
        { pointer: '/oauth/privateKey', detail: KEY_TYPES },
      ]);
    });

    it('a secret method: a private key or keyId is refused beside it, named by the method; the secret is required', () => {
      for (const method of ['client_secret_basic', 'client_secret_post'] as const) {
        const base = { tokenUrl: TOKEN_URL, clientId: 'c', clientAuthentication: method };
        assert.deepEqual(problemsOf({ ...base, clientSecret: 's', privateKey: pemOf(p256.privateKey) }), [
          { pointer: '/oauth/privateKey', detail: `must not be given with ${method}` },
        ]);
        assert.deepEqual(problemsOf({ ...base, clientSecret: 's', keyId: 'k' }), [
          { pointer: '/oauth/keyId', detail: `must not be given with ${method}` },
        ]);
        assert.deepEqual(problemsOf(base), [{ pointer: '/oauth/clientSecret', detail: `is required with ${method}` }]);
      }
      // Every problem at once, the URL's first.
      assert.deepEqual(
        problemsOf({ tokenUrl: 'nope', clientId: 'c', clientAuthentication: 'client_secret_basic', keyId: 'k' }),
        [
          { pointer: '/oauth/tokenUrl', detail: NOT_A_URL },
          { pointer: '/oauth/keyId', detail: 'must not be given with client_secret_basic' },
          { pointer: '/oauth/clientSecret', detail: 'is required with client_secret_basic' },
        ],
      );
    });

    it('the API’s patterns: visible ASCII for ids and secrets, scope tokens separated by single spaces', () => {
      const visible = new RegExp(OAUTH_VISIBLE_ASCII_PATTERN);
      assert.ok(visible.test('webhooks-ward-7') && visible.test('!~'));
      for (const refused of ['', 'a b', 'é', 'a\tb']) assert.equal(visible.test(refused), false, refused);
      const scope = new RegExp(OAUTH_SCOPE_PATTERN);
      assert.ok(scope.test('system/Observation.write') && scope.test('a b c'));
      for (const refused of ['', 'a  b', ' a', 'a ', 'a"b', 'a\\b']) assert.equal(scope.test(refused), false, refused);
    });
  });

  describe('the assertion key', () => {
    it('RSA of 2048 bits or more signs RS384, EC P-384 ES384, EC P-256 ES256', () => {
      for (const [pair, alg] of [
        [rsa2048, 'RS384'],
        [p384, 'ES384'],
        [p256, 'ES256'],
      ] as const) {
        const found = assertionKey(pemOf(pair.privateKey));
        assert.ok(typeof found !== 'string', `${alg}: ${typeof found === 'string' ? found : ''}`);
        assert.equal(found.alg, alg);
        assert.equal(found.key.type, 'private');
      }
    });

    it('refuses other curves and types, small RSA keys, what is not a private key, and encrypted keys', () => {
      assert.equal(assertionKey(pemOf(p521.privateKey)), KEY_TYPES);
      assert.equal(assertionKey(pemOf(ed25519.privateKey)), KEY_TYPES);
      assert.equal(assertionKey(pemOf(rsa1024.privateKey)), 'must be an RSA key of at least 2048 bits');
      const notPem = 'must be a PEM private key (-----BEGIN PRIVATE KEY-----)';
      assert.equal(assertionKey('not a key'), notPem);
      assert.equal(assertionKey(p256.publicKey.export({ type: 'spki', format: 'pem' }) as string), notPem);
      const encrypted = 'must not be encrypted: upload the key without a passphrase';
      const pkcs8 = p256.privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'p' });
      assert.equal(assertionKey(pkcs8 as string), encrypted);
      const traditional = rsa2048.privateKey.export({
        type: 'pkcs1',
        format: 'pem',
        cipher: 'aes-256-cbc',
        passphrase: 'p',
      }) as string;
      assert.match(traditional, /Proc-Type: 4,ENCRYPTED/);
      assert.equal(assertionKey(traditional), encrypted);
    });
  });

  describe('the client assertion', () => {
    it('claims: iss = sub = the client, aud = the token URL, iat in whole seconds, exp five minutes on', () => {
      assert.deepEqual(clientAssertionClaims('ward-7', TOKEN_URL, 1_700_000_000_999, 'j-1'), {
        iss: 'ward-7',
        sub: 'ward-7',
        aud: TOKEN_URL,
        jti: 'j-1',
        iat: 1_700_000_000,
        exp: 1_700_000_000 + 300,
      });
      assert.equal(CLIENT_ASSERTION_LIFETIME_SECONDS, 300);
      const [a, b] = [clientAssertionClaims('c', TOKEN_URL, 0), clientAssertionClaims('c', TOKEN_URL, 0)];
      assert.notEqual(a.jti, b.jti, 'a new jti by default');
      assert.match(a.jti, /^[0-9a-f-]{36}$/);
    });

    it('ES256 signs SHA-256 as r || s; the header names the algorithm, JWT and the key id only when there is one', () => {
      const now = Date.UTC(2026, 10, 29);
      const jwt = signClientAssertion(
        { clientId: 'c', tokenUrl: TOKEN_URL, privateKey: pemOf(p256.privateKey), keyId: null },
        now,
      );
      const [h, c, s] = jwt.split('.') as [string, string, string];
      assert.deepEqual(JSON.parse(Buffer.from(h, 'base64url').toString()), { alg: 'ES256', typ: 'JWT' });
      const claims = JSON.parse(Buffer.from(c, 'base64url').toString()) as Record<string, unknown>;
      assert.deepEqual([claims.iat, claims.exp, claims.aud], [now / 1000, now / 1000 + 300, TOKEN_URL]);
      const signature = Buffer.from(s, 'base64url');
      assert.equal(signature.length, 64, 'r || s, not DER');
      assert.ok(
        verify('sha256', Buffer.from(`${h}.${c}`), { key: p256.publicKey, dsaEncoding: 'ieee-p1363' }, signature),
      );
      assert.equal(
        verify('sha384', Buffer.from(`${h}.${c}`), { key: p256.publicKey, dsaEncoding: 'ieee-p1363' }, signature),
        false,
      );
      const withKid = signClientAssertion(
        { clientId: 'c', tokenUrl: TOKEN_URL, privateKey: pemOf(p256.privateKey), keyId: 'k-2' },
        now,
      );
      assert.deepEqual(JSON.parse(Buffer.from(withKid.split('.')[0]!, 'base64url').toString()), {
        alg: 'ES256',
        typ: 'JWT',
        kid: 'k-2',
      });
    });

    it('a key that cannot sign throws, naming why', () => {
      assert.throws(
        () =>
          signClientAssertion({ clientId: 'c', tokenUrl: TOKEN_URL, privateKey: pemOf(p521.privateKey), keyId: null }),
        { message: `The OAuth private key ${KEY_TYPES}` },
      );
    });
  });

  describe('the token request’s timeout', () => {
    it('10 s, or what is left of the attempt’s deadline when less; at least 1 ms', () => {
      assert.equal(OAUTH_TOKEN_TIMEOUT_MS, 10_000);
      assert.equal(tokenRequestTimeoutMs(5_000), 10_000);
      assert.equal(tokenRequestTimeoutMs(5_000, 15_001), 10_000);
      assert.equal(tokenRequestTimeoutMs(5_000, 14_999), 9_999);
      assert.equal(tokenRequestTimeoutMs(5_000, 5_250.9), 250);
      assert.equal(tokenRequestTimeoutMs(5_000, 5_000), 1);
      assert.equal(tokenRequestTimeoutMs(5_000, 0), 1);
    });

    it('the failure names the wait in seconds', () => {
      assert.equal(tokenTimeoutMessage(10_000), 'OAuth token endpoint did not answer within 10 s (TIMEOUT)');
      assert.equal(tokenTimeoutMessage(2_500), 'OAuth token endpoint did not answer within 2.5 s (TIMEOUT)');
    });
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditTrailKeysFromConfig, generateAuditSigningKey } from '../../common/crypto/audit-keys';
import { ConfigError, isDevelopment, loadConfig } from '../../common/config';
import { workerTuningOptions } from '../../worker/start';
import { metricsBindAddress } from '../../worker/runtime';

const SECRET = 'x'.repeat(32);
const DB = 'postgres://u:p@localhost:5432/webhooks';
const PAYLOAD_KEYS = `k1:${Buffer.alloc(32).toString('base64')}`;

function configError(env: NodeJS.ProcessEnv, needs: Parameters<typeof loadConfig>[1] = {}): string {
  try {
    loadConfig(env, needs);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.message;
  }
  assert.fail('expected a ConfigError');
}

describe('config', () => {
  it('applies defaults and coerces numbers', () => {
    const config = loadConfig({ PORT: '8080' });
    assert.equal(config.PORT, 8080);
    assert.equal(loadConfig({}).PORT, 3000);
    assert.equal(loadConfig({}).LOG_LEVEL, 'info');
  });

  it('treats empty strings as unset', () => {
    assert.equal(loadConfig({ PORT: '', JWT_SECRET: '' }).PORT, 3000);
  });

  it('names DATABASE_URL when the API needs it and it is missing or not a postgres URL', () => {
    assert.match(configError({ JWT_SECRET: SECRET }, { database: true, auth: true }), /DATABASE_URL is required/);
    assert.match(configError({ DATABASE_URL: 'mysql://x', JWT_SECRET: SECRET }), /DATABASE_URL must match pattern/);
  });

  it('names JWT_SECRET and JWT_JWKS_URI when no authentication is configured', () => {
    assert.match(
      configError({ DATABASE_URL: DB }, { database: true, auth: true }),
      /JWT_SECRET or JWT_JWKS_URI is required/,
    );
  });

  it('refuses a short JWT_SECRET, a non-http JWT_JWKS_URI, and both at once', () => {
    assert.match(configError({ JWT_SECRET: 'short' }), /JWT_SECRET must NOT have fewer than 32 characters/);
    assert.match(configError({ JWT_JWKS_URI: 'file:///etc/keys' }), /JWT_JWKS_URI must match pattern/);
    assert.match(
      configError({ JWT_SECRET: SECRET, JWT_JWKS_URI: 'https://idp.example/jwks' }),
      /only one of JWT_SECRET and JWT_JWKS_URI/,
    );
  });

  it('names PORT, LOG_LEVEL and WEBHOOK_SECRET_KEY when they are wrong, all at once', () => {
    const message = configError({ PORT: '70000', LOG_LEVEL: 'loud', WEBHOOK_SECRET_KEY: 'abc' });
    assert.match(message, /PORT must be <= 65535/);
    assert.match(message, /LOG_LEVEL must be equal to one of the allowed values/);
    assert.match(message, /WEBHOOK_SECRET_KEY must match pattern/);
  });

  it('refuses a retry schedule that could end a delivery before a second attempt', () => {
    assert.match(
      configError({ DELIVERY_INITIAL_INTERVAL_MS: '5000', DELIVERY_MAX_INTERVAL_MS: '1000' }),
      /DELIVERY_MAX_INTERVAL_MS must be at least DELIVERY_INITIAL_INTERVAL_MS/,
    );
    assert.match(
      configError({ DELIVERY_GIVE_UP_AFTER_MS: '20000' }),
      /DELIVERY_GIVE_UP_AFTER_MS must leave room for two attempts/,
    );
    assert.doesNotThrow(() => loadConfig({ DELIVERY_GIVE_UP_AFTER_MS: '3600000' }));
  });

  it('requires WEBHOOK_SECRET_KEY in production', () => {
    assert.match(configError({ NODE_ENV: 'production' }), /WEBHOOK_SECRET_KEY is required in production/);
    const payloadKeys = `k1:${Buffer.alloc(32).toString('base64')}`;
    assert.doesNotThrow(() =>
      loadConfig({ NODE_ENV: 'production', WEBHOOK_SECRET_KEY: 'a'.repeat(64), PAYLOAD_ENCRYPTION_KEYS: payloadKeys }),
    );
  });

  it('in production a process that writes audit rows needs AUDIT_HMAC_KEYS, AUDIT_SIGNING_KEY and AUDIT_DIGEST_DIR, each named', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS,
    };
    const message = configError(production, { audit: true });
    for (const variable of ['AUDIT_HMAC_KEYS', 'AUDIT_SIGNING_KEY', 'AUDIT_DIGEST_DIR'])
      assert.match(message, new RegExp(`${variable} is required in production`));
    const audit = {
      AUDIT_HMAC_KEYS: `a1:${'ab'.repeat(32)}`,
      AUDIT_SIGNING_KEY: generateAuditSigningKey('s1'),
      AUDIT_DIGEST_DIR: '/var/lib/webhooks/audit',
    };
    assert.equal(loadConfig({ ...production, ...audit }, { audit: true }).AUDIT_DIGEST_DIR, audit.AUDIT_DIGEST_DIR);
    // Only the processes that write rows: a migration needs none of them.
    assert.doesNotThrow(() => loadConfig(production, { database: false }));
    assert.doesNotThrow(() => loadConfig({}, { audit: true }), 'development generates them');
    assert.match(configError({ AUDIT_SIGNING_KEY: 's1:short' }), /AUDIT_SIGNING_KEY must match/);
    assert.match(configError({ AUDIT_HMAC_KEYS: 'a1:short' }), /AUDIT_HMAC_KEYS must match/);
  });

  it('keeps audit rows six years in production: AUDIT_RETENTION_DAYS below 2190 is refused, named; development may go lower', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS,
    };
    assert.match(
      configError({ ...production, AUDIT_RETENTION_DAYS: '2189' }),
      /AUDIT_RETENTION_DAYS must be at least 2190 in production/,
    );
    assert.equal(loadConfig({ ...production, AUDIT_RETENTION_DAYS: '2190' }).AUDIT_RETENTION_DAYS, 2190);
    assert.equal(loadConfig(production).AUDIT_RETENTION_DAYS, 2190);
    assert.equal(loadConfig({ AUDIT_RETENTION_DAYS: '1' }).AUDIT_RETENTION_DAYS, 1);
  });

  it('development audit keys are generated once into DATA_DIR and kept; production never generates them', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-audit-keys-'));
    const first = auditTrailKeysFromConfig(loadConfig({ DATA_DIR: dataDir }));
    const again = auditTrailKeysFromConfig(loadConfig({ DATA_DIR: dataDir }));
    assert.deepEqual(readdirSync(dataDir).sort(), ['audit-hmac.keys', 'audit-signing.key']);
    assert.deepEqual([again.hmacKeys, again.signing?.publicKey], [first.hmacKeys, first.signing?.publicKey]);
    assert.equal(first.digestDir, join(dataDir, 'audit-digests'));
    const empty = mkdtempSync(join(tmpdir(), 'webhooks-audit-keys-'));
    assert.throws(
      () => auditTrailKeysFromConfig({ ...loadConfig({ DATA_DIR: empty }), NODE_ENV: 'production' }),
      /AUDIT_HMAC_KEYS, AUDIT_SIGNING_KEY, AUDIT_DIGEST_DIR required in production/,
    );
    assert.deepEqual(readdirSync(empty), []);
  });

  it('requires JWT_ISSUER, JWT_AUDIENCE and an https JWKS URI in production, and bounds JWT_MAX_AGE', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
    };
    const message = configError({ ...production, JWT_JWKS_URI: 'http://idp.example/jwks' });
    assert.match(message, /JWT_ISSUER is required in production when JWT_JWKS_URI is set/);
    assert.match(message, /JWT_AUDIENCE is required in production when JWT_JWKS_URI is set/);
    assert.match(message, /JWT_JWKS_URI must be an https:\/\/ URL in production/);
    const strict = {
      JWT_JWKS_URI: 'https://idp.example/jwks',
      JWT_ISSUER: 'https://idp.example/',
      JWT_AUDIENCE: 'webhooks',
    };
    assert.equal(loadConfig({ ...production, ...strict }).JWT_MAX_AGE, 3600);
    assert.doesNotThrow(() => loadConfig({ JWT_JWKS_URI: 'http://127.0.0.1:9/jwks' }), 'development allows http');
    assert.match(configError({ JWT_MAX_AGE: '0' }), /JWT_MAX_AGE must be >= 1/);
  });

  it('a standalone process (start:api, start:worker) runs as production when NODE_ENV is unset', () => {
    const keys = { WEBHOOK_SECRET_KEY: 'a'.repeat(64), PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS };
    assert.equal(loadConfig(keys, { standalone: true }).NODE_ENV, 'production');
    assert.equal(loadConfig(keys).NODE_ENV, 'development', '`npm start` and the CLI keep development');
    const message = configError({}, { standalone: true });
    assert.match(message, /NODE_ENV is not set, so this process runs as production/);
    assert.match(message, /WEBHOOK_SECRET_KEY is required/);
    assert.match(message, /PAYLOAD_ENCRYPTION_KEYS is required/);
    // Only an explicit NODE_ENV=development runs on generated keys; NODE_ENV=test does not.
    assert.doesNotThrow(() => loadConfig({ NODE_ENV: 'development' }, { standalone: true }));
    const test = configError({ NODE_ENV: 'test' }, { standalone: true });
    assert.match(test, /PAYLOAD_ENCRYPTION_KEYS is required/);
    assert.doesNotMatch(test, /NODE_ENV is not set/);
  });

  it('in production the API needs METRICS_TOKEN and an https ALERT_WEBHOOK_URL', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS,
    };
    const api = { database: true, auth: true } as const;
    const withApi = { ...production, DATABASE_URL: DB, JWT_SECRET: SECRET };
    assert.match(configError(withApi, api), /METRICS_TOKEN is required in production/);
    const base = { PUBLIC_BASE_URL: 'https://hooks.example.com' };
    assert.doesNotThrow(() => loadConfig({ ...withApi, ...base, METRICS_TOKEN: 't'.repeat(16) }, api));
    assert.doesNotThrow(() => loadConfig({ ...production, DATABASE_URL: DB }, { database: true }), 'the worker');
    assert.doesNotThrow(() => loadConfig({ DATABASE_URL: DB, JWT_SECRET: SECRET }, api), 'development');
    const alert = { ALERT_WEBHOOK_URL: 'http://alerts.example/hook', ALERT_WEBHOOK_SECRET: 's'.repeat(16) };
    assert.match(configError({ ...production, ...alert }), /ALERT_WEBHOOK_URL must be an https:\/\/ URL in production/);
    assert.doesNotThrow(() =>
      loadConfig({ ...production, ...alert, ALERT_WEBHOOK_URL: 'https://alerts.example/hook' }),
    );
    assert.doesNotThrow(() => loadConfig(alert), 'development allows http');
  });

  it('in production SMTP_URL must use TLS: smtps://, or smtp:// with STARTTLS required; development keeps smtp://', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS,
    };
    const refused =
      /SMTP_URL must use TLS in production: smtps:\/\/… \(TLS from the start\) or smtp:\/\/…\?requireTLS=true/;
    for (const url of [
      'smtp://mail.example:25',
      'smtp://u:p@mail.example:587?requireTLS=false',
      'smtp://mail.example:587?requireTLS=true&ignoreTLS=true',
      'smtps://mail.example:465?tls.rejectUnauthorized=false',
    ])
      assert.match(configError({ ...production, SMTP_URL: url }), refused, url);
    for (const url of ['smtps://u:p@mail.example:465', 'smtp://u:p@mail.example:587?requireTLS=true'])
      assert.equal(loadConfig({ ...production, SMTP_URL: url }).SMTP_URL, url);
    assert.equal(loadConfig({ SMTP_URL: 'smtp://localhost:1025' }).SMTP_URL, 'smtp://localhost:1025', 'development');
  });

  it('in production the API needs an https PUBLIC_BASE_URL, named; the worker and development do not', () => {
    const api = { database: true, auth: true } as const;
    const withApi = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS,
      DATABASE_URL: DB,
      JWT_SECRET: SECRET,
      METRICS_TOKEN: 't'.repeat(16),
    };
    assert.match(configError(withApi, api), /PUBLIC_BASE_URL is required in production/);
    assert.match(
      configError({ ...withApi, PUBLIC_BASE_URL: 'http://hooks.example.com' }, api),
      /PUBLIC_BASE_URL must be an https:\/\/ URL in production/,
    );
    assert.equal(
      loadConfig({ ...withApi, PUBLIC_BASE_URL: 'https://hooks.example.com' }, api).PUBLIC_BASE_URL,
      'https://hooks.example.com',
    );
    assert.doesNotThrow(() => loadConfig({ ...withApi, JWT_SECRET: undefined }, { database: true }), 'the worker');
    const development = { DATABASE_URL: DB, JWT_SECRET: SECRET, PUBLIC_BASE_URL: 'http://127.0.0.1:3000' };
    assert.doesNotThrow(() => loadConfig(development, api), 'development takes http');
  });

  it('NODE_ENV=test keeps every production guard: only development switches them off', () => {
    const test = {
      NODE_ENV: 'test',
      DATABASE_URL: DB,
      JWT_JWKS_URI: 'http://idp.example/jwks',
      DEV_CODEC_WITHOUT_TOKEN: 'true',
      ALERT_WEBHOOK_URL: 'http://alerts.example/hook',
      ALERT_WEBHOOK_SECRET: 's'.repeat(16),
      PUBLIC_BASE_URL: 'http://hooks.example.com',
    };
    const message = configError(test, { database: true, auth: true });
    for (const problem of [
      /WEBHOOK_SECRET_KEY is required/,
      /PAYLOAD_ENCRYPTION_KEYS is required/,
      /DEV_CODEC_WITHOUT_TOKEN must not be set in production/,
      /ALERT_WEBHOOK_URL must be an https:\/\/ URL/,
      /METRICS_TOKEN is required/,
      /PUBLIC_BASE_URL must be an https:\/\/ URL/,
      /JWT_ISSUER is required/,
      /JWT_AUDIENCE is required/,
      /JWT_JWKS_URI must be an https:\/\/ URL/,
    ])
      assert.match(message, problem);
    assert.doesNotThrow(() => loadConfig({ ...test, NODE_ENV: 'development' }, { database: true, auth: true }));
    assert.equal(isDevelopment({ NODE_ENV: 'test' }), false);
    assert.equal(isDevelopment({ NODE_ENV: 'production' }), false);
    assert.equal(isDevelopment({ NODE_ENV: 'development' }), true);
  });

  it('the worker metrics listen on 127.0.0.1 and unencrypted events are refused unless told otherwise', () => {
    const config = loadConfig({});
    assert.equal(config.WORKER_METRICS_HOST, '127.0.0.1');
    assert.equal(config.ALLOW_UNENCRYPTED_EVENTS, false);
    assert.equal(loadConfig({ WORKER_METRICS_HOST: '::' }).WORKER_METRICS_HOST, '::');
    assert.equal(loadConfig({ ALLOW_UNENCRYPTED_EVENTS: 'true' }).ALLOW_UNENCRYPTED_EVENTS, true);
    assert.match(configError({ WORKER_METRICS_HOST: 'a b' }), /WORKER_METRICS_HOST must match pattern/);
    assert.equal(metricsBindAddress({ host: '127.0.0.1', port: 9464 }), '127.0.0.1:9464');
    assert.equal(metricsBindAddress({ host: '::1', port: 9464 }), '[::1]:9464');
  });

  it('SMTP_URL: smtp:// or smtps:// only; SMTP_FROM has a default', () => {
    assert.equal(loadConfig({}).SMTP_URL, undefined);
    assert.equal(loadConfig({}).SMTP_FROM, 'webhooks@localhost');
    assert.equal(loadConfig({ SMTP_URL: 'smtps://u:p@mail.example:465' }).SMTP_URL, 'smtps://u:p@mail.example:465');
    assert.match(configError({ SMTP_URL: 'http://mail.example' }), /SMTP_URL must match pattern/);
  });

  it('PAUSE_MAX_HOURS: 72 by default, 1 to 720 hours', () => {
    assert.equal(loadConfig({}).PAUSE_MAX_HOURS, 72);
    assert.equal(loadConfig({ PAUSE_MAX_HOURS: '1' }).PAUSE_MAX_HOURS, 1);
    assert.equal(loadConfig({ PAUSE_MAX_HOURS: '720' }).PAUSE_MAX_HOURS, 720);
    assert.match(configError({ PAUSE_MAX_HOURS: '0' }), /PAUSE_MAX_HOURS must be >= 1/);
    assert.match(configError({ PAUSE_MAX_HOURS: '721' }), /PAUSE_MAX_HOURS must be <= 720/);
  });

  it('has defaults for the HTTP, database and Temporal timeouts and refuses headers slower than requests', () => {
    const config = loadConfig({});
    assert.deepEqual(
      [config.HTTP_HEADERS_TIMEOUT_MS, config.HTTP_REQUEST_TIMEOUT_MS, config.HTTP_MAX_CONNECTIONS],
      [10_000, 30_000, 1_000],
    );
    assert.deepEqual(
      [config.DB_ACQUIRE_TIMEOUT_MS, config.DB_CONNECT_TIMEOUT_MS, config.DB_STATEMENT_TIMEOUT_MS],
      [5_000, 5_000, 10_000],
    );
    assert.match(
      configError({ HTTP_HEADERS_TIMEOUT_MS: '40000' }),
      /HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS/,
    );
  });

  it('leaves the worker pollers to the SDK unless set, then passes them as poller maximums within the slots', () => {
    const defaults = workerTuningOptions(loadConfig({}));
    assert.equal(defaults.workflowTaskPollerBehavior, undefined);
    assert.equal(defaults.activityTaskPollerBehavior, undefined);
    assert.equal(defaults.nonStickyToStickyPollRatio, undefined);
    const set = workerTuningOptions(
      loadConfig({
        WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: '16',
        WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: '40',
        WORKER_NONSTICKY_POLL_RATIO: '1',
      }),
    );
    assert.deepEqual(set.workflowTaskPollerBehavior, { type: 'simple-maximum', maximum: 16 });
    assert.deepEqual(set.activityTaskPollerBehavior, { type: 'simple-maximum', maximum: 40 });
    assert.equal(set.nonStickyToStickyPollRatio, 1);
    assert.match(configError({ WORKER_NONSTICKY_POLL_RATIO: '0' }), /WORKER_NONSTICKY_POLL_RATIO/);
    assert.match(
      configError({ WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '8', WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: '10' }),
      /WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS must not exceed WORKER_MAX_CONCURRENT_WORKFLOW_TASKS/,
    );
    assert.match(
      configError({ WORKER_MAX_CONCURRENT_ACTIVITIES: '5', WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: '6' }),
      /WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS must not exceed WORKER_MAX_CONCURRENT_ACTIVITIES/,
    );
    assert.match(configError({ WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: '1' }), /WORKFLOW_TASK_POLLS must be >= 2/);
  });

  it('names each wrong variable by its name, one line per problem', () => {
    assert.equal(configError({ PORT: '70000' }), 'Invalid configuration:\n  - PORT must be <= 65535');
    assert.equal(
      configError({ PORT: 'x', DATA_DIR: '.data' }, { temporal: true }),
      'Invalid configuration:\n  - PORT must be integer\n  - TEMPORAL_ADDRESS is required (host:7233)',
    );
  });

  it('has safe defaults: development, no private or http receivers, no codec without a token', () => {
    const config = loadConfig({});
    assert.deepEqual(
      {
        NODE_ENV: config.NODE_ENV,
        DATA_DIR: config.DATA_DIR,
        TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
        TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
        ALLOW_PRIVATE_WEBHOOK_URLS: config.ALLOW_PRIVATE_WEBHOOK_URLS,
        ALLOW_HTTP_WEBHOOK_URLS: config.ALLOW_HTTP_WEBHOOK_URLS,
        DEV_CODEC_WITHOUT_TOKEN: config.DEV_CODEC_WITHOUT_TOKEN,
        DELIVERY_FIRST_ATTEMPT_LOCAL: config.DELIVERY_FIRST_ATTEMPT_LOCAL,
        LOG_PRETTY: config.LOG_PRETTY,
      },
      {
        NODE_ENV: 'development',
        DATA_DIR: '.data',
        TEMPORAL_NAMESPACE: 'default',
        TEMPORAL_TASK_QUEUE: 'webhooks',
        ALLOW_PRIVATE_WEBHOOK_URLS: false,
        ALLOW_HTTP_WEBHOOK_URLS: false,
        DEV_CODEC_WITHOUT_TOKEN: false,
        DELIVERY_FIRST_ATTEMPT_LOCAL: true,
        LOG_PRETTY: undefined,
      },
    );
    const flags = loadConfig({
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      ALLOW_HTTP_WEBHOOK_URLS: 'true',
      DELIVERY_FIRST_ATTEMPT_LOCAL: 'false',
      LOG_PRETTY: 'false',
    });
    assert.deepEqual(
      [flags.ALLOW_PRIVATE_WEBHOOK_URLS, flags.ALLOW_HTTP_WEBHOOK_URLS, flags.DELIVERY_FIRST_ATTEMPT_LOCAL],
      [true, true, false],
    );
    assert.equal(flags.LOG_PRETTY, false);
    assert.match(
      configError({ ALLOW_PRIVATE_WEBHOOK_URLS: 'yes please' }),
      /ALLOW_PRIVATE_WEBHOOK_URLS must be boolean/,
    );
  });

  it('takes every NODE_ENV and LOG_LEVEL it documents', () => {
    const keys = { WEBHOOK_SECRET_KEY: 'a'.repeat(64), PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS };
    for (const NODE_ENV of ['development', 'test', 'production'])
      assert.equal(loadConfig({ ...keys, NODE_ENV }).NODE_ENV, NODE_ENV);
    assert.match(configError({ NODE_ENV: 'prod' }), /NODE_ENV must be equal to one of the allowed values/);
    for (const LOG_LEVEL of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      assert.equal(loadConfig({ LOG_LEVEL }).LOG_LEVEL, LOG_LEVEL);
  });

  it('refuses a malformed key, URL, origin list or short token, and takes a well-formed one', () => {
    const hexKey = 'a'.repeat(64);
    const base64Key = Buffer.alloc(32, 7).toString('base64');
    const wellFormed = {
      DATABASE_URL: 'postgresql://u:p@db.example:5432/webhooks',
      WEBHOOK_SECRET_KEY: base64Key,
      WEBHOOK_SECRET_KEYS: `k2:${hexKey},k1:${base64Key}`,
      PAYLOAD_ENCRYPTION_KEYS: `p2:${base64Key},${PAYLOAD_KEYS}`,
      ALERT_WEBHOOK_URL: 'https://alerts.example/hook',
      ALERT_WEBHOOK_SECRET: 's'.repeat(16),
      METRICS_TOKEN: 't'.repeat(16),
      CODEC_CORS_ORIGINS: 'https://temporal-ui.example,http://localhost:8233',
      PUBLIC_BASE_URL: 'https://api.example/base',
      PORTAL_FRAME_ANCESTORS: 'https://app.example,https://admin.example',
    };
    assert.doesNotThrow(() => loadConfig(wellFormed));
    const malformed: Record<keyof typeof wellFormed, string> = {
      DATABASE_URL: 'mysql://u:p@db.example/webhooks',
      WEBHOOK_SECRET_KEY: 'a'.repeat(63),
      WEBHOOK_SECRET_KEYS: `k1:${hexKey},k2`,
      PAYLOAD_ENCRYPTION_KEYS: hexKey,
      ALERT_WEBHOOK_URL: 'ftp://alerts.example/hook',
      ALERT_WEBHOOK_SECRET: 's'.repeat(15),
      METRICS_TOKEN: 't'.repeat(15),
      CODEC_CORS_ORIGINS: 'https://temporal-ui.example, https://other.example',
      PUBLIC_BASE_URL: 'https://api.example/?next=x',
      PORTAL_FRAME_ANCESTORS: "https://app.example;script-src 'unsafe-inline'",
    };
    for (const [name, value] of Object.entries(malformed)) {
      const message = configError({ ...wellFormed, [name]: value });
      assert.equal(message.split('\n').length, 2, `${name}: only its own problem\n${message}`);
      assert.match(message, new RegExp(`^Invalid configuration:\\n  - ${name} must`), name);
    }
  });

  it('refuses settings that only work together when one is missing', () => {
    assert.match(configError({}, { temporal: true }), /TEMPORAL_ADDRESS is required/);
    assert.equal(
      loadConfig({ TEMPORAL_ADDRESS: 'temporal:7233' }, { temporal: true }).TEMPORAL_ADDRESS,
      'temporal:7233',
    );
    const pair = /TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH go together/;
    assert.match(configError({ TEMPORAL_TLS_CERT_PATH: '/tls/client.pem' }), pair);
    assert.match(configError({ TEMPORAL_TLS_KEY_PATH: '/tls/client.key' }), pair);
    assert.doesNotThrow(() =>
      loadConfig({ TEMPORAL_TLS_CERT_PATH: '/tls/client.pem', TEMPORAL_TLS_KEY_PATH: '/tls/client.key' }),
    );
    assert.match(
      configError({ ALERT_WEBHOOK_URL: 'https://alerts.example/hook' }),
      /ALERT_WEBHOOK_SECRET is required with ALERT_WEBHOOK_URL/,
    );
  });

  it('in production refuses the codec without a token, a second key with the same id, and an unanchored https', () => {
    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS,
    };
    assert.match(
      configError({ ...production, DEV_CODEC_WITHOUT_TOKEN: 'true' }),
      /DEV_CODEC_WITHOUT_TOKEN must not be set in production/,
    );
    assert.equal(loadConfig({ DEV_CODEC_WITHOUT_TOKEN: 'true' }).DEV_CODEC_WITHOUT_TOKEN, true, 'development');
    assert.equal(
      configError({ ...production, PAYLOAD_ENCRYPTION_KEYS: `${PAYLOAD_KEYS},${PAYLOAD_KEYS}` }),
      'Invalid configuration:\n  - PAYLOAD_ENCRYPTION_KEYS has a key id twice',
    );
    // The key ring replaces the single key; the payload keys are still needed.
    const ring = { NODE_ENV: 'production', WEBHOOK_SECRET_KEYS: `k1:${'b'.repeat(64)}` };
    assert.equal(
      configError(ring),
      'Invalid configuration:\n  - PAYLOAD_ENCRYPTION_KEYS is required in production (key-id:base64 of 32 bytes, e.g. k1:$(openssl rand -base64 32))',
    );
    assert.doesNotThrow(() => loadConfig({ ...ring, PAYLOAD_ENCRYPTION_KEYS: PAYLOAD_KEYS }));
    const hidden = 'http://idp.example/jwks?next=https://idp.example';
    const jwks = { JWT_JWKS_URI: hidden, JWT_ISSUER: 'https://idp.example/', JWT_AUDIENCE: 'webhooks' };
    assert.match(configError({ ...production, ...jwks }), /JWT_JWKS_URI must be an https:\/\/ URL in production/);
    const alert = { ALERT_WEBHOOK_URL: hidden, ALERT_WEBHOOK_SECRET: 's'.repeat(16) };
    assert.match(configError({ ...production, ...alert }), /ALERT_WEBHOOK_URL must be an https:\/\/ URL in production/);
  });

  it('takes each limit at its bound and refuses it one past', () => {
    const atBound = {
      DELIVERY_INITIAL_INTERVAL_MS: '5000',
      DELIVERY_MAX_INTERVAL_MS: '5000',
      WEBHOOK_TIMEOUT_MS: '10000',
      DELIVERY_GIVE_UP_AFTER_MS: String(2 * 10_000 + 5_000),
      HTTP_HEADERS_TIMEOUT_MS: '30000',
      HTTP_REQUEST_TIMEOUT_MS: '30000',
      WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '8',
      WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: '8',
      WORKER_MAX_CONCURRENT_ACTIVITIES: '5',
      WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: '5',
      BREAKER_OPEN_MS: '30000',
      BREAKER_MAX_OPEN_MS: '30000',
    };
    assert.doesNotThrow(() => loadConfig(atBound));
    const past: [Partial<typeof atBound>, RegExp][] = [
      [{ DELIVERY_MAX_INTERVAL_MS: '4999' }, /DELIVERY_MAX_INTERVAL_MS must be at least DELIVERY_INITIAL_INTERVAL_MS/],
      [{ DELIVERY_GIVE_UP_AFTER_MS: '24999' }, /DELIVERY_GIVE_UP_AFTER_MS must leave room for two attempts/],
      [{ HTTP_HEADERS_TIMEOUT_MS: '30001' }, /HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS/],
      [{ WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: '9' }, /WORKFLOW_TASK_POLLS must not exceed/],
      [{ WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: '6' }, /ACTIVITY_TASK_POLLS must not exceed/],
      [{ BREAKER_MAX_OPEN_MS: '29999' }, /BREAKER_MAX_OPEN_MS must be at least BREAKER_OPEN_MS/],
    ];
    for (const [change, problem] of past) assert.match(configError({ ...atBound, ...change }), problem);
  });

  it('stops the API server at start-up with a message naming the missing variable', function () {
    this.timeout(30_000);
    const result = spawnSync('npx', ['tsx', 'api/server.ts'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info' },
      encoding: 'utf8',
      timeout: 25_000,
    });
    assert.notEqual(result.status, 0);
    assert.match(result.stdout + result.stderr, /DATABASE_URL is required/);
    assert.match(result.stdout + result.stderr, /JWT_SECRET or JWT_JWKS_URI is required/);
  });
});

// No Docker engine runs here: these tests read docker-compose.yml and the Dockerfile so neither can rot unnoticed.
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Ajv from 'ajv';
import { isMap, isNode, isSeq, parse, parseDocument } from 'yaml';
import { loadConfig } from '../../common/config';
import { temporalCliPath } from '../../dev/temporal-binaries';
import * as production from '../production/topology';
import * as productionUi from '../production/temporal-ui';
import * as cluster from '../production/temporal-cluster';

const root = join(__dirname, '..', '..');
const run = promisify(execFile);

interface Healthcheck {
  test: string[] | string;
  interval?: string;
  retries?: number;
}
interface Service {
  image?: string;
  build?: string | { context: string; dockerfile?: string };
  command?: string[] | string;
  entrypoint?: string[] | string;
  environment?: Record<string, string | number | boolean>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: Healthcheck;
  container_name?: string;
  volumes?: string[];
  init?: boolean;
  profiles?: string[];
  secrets?: { source: string; target: string }[];
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
  secrets?: Record<string, { environment?: string; file?: string }>;
}

const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as ComposeFile;
const service = (name: string): Service => {
  const found = compose.services[name];
  assert.ok(found, `service ${name} is missing`);
  return found;
};

/** What a user puts in .env for production (see docs/operators.md, "Production with docker-compose"). */
const userEnv = {
  POSTGRES_PASSWORD: 'c0ffee',
  // The database roles' passwords (docs/operators.md, "Database roles").
  DATABASE_OWNER_PASSWORD: '0a'.repeat(12),
  DATABASE_API_PASSWORD: '0b'.repeat(12),
  DATABASE_WORKER_PASSWORD: '0c'.repeat(12),
  TEMPORAL_DB_PASSWORD: '0d'.repeat(12),
  WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
  JWT_SECRET: 'j'.repeat(40),
  PAYLOAD_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
  AUDIT_HMAC_KEYS: `a1:${'cd'.repeat(32)}`,
  AUDIT_SIGNING_KEY: `s1:${Buffer.alloc(32, 9).toString('base64')}`,
  PERSON_HASH_KEY: 'ef'.repeat(32),
  METRICS_TOKEN: 'm'.repeat(24),
  PUBLIC_BASE_URL: 'https://hooks.example.com',
  // The identity provider (docs/operators.md, "Your identity provider").
  TEMPORAL_JWKS_URI: 'https://idp.example.com/jwks',
  TEMPORAL_OAUTH_TOKEN_URL: 'https://idp.example.com/token',
  TEMPORAL_OAUTH_RESOURCE: 'urn:webhooks:temporal',
  WEBHOOKS_OAUTH_CLIENT_ID: 'webhooks',
  WEBHOOKS_OAUTH_CLIENT_SECRET: 's'.repeat(24),
  TEMPORAL_ADMIN_OAUTH_CLIENT_ID: 'admin-tools',
  TEMPORAL_ADMIN_OAUTH_CLIENT_SECRET: 'a'.repeat(24),
  TEMPORAL_AUTH_PROVIDER_URL: 'https://idp.example.com',
  TEMPORAL_AUTH_CLIENT_ID: 'temporal-ui',
  TEMPORAL_AUTH_CLIENT_SECRET: 'u'.repeat(24),
  TEMPORAL_AUTH_CALLBACK_URL: 'http://localhost:8080/auth/sso/callback',
  TEMPORAL_CODEC_ENDPOINT: 'https://hooks.example.com/codec',
};

/**
 * Docker Compose variable interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error},
 * ${VAR?error}. Throws like `docker compose` on a missing required variable; reports references to unset ones.
 */
function interpolate(text: string, env: Record<string, string>, unset: string[] = []): string {
  return text.replace(
    /\$\$|\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}/g,
    (match, bare: string | undefined, name: string | undefined, op: string | undefined, arg: string | undefined) => {
      if (match === '$$') return '$';
      const key = (bare ?? name)!;
      const value = env[key];
      const missing = op?.startsWith(':') ? !value : value === undefined;
      if (op?.endsWith('?') && missing) throw new Error(`required variable ${key} is missing a value: ${arg ?? ''}`);
      if (op?.endsWith('-') && missing) return arg ?? '';
      if (value === undefined) unset.push(key);
      return value ?? '';
    },
  );
}

function resolvedEnvironment(name: string, env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(service(name).environment ?? {}).map(([key, value]) => [key, interpolate(String(value), env)]),
  );
}

const healthTest = (check: Healthcheck | undefined): string =>
  Array.isArray(check?.test) ? check.test.join(' ') : (check?.test ?? '');

describe('docker-compose.yml', () => {
  it('is valid against the Compose Specification schema (compose-spec/compose-spec, schema/compose-spec.json)', () => {
    // The schema file is vendored in test/fixtures (Apache-2.0); `docker compose config` validates with the same one.
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false, validateSchema: false });
    const validate = ajv.compile(JSON.parse(readFileSync(join(root, 'test', 'fixtures', 'compose-spec.json'), 'utf8')));
    assert.ok(validate(compose), JSON.stringify(validate.errors, null, 2));
    assert.ok(!validate({ services: { api: { image: 'x', imagee: 'typo' } } }), 'the schema refuses unknown keys');
  });

  it('has postgres, temporal with its schema and init steps, temporal-ui, api and worker, with pinned image tags', () => {
    assert.deepEqual(Object.keys(compose.services).sort(), [
      'api',
      'grafana',
      'jaeger',
      'migrate',
      'postgres',
      'prometheus',
      'temporal',
      'temporal-init',
      'temporal-schema',
      'temporal-ui',
      'worker',
    ]);
    const expected: Record<string, RegExp> = {
      postgres: /^postgres:\d+(\.\d+)+/,
      temporal: /^temporalio\/server:\d+\.\d+\.\d+$/,
      'temporal-schema': /^temporalio\/admin-tools:\d+\.\d+\.\d+$/,
      'temporal-init': /^temporalio\/admin-tools:\d+\.\d+\.\d+$/,
      'temporal-ui': /^temporalio\/ui:\d+\.\d+\.\d+$/,
      prometheus: /^prom\/prometheus:v\d+\.\d+\.\d+$/,
      grafana: /^grafana\/grafana:\d+\.\d+\.\d+$/,
      jaeger: /^jaegertracing\/jaeger:\d+\.\d+\.\d+$/,
    };
    for (const [name, pattern] of Object.entries(expected)) assert.match(service(name).image ?? '', pattern, name);
    for (const [name, { image }] of Object.entries(compose.services))
      assert.doesNotMatch(image ?? '', /:latest$|^[^:]+$/, `${name} pins its image tag`);
  });

  it('runs the Temporal UI the pinned CLI embeds, as docs/operators.md names it', async () => {
    assert.equal(service('temporal-ui').image, `temporalio/ui:${production.TEMPORAL_UI_VERSION}`);
    // The UI server test:production builds and signs in through (scripts/ensure-temporal-ui.sh) is that version.
    assert.equal(productionUi.TEMPORAL_UI_SERVER_VERSION, production.TEMPORAL_UI_VERSION);
    const cli = temporalCliPath();
    assert.ok(cli, 'the Temporal CLI is installed (scripts/ensure-temporal-binaries.sh)');
    const { stdout } = await run(cli, ['--version']);
    assert.ok(stdout.includes(`UI ${production.TEMPORAL_UI_VERSION})`), `the CLI embeds it: ${stdout}`);
    const operators = readFileSync(join(root, 'docs', 'operators.md'), 'utf8');
    assert.deepEqual(
      [...new Set(operators.match(/temporalio\/ui:[\w.-]+/g))],
      [`temporalio/ui:${production.TEMPORAL_UI_VERSION}`],
    );
  });

  it('postgres keeps its data in a volume and reports health with pg_isready', () => {
    const postgres = service('postgres');
    assert.ok(postgres.volumes?.some((v) => v.endsWith(':/var/lib/postgresql/data')));
    assert.ok(Object.keys(compose.volumes ?? {}).includes('postgres-data'));
    assert.match(healthTest(postgres.healthcheck), /pg_isready/);
    assert.equal(postgres.ports, undefined, 'the database is not published on the host');
    assert.equal(resolvedEnvironment('postgres', userEnv).POSTGRES_DB, 'webhooks');
  });

  it('temporal persists to that PostgreSQL, whose schema a one-shot step sets up first with temporal-sql-tool', () => {
    const env = resolvedEnvironment('temporal', userEnv);
    const postgresEnv = resolvedEnvironment('postgres', userEnv);
    assert.equal(env.DB, 'postgres12');
    assert.equal(env.POSTGRES_SEEDS, 'postgres');
    assert.equal(env.DB_PORT, '5432');
    // Its own role, never the superuser: Temporal's databases are the temporal role's (deploy/postgres/init-roles.sh).
    assert.notEqual(env.POSTGRES_USER, postgresEnv.POSTGRES_USER);
    assert.equal(env.POSTGRES_USER, production.DATABASE_ROLES.temporal);
    assert.equal(env.POSTGRES_PWD, userEnv.TEMPORAL_DB_PASSWORD);
    assert.deepEqual(service('temporal').depends_on, {
      'temporal-schema': { condition: 'service_completed_successfully' },
    });
    const schema = service('temporal-schema');
    const schemaEnv = resolvedEnvironment('temporal-schema', userEnv);
    assert.deepEqual(schema.command, ['sh', '/deploy/temporal-schema.sh']);
    assert.ok(schema.volumes?.includes('./deploy:/deploy:ro'));
    assert.deepEqual(schema.depends_on, { postgres: { condition: 'service_healthy' } });
    assert.equal(schemaEnv.SQL_HOST, 'postgres');
    assert.equal(schemaEnv.SQL_USER, production.DATABASE_ROLES.temporal);
    assert.equal(schemaEnv.SQL_PASSWORD, userEnv.TEMPORAL_DB_PASSWORD);
    assert.equal(schemaEnv.DBNAME, env.DBNAME, 'the schema step and the server name the same databases');
    assert.equal(schemaEnv.VISIBILITY_DBNAME, env.VISIBILITY_DBNAME);
    assert.match(readFileSync(join(root, 'deploy', 'temporal-schema.sh'), 'utf8'), /update-schema --schema-name/);
  });

  it('an init step registers the namespace, ProjectId, WebhookType and PersonHash (Keyword) once Temporal serves', () => {
    const init = service('temporal-init');
    assert.deepEqual(init.depends_on, { temporal: { condition: 'service_started' } });
    assert.deepEqual(init.command, ['sh', '/deploy/temporal-namespace.sh']);
    const script = readFileSync(join(root, 'deploy', 'temporal-namespace.sh'), 'utf8');
    assert.match(script, /operator cluster health/);
    assert.match(script, /operator namespace create/);
    assert.match(script, /for name in ProjectId WebhookType PersonHash; do/);
    assert.match(script, /--type Keyword/);
    assert.equal(resolvedEnvironment('temporal-init', userEnv).TEMPORAL_ADDRESS, 'temporal:7233');
  });

  it('runs the Temporal server version, dynamic-config file and variable names that test:production proves', () => {
    assert.equal(service('temporal').image, `temporalio/server:${production.TEMPORAL_SERVER_VERSION}`);
    for (const name of ['temporal-schema', 'temporal-init'])
      assert.equal(service(name).image, `temporalio/admin-tools:${production.TEMPORAL_SERVER_VERSION}`, name);
    const temporal = service('temporal');
    const mount = temporal.volumes?.find((v) => v.includes('/dynamicconfig/'));
    assert.equal(mount?.split(':')[0], './temporal-dynamic-config.yaml');
    assert.equal(join(root, mount.split(':')[0]!), production.DYNAMIC_CONFIG_FILE);
    assert.equal(
      mount?.split(':')[1],
      `/etc/temporal/${resolvedEnvironment('temporal', userEnv).DYNAMIC_CONFIG_FILE_PATH}`,
    );

    const certs = {
      dir: '/c',
      ca: '/c/ca.pem',
      internodeCa: '/c/internode-ca.pem',
      of: (n: string) => ({ cert: `/c/${n}.pem`, key: `/c/${n}.key` }),
    };
    const pg = production.postgresServerOf('postgres://u:p@h:5432/d');
    const databases = { DBNAME: 'temporal', VISIBILITY_DBNAME: 'temporal_visibility' };
    const ports = Object.fromEntries(
      production.TEST_ONLY_SERVER_VARIABLES.map((n) => [n, '1']),
    ) as unknown as production.TemporalPorts;
    const app: production.AppSettings = {
      apiDatabaseUrl: 'postgres://u:p@h/d',
      workerDatabaseUrl: 'postgres://w:p@h/d',
      temporalAddress: 'h:7233',
      certs,
      webhookSecretKeys: 'w1:k',
      payloadEncryptionKeys: 'p1:k',
      extraCaCerts: '/c/ca.pem',
      oauth: { tokenUrl: 'https://i/token', clientId: 'c', clientSecret: 's', resource: 'urn:r' },
    };
    const api = { port: 1, jwksUri: 'https://i', issuer: 'i', audience: 'a', metricsToken: 't' };
    const auth = { jwksUri: 'https://i/jwks', jwksCa: '/c/idp-ca.pem' };
    const names = (env: object, except: string[] = []) =>
      Object.keys(env)
        .filter((n) => !except.includes(n))
        .sort();
    const composeNames = (name: string) => names(service(name).environment ?? {});
    assert.deepEqual(
      names(
        production.temporalServerEnvironment(pg, databases, certs, ports, auth),
        production.TEST_ONLY_SERVER_VARIABLES,
      ),
      composeNames('temporal'),
    );
    assert.deepEqual(names(production.schemaEnvironment(pg, databases)), composeNames('temporal-schema'));
    assert.deepEqual(names(production.migrateEnvironment('postgres://o:p@h/d')), composeNames('migrate'));
    assert.deepEqual(
      names({ ...production.initRolesEnvironment(pg, 'd', { owner: 'o', api: 'a', worker: 'w', temporal: 't' }) }),
      names(service('postgres').environment ?? {}, ['POSTGRES_PASSWORD']),
    );
    assert.deepEqual(
      names(production.namespaceSetupEnvironment('h:7233', certs, app.oauth)),
      composeNames('temporal-init'),
    );
    const ui = productionUi.temporalUiEnvironment({
      temporalAddress: 'h:7233',
      certs,
      port: 1,
      codecEndpoint: 'https://a/codec',
      oidc: { issuer: 'https://i', clientId: 'c', clientSecret: 's', callbackUrl: 'http://u/auth/sso/callback' },
      providerCa: '/c/idp-ca.pem',
    });
    assert.deepEqual(names(ui, productionUi.TEST_ONLY_UI_VARIABLES), composeNames('temporal-ui'));
    // API and worker: every variable the test sets is one compose sets (compose has more optional ones).
    for (const [name, env] of [
      ['api', production.apiEnvironment(app, api)],
      ['worker', production.workerEnvironment(app)],
    ] as const) {
      const missing = names(env, production.TEST_ONLY_APP_VARIABLES).filter((n) => !composeNames(name).includes(n));
      assert.deepEqual(missing, [], `${name}: variables test:production sets that compose does not`);
    }
  });

  it('every client of Temporal speaks mTLS with a certificate from the operator-provided folder', () => {
    const mounted = (name: string) => service(name).volumes?.includes('${TEMPORAL_CERTS_DIR:-./certs}:/certs:ro');
    for (const name of ['temporal', 'temporal-init', 'temporal-ui', 'api', 'worker']) assert.ok(mounted(name), name);
    const server = resolvedEnvironment('temporal', userEnv);
    assert.equal(server.TEMPORAL_TLS_REQUIRE_CLIENT_AUTH, 'true');
    assert.equal(server.TEMPORAL_TLS_FRONTEND_CERT, '/certs/temporal.pem');
    assert.equal(server.TEMPORAL_TLS_CLIENT1_CA_CERT, '/certs/ca.pem');
    for (const name of ['api', 'worker']) {
      const config = loadConfig(resolvedEnvironment(name, userEnv));
      assert.equal(config.TEMPORAL_TLS_CERT_PATH, '/certs/webhooks.pem', name);
      assert.equal(config.TEMPORAL_TLS_KEY_PATH, '/certs/webhooks.key', name);
      assert.equal(config.TEMPORAL_TLS_CA_PATH, '/certs/internode-ca.pem', name);
      assert.equal(config.TEMPORAL_TLS_SERVER_NAME, 'temporal', name);
    }
    const ui = resolvedEnvironment('temporal-ui', userEnv);
    assert.equal(ui.TEMPORAL_TLS_CERT, '/certs/temporal-ui.pem');
    assert.equal(ui.TEMPORAL_TLS_CA, '/certs/internode-ca.pem', 'the UI knows the server by the internode CA');
    assert.equal(ui.TEMPORAL_TLS_ENABLE_HOST_VERIFICATION, 'true');
    assert.equal(resolvedEnvironment('temporal-init', userEnv).TEMPORAL_TLS_CLIENT_CERT_PATH, '/certs/admin-tools.pem');
  });

  it('keeps the internode CA and the clients’ CA apart exactly as test:production does, certificate by certificate', () => {
    // The suite's certificates, placed where compose mounts them: every TLS value must then be compose's.
    const certs: production.Certificates = {
      dir: '/certs',
      ca: '/certs/ca.pem',
      internodeCa: '/certs/internode-ca.pem',
      of: (n: string) => ({ cert: `/certs/${n}.pem`, key: `/certs/${n}.key` }),
    };
    const tls = (env: Record<string, string>) =>
      Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith('TEMPORAL_TLS_')));
    const pg = production.postgresServerOf('postgres://u:p@h:5432/d');
    const databases = { DBNAME: 'temporal', VISIBILITY_DBNAME: 'temporal_visibility' };
    const ports = {} as production.TemporalPorts;
    const server = tls(resolvedEnvironment('temporal', userEnv));
    const auth = { jwksUri: 'https://i/jwks', jwksCa: '/certs/idp-ca.pem' };
    assert.deepEqual(server, tls(production.temporalServerEnvironment(pg, databases, certs, ports, auth)));
    // Internode ports (the internal frontend's too) trust the internode CA alone; the frontend the clients' CA alone.
    assert.equal(server.TEMPORAL_TLS_SERVER_CA_CERT, certs.internodeCa);
    assert.deepEqual([server.TEMPORAL_TLS_CLIENT1_CA_CERT, server.TEMPORAL_TLS_CLIENT2_CA_CERT], [certs.ca, certs.ca]);
    assert.deepEqual(
      tls(resolvedEnvironment('temporal-init', userEnv)),
      tls(production.adminToolsEnvironment('temporal:7233', certs)),
    );
    const app = production.appEnvironment({
      apiDatabaseUrl: 'postgres://u:p@h/d',
      workerDatabaseUrl: 'postgres://w:p@h/d',
      temporalAddress: 'temporal:7233',
      certs,
      webhookSecretKeys: 'w1:k',
      payloadEncryptionKeys: 'p1:k',
      extraCaCerts: '',
      oauth: { tokenUrl: 'https://i/token', clientId: 'c', clientSecret: 's', resource: 'urn:r' },
    });
    for (const name of ['api', 'worker']) assert.deepEqual(tls(resolvedEnvironment(name, userEnv)), tls(app), name);
  });

  it('locks every door as test:production proves: the authorizer, the internal frontend, tokens, the UI signed in', () => {
    const certs = {
      dir: '/certs',
      ca: '/certs/ca.pem',
      internodeCa: '/certs/internode-ca.pem',
      of: (n: string) => ({ cert: `/certs/${n}.pem`, key: `/certs/${n}.key` }),
    };
    const pg = production.postgresServerOf('postgres://u:p@h:5432/d');
    const auth = { jwksUri: userEnv.TEMPORAL_JWKS_URI, jwksCa: '' };
    const suite = production.temporalServerEnvironment(
      pg,
      { DBNAME: '', VISIBILITY_DBNAME: '' },
      certs,
      {} as never,
      auth,
    );
    const server = resolvedEnvironment('temporal', userEnv);
    for (const name of [
      'TEMPORAL_AUTH_AUTHORIZER',
      'TEMPORAL_AUTH_CLAIM_MAPPER',
      'TEMPORAL_JWT_KEY_SOURCE1',
      'USE_INTERNAL_FRONTEND',
      'TEMPORAL_SERVICES',
    ])
      assert.equal(server[name], suite[name], name);
    assert.equal(server.TEMPORAL_AUTH_AUTHORIZER, 'default');
    assert.equal(server.TEMPORAL_AUTH_CLAIM_MAPPER, 'default');
    assert.match(server.TEMPORAL_SERVICES!, /(^|,)internal-frontend(,|$)/);
    assert.ok(!('TEMPORAL_ALLOW_NO_AUTH' in server), 'no TEMPORAL_ALLOW_NO_AUTH');
    assert.throws(
      () => resolvedEnvironment('temporal', { ...userEnv, TEMPORAL_JWKS_URI: '' }),
      /TEMPORAL_JWKS_URI/,
      'no server without the JWKS of an identity provider',
    );
    // The API and the workers get their tokens by client credentials; the namespace set-up with its admin client.
    for (const name of ['api', 'worker']) {
      const config = loadConfig(resolvedEnvironment(name, userEnv));
      assert.equal(config.TEMPORAL_OAUTH_TOKEN_URL, userEnv.TEMPORAL_OAUTH_TOKEN_URL, name);
      assert.equal(config.TEMPORAL_OAUTH_CLIENT_ID, userEnv.WEBHOOKS_OAUTH_CLIENT_ID, name);
      assert.equal(config.TEMPORAL_OAUTH_RESOURCE, userEnv.TEMPORAL_OAUTH_RESOURCE, name);
    }
    const init = resolvedEnvironment('temporal-init', userEnv);
    assert.equal(init.TEMPORAL_OAUTH_CLIENT_ID, userEnv.TEMPORAL_ADMIN_OAUTH_CLIENT_ID);
    assert.match(readFileSync(join(root, 'deploy', 'temporal-namespace.sh'), 'utf8'), /grant_type=client_credentials/);
    // The UI: signed in, read-only, and decoding through an https codec endpoint with the access token, as the suite.
    const ui = resolvedEnvironment('temporal-ui', userEnv);
    const suiteUi = productionUi.temporalUiEnvironment({
      temporalAddress: '',
      certs,
      port: 1,
      codecEndpoint: '',
      oidc: { issuer: '', clientId: '', clientSecret: '', callbackUrl: '' },
      providerCa: '',
    });
    for (const name of [
      'TEMPORAL_AUTH_ENABLED',
      'TEMPORAL_AUTH_TYPE',
      'TEMPORAL_CODEC_PASS_ACCESS_TOKEN',
      'TEMPORAL_DISABLE_WRITE_ACTIONS',
      'TEMPORAL_AUTH_SCOPES',
      'TEMPORAL_TLS_ENABLE_HOST_VERIFICATION',
    ])
      assert.equal(ui[name], suiteUi[name], name);
    assert.match(ui.TEMPORAL_CODEC_ENDPOINT!, /^https:\/\//);
    assert.throws(
      () => resolvedEnvironment('temporal-ui', { ...userEnv, TEMPORAL_CODEC_ENDPOINT: '' }),
      /TEMPORAL_CODEC_ENDPOINT/,
    );
  });

  it('temporal-ui serves on 127.0.0.1:8080 only, against the temporal service', () => {
    const ui = service('temporal-ui');
    assert.deepEqual(
      ui.ports?.map((p) => interpolate(p, {})),
      ['127.0.0.1:8080:8080'],
    );
    assert.equal(resolvedEnvironment('temporal-ui', userEnv).TEMPORAL_ADDRESS, 'temporal:7233');
    assert.deepEqual(ui.depends_on, { 'temporal-init': { condition: 'service_completed_successfully' } });
  });

  it('temporal-ui is read-only and decodes through the API codec endpoint with the signed-in operator token', () => {
    const ui = resolvedEnvironment('temporal-ui', userEnv);
    assert.equal(ui.TEMPORAL_DISABLE_WRITE_ACTIONS, 'true');
    assert.equal(ui.TEMPORAL_CODEC_ENDPOINT, userEnv.TEMPORAL_CODEC_ENDPOINT);
    assert.equal(ui.TEMPORAL_CODEC_PASS_ACCESS_TOKEN, 'true');
    const api = loadConfig(resolvedEnvironment('api', userEnv));
    assert.equal(api.CODEC_CORS_ORIGINS, 'http://localhost:8080', 'the API lets the UI origin call /codec');
    const signedIn = resolvedEnvironment('temporal-ui', {
      ...userEnv,
      TEMPORAL_AUTH_ENABLED: 'true',
      TEMPORAL_AUTH_PROVIDER_URL: 'https://idp.example',
    });
    assert.equal(signedIn.TEMPORAL_AUTH_ENABLED, 'true');
    assert.equal(signedIn.TEMPORAL_AUTH_PROVIDER_URL, 'https://idp.example');
  });

  it('publishes only the API on the network; the UIs, Prometheus, Grafana and Jaeger on loopback; nothing else', () => {
    const published = Object.entries(compose.services)
      .filter(([, s]) => s.ports?.length)
      .map(([name, s]) => [name, s.ports!.map((p) => interpolate(p, {}))]);
    assert.deepEqual(Object.fromEntries(published), {
      'temporal-ui': ['127.0.0.1:8080:8080'],
      api: ['3000:3000'],
      prometheus: ['127.0.0.1:9090:9090'],
      grafana: ['127.0.0.1:3001:3000'],
      jaeger: ['127.0.0.1:16686:16686'],
    });
  });

  it("the observability profile's Jaeger: the version the tracing test builds, where the services' OTLP can reach it", () => {
    const jaegerScript = readFileSync(join(root, 'scripts', 'ensure-jaeger.sh'), 'utf8');
    // Jaeger's releases pair v1.76.0 (the Go module) with v2.13.0 (the image).
    assert.match(jaegerScript, /^JAEGER_VERSION=v1\.76\.0$/m);
    assert.equal(service('jaeger').image, 'jaegertracing/jaeger:2.13.0');
    // Tracing is off unless the operator names an endpoint; with the profile's Jaeger it is valid for every service.
    for (const name of ['api', 'worker']) {
      assert.equal(resolvedEnvironment(name, userEnv).OTEL_EXPORTER_OTLP_ENDPOINT, '');
      const traced = resolvedEnvironment(name, { ...userEnv, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' });
      assert.equal(traced.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://jaeger:4318');
      assert.doesNotThrow(() => loadConfig(traced), name);
    }
  });

  it('the observability profile: Prometheus with the shipped rules and scrape config, Grafana with the dashboard', () => {
    const inProfile = Object.entries(compose.services)
      .filter(([, s]) => s.profiles?.includes('observability'))
      .map(([name]) => name);
    assert.deepEqual(inProfile.sort(), ['grafana', 'jaeger', 'prometheus']);
    for (const [name, s] of Object.entries(compose.services))
      if (!inProfile.includes(name)) assert.equal(s.profiles, undefined, `${name} starts without a profile`);

    /** The host path (relative to the compose file) mounted at `target`, which must exist in the repository. */
    const mountedAt = (name: string, target: string) => {
      const mount = service(name).volumes?.find((v) => v.split(':')[1] === target);
      assert.ok(mount, `${name} mounts something at ${target}`);
      const [source, , mode] = mount.split(':');
      assert.equal(mode, 'ro', `${name} mounts ${target} read-only`);
      assert.ok(existsSync(join(root, source!)), `${source} exists`);
      return join(root, source!);
    };

    // Prometheus: the shipped configuration and the rules file it names, beside it as it expects.
    const prometheus = service('prometheus');
    assert.ok(
      prometheus.command?.includes('--config.file=/etc/prometheus/prometheus.yml'),
      JSON.stringify(prometheus.command),
    );
    assert.equal(
      mountedAt('prometheus', '/etc/prometheus/prometheus.yml'),
      join(root, 'deploy/prometheus/prometheus.yml'),
    );
    const config = parse(readFileSync(join(root, 'deploy/prometheus/prometheus.yml'), 'utf8')) as {
      rule_files: string[];
      scrape_configs: {
        job_name: string;
        authorization?: { credentials_file: string };
        static_configs?: { targets: string[] }[];
        dns_sd_configs?: { names: string[]; port: number }[];
      }[];
    };
    for (const rules of config.rule_files)
      assert.equal(
        mountedAt('prometheus', `/etc/prometheus/${rules}`),
        join(root, 'deploy/prometheus/webhook-alerts.rules.yml'),
      );
    // The scrape targets are this file's services: the API's port and the worker's WORKER_METRICS_PORT.
    const [apiJob, workerJob] = config.scrape_configs;
    assert.deepEqual(apiJob?.static_configs?.[0]?.targets, [`api:${resolvedEnvironment('api', userEnv).PORT}`]);
    assert.deepEqual(workerJob?.dns_sd_configs?.[0]?.names, ['worker']);
    assert.equal(
      String(workerJob?.dns_sd_configs?.[0]?.port),
      resolvedEnvironment('worker', userEnv).WORKER_METRICS_PORT,
    );
    // The API's bearer token reaches the file the configuration reads, from the API's own METRICS_TOKEN.
    const secret = prometheus.secrets?.find(
      (s) => s.target === `/etc/prometheus/${apiJob?.authorization?.credentials_file}`,
    );
    assert.ok(secret, 'the metrics token is mounted where prometheus.yml reads it');
    assert.deepEqual(compose.secrets?.[secret.source], { environment: 'METRICS_TOKEN' });
    assert.ok('METRICS_TOKEN' in (service('api').environment ?? {}));

    // Grafana: the provisioning folder and the dashboards folder its file provider reads.
    const provisioning = mountedAt('grafana', '/etc/grafana/provisioning');
    assert.equal(provisioning, join(root, 'deploy/grafana/provisioning'));
    const providers = parse(readFileSync(join(provisioning, 'dashboards', 'webhooks.yml'), 'utf8')) as {
      providers: { options: { path: string } }[];
    };
    for (const { options } of providers.providers) {
      const dashboards = mountedAt('grafana', options.path);
      assert.ok(existsSync(join(dashboards, 'webhook-delivery.json')), `${options.path} holds the dashboard`);
    }
    const datasources = parse(readFileSync(join(provisioning, 'datasources', 'prometheus.yml'), 'utf8')) as {
      datasources: { url: string }[];
    };
    assert.deepEqual(
      datasources.datasources.map((d) => d.url),
      [`http://prometheus:${service('prometheus').ports?.[0]?.split(':').at(-1)}`],
      "Grafana reaches the profile's Prometheus by service name and container port",
    );
    assert.ok(
      existsSync(
        resolvedEnvironment('grafana', userEnv).GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH!.replace(
          '/etc/grafana/dashboards',
          join(root, 'deploy/grafana/dashboards'),
        ),
      ),
      'the home dashboard is the shipped one',
    );
  });

  it('api and worker encrypt Temporal payloads and deliver to https:// receivers only', () => {
    for (const name of ['api', 'worker']) {
      const config = loadConfig(resolvedEnvironment(name, userEnv));
      assert.equal(config.PAYLOAD_ENCRYPTION_KEYS, userEnv.PAYLOAD_ENCRYPTION_KEYS, name);
      assert.equal(config.ALLOW_HTTP_WEBHOOK_URLS, false, name);
    }
  });

  const appDependsOn = {
    postgres: { condition: 'service_healthy' },
    migrate: { condition: 'service_completed_successfully' },
    'temporal-init': { condition: 'service_completed_successfully' },
  };

  it('migrate: a one-shot `webhooks migrate` of the same image, as the owner, granting the API and worker roles', () => {
    const migrate = service('migrate');
    assert.equal(migrate.image, service('api').image);
    assert.deepEqual(migrate.command, ['node', 'dist/cli/index.js', 'migrate']);
    assert.deepEqual(migrate.depends_on, { postgres: { condition: 'service_healthy' } });
    assert.equal(migrate.ports, undefined);
    const env = resolvedEnvironment('migrate', userEnv);
    // The owner's step is given no keys: the configuration check passes without them.
    const config = loadConfig(env, { database: true, withoutKeys: true });
    assert.equal(config.NODE_ENV, 'production');
    assert.equal(
      config.DATABASE_URL,
      `postgres://${production.DATABASE_ROLES.owner}:${userEnv.DATABASE_OWNER_PASSWORD}@postgres:5432/webhooks`,
    );
    assert.equal(config.DATABASE_API_ROLE, production.DATABASE_ROLES.api);
    assert.equal(config.DATABASE_WORKER_ROLE, production.DATABASE_ROLES.worker);
    assert.deepEqual(env, {
      ...production.migrateEnvironment(config.DATABASE_URL, {
        AUDIT_HMAC_KEYS: userEnv.AUDIT_HMAC_KEYS,
        AUDIT_SIGNING_KEY: userEnv.AUDIT_SIGNING_KEY,
        AUDIT_DIGEST_DIR: '/audit-digests',
      }),
      LOG_LEVEL: 'info',
    });
  });

  it('postgres makes the roles on its first start with deploy/postgres/init-roles.sh; no other service is its superuser', () => {
    const postgres = service('postgres');
    assert.ok(
      postgres.volumes?.includes('./deploy/postgres/init-roles.sh:/docker-entrypoint-initdb.d/init-roles.sh:ro'),
      JSON.stringify(postgres.volumes),
    );
    const script = readFileSync(join(root, 'deploy', 'postgres', 'init-roles.sh'), 'utf8');
    for (const role of Object.values(production.DATABASE_ROLES))
      assert.match(script, new RegExp(`ALTER ROLE ${role} LOGIN NOSUPERUSER`), role);
    const superuser = resolvedEnvironment('postgres', userEnv).POSTGRES_USER!;
    const users: Record<string, string | undefined> = {
      migrate: new URL(resolvedEnvironment('migrate', userEnv).DATABASE_URL!).username,
      api: new URL(resolvedEnvironment('api', userEnv).DATABASE_URL!).username,
      worker: new URL(resolvedEnvironment('worker', userEnv).DATABASE_URL!).username,
      temporal: resolvedEnvironment('temporal', userEnv).POSTGRES_USER,
      'temporal-schema': resolvedEnvironment('temporal-schema', userEnv).SQL_USER,
    };
    assert.deepEqual(users, {
      migrate: production.DATABASE_ROLES.owner,
      api: production.DATABASE_ROLES.api,
      worker: production.DATABASE_ROLES.worker,
      temporal: production.DATABASE_ROLES.temporal,
      'temporal-schema': production.DATABASE_ROLES.temporal,
    });
    assert.ok(!Object.values<string | undefined>(users).includes(superuser), 'no service connects as the superuser');
    // Nor does any service but postgres hold the superuser's password.
    for (const [name, { environment }] of Object.entries(compose.services))
      if (name !== 'postgres')
        assert.doesNotMatch(JSON.stringify(environment ?? {}), /POSTGRES_PASSWORD|\$\{POSTGRES_USER/, name);
  });

  it('api: built from the Dockerfile, port 3000, healthy when /readyz answers, started after its dependencies', () => {
    const api = service('api');
    assert.equal(api.build, '.');
    assert.deepEqual(api.command, ['node', 'dist/api/server.js']);
    assert.deepEqual(
      api.ports?.map((p) => interpolate(p, {})),
      ['3000:3000'],
    );
    assert.equal(resolvedEnvironment('api', userEnv).PORT, '3000');
    assert.match(healthTest(api.healthcheck), /http:\/\/127\.0\.0\.1:3000\/readyz/);
    assert.deepEqual(api.depends_on, appDependsOn);
    assert.equal(api.init, true, 'an init process forwards signals and reaps');
  });

  it('worker: the same image with the worker command, no ports or container_name, so --scale worker=N works', () => {
    const worker = service('worker');
    const api = service('api');
    assert.equal(worker.build, api.build);
    assert.equal(worker.image, api.image);
    assert.deepEqual(worker.command, ['node', 'dist/worker/main.js']);
    assert.equal(worker.ports, undefined);
    assert.equal(worker.container_name, undefined);
    assert.deepEqual(worker.depends_on, appDependsOn);
  });

  it('api and worker environments pass the production configuration check with the user secrets', () => {
    for (const [name, needs] of [
      ['api', { database: true, temporal: true, auth: true, persons: true }],
      ['worker', { database: true, temporal: true, persons: true }],
    ] as const) {
      const env = resolvedEnvironment(name, userEnv);
      const config = loadConfig(env, needs);
      assert.equal(config.NODE_ENV, 'production', name);
      const password = name === 'api' ? userEnv.DATABASE_API_PASSWORD : userEnv.DATABASE_WORKER_PASSWORD;
      assert.equal(
        config.DATABASE_URL,
        `postgres://${production.DATABASE_ROLES[name]}:${password}@postgres:5432/webhooks`,
      );
      assert.equal(config.TEMPORAL_ADDRESS, 'temporal:7233');
      assert.equal(config.WEBHOOK_SECRET_KEY, userEnv.WEBHOOK_SECRET_KEY);
      // Every variable set is one the service reads: a misspelt name would be silently ignored.
      for (const [key, value] of Object.entries(env))
        if (value !== '') assert.ok(key in config, `${name}: ${key} is not a configuration variable`);
    }
    const api = loadConfig(resolvedEnvironment('api', userEnv));
    assert.equal(api.JWT_SECRET, userEnv.JWT_SECRET);
    const jwks = {
      ...userEnv,
      JWT_SECRET: '',
      POSTGRES_PASSWORD: 'pw',
      WEBHOOK_SECRET_KEY: userEnv.WEBHOOK_SECRET_KEY,
      PAYLOAD_ENCRYPTION_KEYS: userEnv.PAYLOAD_ENCRYPTION_KEYS,
      METRICS_TOKEN: userEnv.METRICS_TOKEN,
      PUBLIC_BASE_URL: userEnv.PUBLIC_BASE_URL,
    };
    const withJwks = loadConfig(
      resolvedEnvironment('api', {
        ...jwks,
        JWT_JWKS_URI: 'https://idp.example/jwks',
        JWT_ISSUER: 'https://idp',
        JWT_AUDIENCE: 'webhooks',
      }),
      { auth: true },
    );
    assert.equal(withJwks.JWT_JWKS_URI, 'https://idp.example/jwks');
    assert.equal(withJwks.JWT_ISSUER, 'https://idp');
    assert.equal(withJwks.JWT_AUDIENCE, 'webhooks');
    // In production a JWKS without an audience would accept tokens issued for any other application.
    assert.throws(
      () =>
        loadConfig(resolvedEnvironment('api', { ...jwks, JWT_JWKS_URI: 'https://idp.example/jwks', JWT_ISSUER: 'i' })),
      /JWT_AUDIENCE is required in production when JWT_JWKS_URI is set/,
    );
    assert.throws(() => loadConfig(resolvedEnvironment('api', jwks), { auth: true }), /JWT_SECRET or JWT_JWKS_URI/);
  });

  it('refuses to start without the required secrets (${VAR:?message})', () => {
    const requiredBy = {
      POSTGRES_PASSWORD: ['postgres'],
      DATABASE_OWNER_PASSWORD: ['postgres', 'migrate'],
      DATABASE_API_PASSWORD: ['postgres', 'api'],
      DATABASE_WORKER_PASSWORD: ['postgres', 'worker'],
      TEMPORAL_DB_PASSWORD: ['postgres', 'temporal-schema', 'temporal'],
      WEBHOOK_SECRET_KEY: ['api', 'worker'],
      PAYLOAD_ENCRYPTION_KEYS: ['api', 'worker'],
      AUDIT_HMAC_KEYS: ['api', 'worker', 'migrate'],
      AUDIT_SIGNING_KEY: ['api', 'worker', 'migrate'],
      PERSON_HASH_KEY: ['api', 'worker'],
    } as const;
    for (const [missing, names] of Object.entries(requiredBy)) {
      const env: Record<string, string> = { ...userEnv };
      delete env[missing];
      for (const name of names)
        assert.throws(() => resolvedEnvironment(name, env), new RegExp(missing), `${name} requires ${missing}`);
    }
  });
});

/**
 * docker-compose.cluster.yml on top of docker-compose.yml, merged as `docker compose -f … -f …` merges: maps key by
 * key, sequences appended, scalars replaced; `!reset` removes a key, `!override` replaces it whole.
 */
function mergedWithCluster(): { cluster: ComposeFile; merged: ComposeFile } {
  const doc = parseDocument(readFileSync(join(root, 'docker-compose.cluster.yml'), 'utf8'), { merge: true });
  const override = doc.toJS({ maxAliasCount: -1 }) as ComposeFile;
  const tagged = new Map<string, string>();
  for (const [name, node] of Object.entries(override.services))
    for (const key of Object.keys(node)) {
      const value: unknown = doc.getIn(['services', name, key], true);
      if (isNode(value) && value.tag && (isMap(value) || isSeq(value) || value.tag === '!reset'))
        tagged.set(`${name}.${key}`, value.tag);
    }
  const merge = (base: unknown, over: unknown): unknown => {
    if (Array.isArray(base) && Array.isArray(over)) return [...base, ...over];
    if (base && over && typeof base === 'object' && typeof over === 'object')
      return Object.fromEntries(
        [...new Set([...Object.keys(base), ...Object.keys(over)])].map((key) => [
          key,
          key in over
            ? merge((base as Record<string, unknown>)[key], (over as Record<string, unknown>)[key])
            : (base as Record<string, unknown>)[key],
        ]),
      );
    return over;
  };
  const services: Record<string, Service> = structuredClone(compose.services);
  for (const [name, over] of Object.entries(override.services)) {
    const merged: Record<string, unknown> & Service = { ...(services[name] ?? {}) };
    for (const [key, value] of Object.entries(over)) {
      const tag = tagged.get(`${name}.${key}`);
      if (tag === '!reset') delete merged[key];
      else if (tag === '!override') merged[key] = value;
      else merged[key] = merge(merged[key], value);
    }
    services[name] = merged;
  }
  return { cluster: override, merged: { ...compose, services } };
}

describe('docker-compose.cluster.yml: the Temporal server as a cluster, on top of docker-compose.yml', () => {
  const { cluster: clusterFile, merged } = mergedWithCluster();
  const hostService = (name: string) => `temporal-${name}`;

  it('is valid against the Compose Specification schema, alone and merged with docker-compose.yml', () => {
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false, validateSchema: false });
    const validate = ajv.compile(JSON.parse(readFileSync(join(root, 'test', 'fixtures', 'compose-spec.json'), 'utf8')));
    assert.ok(validate(clusterFile), JSON.stringify(validate.errors, null, 2));
    assert.ok(validate(merged), JSON.stringify(validate.errors, null, 2));
  });

  it('runs one host per service as test:production does: two frontends, history and matching hosts, one internal frontend and worker', () => {
    const hosts = Object.keys(merged.services).filter((name) => /^temporal-(?!schema|init|ui)/.test(name));
    assert.deepEqual(hosts.sort(), Object.keys(cluster.CLUSTER_HOSTS).map(hostService).sort());
    const single = resolvedEnvironment('temporal', userEnv);
    for (const [name, role] of Object.entries(cluster.CLUSTER_HOSTS)) {
      const host = merged.services[hostService(name)]!;
      assert.equal(host.image, `temporalio/server:${production.TEMPORAL_SERVER_VERSION}`, name);
      const env = Object.fromEntries(
        Object.entries(host.environment ?? {}).map(([key, value]) => [key, interpolate(String(value), userEnv)]),
      );
      assert.equal(env.TEMPORAL_SERVICES, role, name);
      // The same variables the suite gives each host (ports and test-only ones aside), and the single server's values.
      const suite = production.temporalServerEnvironment(
        production.postgresServerOf('postgres://u:p@h:5432/d'),
        { DBNAME: 'temporal', VISIBILITY_DBNAME: 'temporal_visibility' },
        {
          dir: '/c',
          ca: '/c/ca.pem',
          internodeCa: '/c/i.pem',
          of: (n) => ({ cert: `/c/${n}.pem`, key: `/c/${n}.key` }),
        },
        Object.fromEntries(
          production.TEST_ONLY_SERVER_VARIABLES.map((n) => [n, '1']),
        ) as unknown as production.TemporalPorts,
        { jwksUri: 'https://i/jwks', jwksCa: '/c/idp-ca.pem' },
        { services: [role], historyShards: cluster.CLUSTER_HISTORY_SHARDS, sqlConnections: { main: 1, visibility: 1 } },
      );
      assert.deepEqual(
        Object.keys(env).sort(),
        Object.keys(suite)
          .filter((n) => !production.TEST_ONLY_SERVER_VARIABLES.includes(n))
          .sort(),
        name,
      );
      for (const [key, value] of Object.entries(single))
        if (key !== 'TEMPORAL_SERVICES') assert.equal(env[key], value, `${name}: ${key} as the single server's`);
      assert.deepEqual(host.volumes, service('temporal').volumes, `${name} mounts what the single server mounts`);
      assert.deepEqual(host.depends_on, { 'temporal-schema': { condition: 'service_completed_successfully' } });
    }
  });

  it('`temporal` becomes HAProxy in front of both frontends: no key, no database password, the suite’s settings', () => {
    const balancer = merged.services.temporal!;
    assert.match(balancer.image ?? '', /^haproxy:\d+\.\d+\.\d+$/);
    assert.equal(balancer.environment, undefined, 'the server environment is reset');
    assert.deepEqual(balancer.volumes, ['./deploy/haproxy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro']);
    assert.deepEqual(balancer.depends_on, {
      'temporal-frontend-1': { condition: 'service_started' },
      'temporal-frontend-2': { condition: 'service_started' },
    });
    // Clients keep dialling temporal:7233.
    for (const name of ['api', 'worker', 'temporal-init'])
      assert.equal(resolvedEnvironment(name, userEnv).TEMPORAL_ADDRESS, 'temporal:7233', name);
    const shipped = readFileSync(join(root, 'deploy', 'haproxy', 'haproxy.cfg'), 'utf8');
    assert.match(shipped, /^\s*bind :7233$/m);
    for (const frontend of ['frontend-1', 'frontend-2'])
      assert.match(shipped, new RegExp(`^\\s*server ${frontend} ${hostService(frontend)}:7233$`, 'm'));
    // Every setting the suite's balancer runs with is in the shipped file (which adds Docker's DNS).
    const suite = cluster.haproxyConfig('127.0.0.1:1', []).split('\n');
    for (const line of suite.filter((l) => l && !/^\s*bind /.test(l)))
      assert.ok(
        shipped.split('\n').some((s) => s === line || (line.includes('default-server') && s.startsWith(line))),
        line,
      );
  });
});

describe('Dockerfile', () => {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  const lines = dockerfile
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  const stages: string[][] = [];
  for (const line of lines) {
    if (/^FROM\s/i.test(line)) stages.push([]);
    stages.at(-1)?.push(line);
  }
  const runtime = stages.at(-1) ?? [];
  const baseImage = /^ARG NODE_IMAGE=(\S+)/m.exec(dockerfile)?.[1] ?? '';

  it('is multi-stage: a build stage compiles, the runtime stage gets production dependencies only', () => {
    assert.ok(stages.length >= 2, 'at least a build and a runtime stage');
    assert.ok(
      stages.some((stage) => stage.some((l) => /^RUN npm ci\b/.test(l)) && stage.some((l) => /npm run build/.test(l))),
      'a stage runs npm ci and npm run build',
    );
    assert.ok(
      stages.some((stage) => stage.some((l) => /^RUN npm ci\b.*--omit=dev/.test(l))),
      'production dependencies installed with --omit=dev',
    );
    assert.ok(
      runtime.some((l) => /^COPY --from=\S+ \/app\/dist/.test(l)),
      'runtime copies the compiled dist',
    );
    assert.ok(
      !runtime.some((l) => /^RUN npm (ci|install)\b(?!.*--omit=dev)/.test(l)),
      'no dev dependencies at runtime',
    );
  });

  it('runs on a pinned glibc Node base as a non-root user', () => {
    assert.match(baseImage, /^node:20\.\d+\.\d+-(bookworm|bullseye)(-slim)?$/, 'pinned Debian (glibc) Node 20');
    const user = runtime.filter((l) => /^USER\s/i.test(l)).at(-1);
    assert.ok(user, 'the runtime stage sets USER');
    assert.doesNotMatch(user, /^USER\s+(root|0)(:|$)/i);
  });

  it('starts node directly with an exec-form CMD so signals reach it', () => {
    const cmd = runtime.filter((l) => /^CMD\s/i.test(l)).at(-1) ?? '';
    const args = JSON.parse(cmd.replace(/^CMD\s+/i, '')) as string[];
    assert.deepEqual(args, ['node', 'dist/api/server.js']);
    assert.ok(!runtime.some((l) => /^ENTRYPOINT\s/i.test(l)), 'no entrypoint wrapper');
  });

  it('.dockerignore keeps local state, secrets and build output out of the context', () => {
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['node_modules', 'dist', '.data', '.git', '.env']) assert.ok(ignored.includes(entry), entry);
  });
});

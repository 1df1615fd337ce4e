// The production topology of docker-compose.yml, started natively (no Docker engine here): the environments of the
// real Temporal server (run as the cluster of temporal-cluster.ts) with its own databases and mTLS, and of the API and
// worker processes from dist/ with NODE_ENV=production. Named as compose names them; test/operations/compose.test.ts
// checks the two agree.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createServer as createNetServer } from 'node:net';
import { temporalCliPath } from '../../dev/temporal-binaries';
import { killWorker, spawnProcess, type WorkerProcess } from '../faults/support';
import { testAuditEnv } from '../support/audit-keys';

const run = promisify(execFile);
export const root = join(__dirname, '..', '..');
/** The file compose mounts into the server; the server here reads it in place. */
export const DYNAMIC_CONFIG_FILE = join(root, 'temporal-dynamic-config.yaml');
export const ENSURE_SERVER_SCRIPT = join(root, 'scripts', 'ensure-temporal-server.sh');

/** The server version the ensure script builds (the tag of compose's temporalio/server image). */
export const TEMPORAL_SERVER_VERSION = /^TEMPORAL_SERVER_VERSION=v(\S+)$/m.exec(
  readFileSync(ENSURE_SERVER_SCRIPT, 'utf8'),
)![1]!;

/** The Temporal UI version: the one the pinned CLI embeds (scripts/ensure-temporal-binaries.sh), compose's image tag. */
export const TEMPORAL_UI_VERSION = /^TEMPORAL_UI_VERSION=(\S+)$/m.exec(
  readFileSync(join(root, 'scripts', 'ensure-temporal-binaries.sh'), 'utf8'),
)![1]!;

/** The folder with `server` and `sql`, built once by scripts/ensure-temporal-server.sh. */
export function ensureTemporalServer(): string {
  return execFileSync('sh', [ENSURE_SERVER_SCRIPT], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface Pem {
  cert: string;
  key: string;
}
export interface Certificates {
  dir: string;
  /** The clients' CA: signs the client certificates (clientAuth only), which the frontend accepts. */
  ca: string;
  /** The internode CA: signs the server's own certificate only; clients trust it to know the server. */
  internodeCa: string;
  of(name: string): Pem;
}

/**
 * Server certificates under the internode CA and client certificates under the clients' CA, made by openssl through
 * the documented recipe (deploy/make-certs.sh); `caName` names the CAs made here (another CA, as an intruder's).
 */
export async function makeCertificates(servers: string[], clients: string[], caName?: string): Promise<Certificates> {
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-prod-certs-'));
  const env = { ...process.env, ...(caName && { CA_NAME: caName }) };
  for (const [kind, names] of [
    ['server', servers],
    ['client', clients],
  ] as const)
    if (names.length) await run('sh', [join(root, 'deploy', 'make-certs.sh'), dir, kind, ...names], { env });
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    internodeCa: join(dir, 'internode-ca.pem'),
    of: (name) => ({ cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) }),
  };
}

export interface PostgresServer {
  host: string;
  port: string;
  user: string;
  password: string;
}
export const postgresServerOf = (url: string): PostgresServer => {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: parsed.port || '5432',
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
  };
};

/** The roles deploy/postgres/init-roles.sh makes, as docker-compose.yml's services connect. */
export const DATABASE_ROLES = {
  owner: 'webhooks_owner',
  api: 'webhooks_api',
  worker: 'webhooks_worker',
  temporal: 'temporal',
} as const;
export type DatabaseRole = keyof typeof DATABASE_ROLES;

/** The init script's environment, as the postgres image gives it (POSTGRES_USER, POSTGRES_DB and the passwords). */
export const initRolesEnvironment = (
  superuser: PostgresServer,
  database: string,
  passwords: Record<DatabaseRole, string>,
): Record<string, string> => ({
  POSTGRES_USER: superuser.user,
  POSTGRES_DB: database,
  DATABASE_OWNER_PASSWORD: passwords.owner,
  DATABASE_API_PASSWORD: passwords.api,
  DATABASE_WORKER_PASSWORD: passwords.worker,
  TEMPORAL_DB_PASSWORD: passwords.temporal,
});

/**
 * Runs deploy/postgres/init-roles.sh as the postgres image runs it at a volume's first start, here over TCP as the
 * server's superuser; then each role's URL of `database`.
 */
export async function createDatabaseRoles(
  superuser: PostgresServer,
  database: string,
  passwords: Record<DatabaseRole, string>,
): Promise<Record<DatabaseRole, string>> {
  await run('sh', [join(root, 'deploy', 'postgres', 'init-roles.sh')], {
    env: {
      ...process.env,
      ...initRolesEnvironment(superuser, database, passwords),
      PGHOST: superuser.host,
      PGPORT: superuser.port,
      PGPASSWORD: superuser.password,
    },
  });
  const urlOf = (role: DatabaseRole) =>
    `postgres://${DATABASE_ROLES[role]}:${passwords[role]}@${superuser.host}:${superuser.port}/${database}`;
  return { owner: urlOf('owner'), api: urlOf('api'), worker: urlOf('worker'), temporal: urlOf('temporal') };
}

/** `webhooks migrate` as compose's migrate service runs it: as the owner, granting the API's and workers' roles. */
/** The owner's one-shot step (compose's `migrate`); its audit keys serve the owner's audited commands run there. */
export const migrateEnvironment = (
  ownerUrl: string,
  audit: Record<string, string> = auditEnvironment,
): Record<string, string> => ({
  NODE_ENV: 'production',
  LOG_LEVEL: 'info',
  DATABASE_URL: ownerUrl,
  DATABASE_API_ROLE: DATABASE_ROLES.api,
  DATABASE_WORKER_ROLE: DATABASE_ROLES.worker,
  AUDIT_HMAC_KEYS: audit.AUDIT_HMAC_KEYS!,
  AUDIT_SIGNING_KEY: audit.AUDIT_SIGNING_KEY!,
  AUDIT_DIGEST_DIR: audit.AUDIT_DIGEST_DIR!,
});
export async function migrateAsOwner(ownerUrl: string): Promise<string> {
  const { stdout } = await run(process.execPath, [join(root, 'dist', 'cli', 'index.js'), 'migrate'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...migrateEnvironment(ownerUrl) },
  });
  return stdout;
}

export interface TemporalPorts {
  FRONTEND_GRPC_PORT: string;
  FRONTEND_HTTP_PORT: string;
  FRONTEND_MEMBERSHIP_PORT: string;
  INTERNAL_FRONTEND_GRPC_PORT: string;
  INTERNAL_FRONTEND_HTTP_PORT: string;
  INTERNAL_FRONTEND_MEMBERSHIP_PORT: string;
  HISTORY_GRPC_PORT: string;
  HISTORY_MEMBERSHIP_PORT: string;
  MATCHING_GRPC_PORT: string;
  MATCHING_MEMBERSHIP_PORT: string;
  WORKER_GRPC_PORT: string;
  WORKER_MEMBERSHIP_PORT: string;
}
/** Compose runs the server alone in its container on the default ports; here many servers share one machine. */
export const TEST_ONLY_SERVER_VARIABLES = [
  'FRONTEND_GRPC_PORT',
  'FRONTEND_HTTP_PORT',
  'FRONTEND_MEMBERSHIP_PORT',
  'INTERNAL_FRONTEND_GRPC_PORT',
  'INTERNAL_FRONTEND_HTTP_PORT',
  'INTERNAL_FRONTEND_MEMBERSHIP_PORT',
  'HISTORY_GRPC_PORT',
  'HISTORY_MEMBERSHIP_PORT',
  'MATCHING_GRPC_PORT',
  'MATCHING_MEMBERSHIP_PORT',
  'WORKER_GRPC_PORT',
  'WORKER_MEMBERSHIP_PORT',
  'BIND_ON_IP',
  // The identity provider's certificate is signed by a test CA: the server trusts it through Go's SSL_CERT_FILE.
  'SSL_CERT_FILE',
  // The suite rotates the provider's signing key: the server reads the new JWKS within seconds, not compose's minute.
  'TEMPORAL_JWT_KEY_REFRESH',
];

/** A free port below 32768: the server stores membership ports in a smallint column. */
export async function freeLowPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const probe = createNetServer()
        .once('error', () => resolve(false))
        .listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

export async function freeTemporalPorts(): Promise<TemporalPorts> {
  const ports = {} as Record<string, string>;
  for (const name of TEST_ONLY_SERVER_VARIABLES.filter((n) => n.endsWith('_PORT')))
    ports[name] = String(await freeLowPort());
  return ports as unknown as TemporalPorts;
}

export interface TemporalDatabases {
  DBNAME: string;
  VISIBILITY_DBNAME: string;
}

/** temporal-sql-tool's connection (deploy/temporal-schema.sh), as compose's temporal-schema service sets it. */
export const schemaEnvironment = (pg: PostgresServer, databases: TemporalDatabases): Record<string, string> => ({
  SQL_PLUGIN: 'postgres12',
  SQL_HOST: pg.host,
  SQL_PORT: pg.port,
  SQL_USER: pg.user,
  SQL_PASSWORD: pg.password,
  ...databases,
});

/** Where the server reads the keys that sign access tokens, and the CA of that endpoint's certificate. */
export interface TemporalAuth {
  jwksUri: string;
  jwksCa: string;
}

/** Every service of the server; one process runs them all, or a cluster runs one per host. */
export const TEMPORAL_SERVICES = ['frontend', 'internal-frontend', 'history', 'matching', 'worker'] as const;
export type TemporalService = (typeof TEMPORAL_SERVICES)[number];

/** What one server process runs, and the history shard count every host of its database shares. */
export interface TemporalHost {
  services: readonly TemporalService[];
  /** Fixed when the database is first used: every host must say the same number, and it can never change. */
  historyShards: number;
  /** Each host's PostgreSQL pools (the template's 20 and 10 otherwise): hosts × both must fit max_connections. */
  sqlConnections?: { main: number; visibility: number };
}
/** Compose's default: the template's 4, which databases made by earlier versions of this stack were created with. */
export const SINGLE_SERVER: TemporalHost = { services: TEMPORAL_SERVICES, historyShards: 4 };

/** The server's environment, read by its embedded config template exactly as in the temporalio/server image. */
export const temporalServerEnvironment = (
  pg: PostgresServer,
  databases: TemporalDatabases,
  certs: Certificates,
  ports: TemporalPorts,
  auth: TemporalAuth,
  host: TemporalHost = SINGLE_SERVER,
): Record<string, string> => ({
  DB: 'postgres12',
  DB_PORT: pg.port,
  POSTGRES_SEEDS: pg.host,
  POSTGRES_USER: pg.user,
  POSTGRES_PWD: pg.password,
  ...databases,
  DYNAMIC_CONFIG_FILE_PATH: DYNAMIC_CONFIG_FILE,
  LOG_LEVEL: 'warn',
  // mTLS everywhere. Internode (history, matching, worker): the server's certificate, and only certificates of the
  // internode CA are accepted, so no client's opens those ports.
  TEMPORAL_TLS_REQUIRE_CLIENT_AUTH: 'true',
  TEMPORAL_TLS_SERVER_CA_CERT: certs.internodeCa,
  TEMPORAL_TLS_SERVER_CERT: certs.of('temporal').cert,
  TEMPORAL_TLS_SERVER_KEY: certs.of('temporal').key,
  TEMPORAL_TLS_INTERNODE_SERVER_NAME: 'temporal',
  // The frontend: the same certificate, and client certificates of the clients' CA only (listed twice: the template
  // names two CA files). The server's own system workers call the internal frontend, over internode TLS.
  TEMPORAL_TLS_FRONTEND_CERT: certs.of('temporal').cert,
  TEMPORAL_TLS_FRONTEND_KEY: certs.of('temporal').key,
  TEMPORAL_TLS_CLIENT1_CA_CERT: certs.ca,
  TEMPORAL_TLS_CLIENT2_CA_CERT: certs.ca,
  TEMPORAL_TLS_FRONTEND_SERVER_NAME: 'temporal',
  USE_INTERNAL_FRONTEND: 'true',
  TEMPORAL_SERVICES: host.services.join(','),
  NUM_HISTORY_SHARDS: String(host.historyShards),
  ...(host.sqlConnections && {
    SQL_MAX_CONNS: String(host.sqlConnections.main),
    SQL_MAX_IDLE_CONNS: String(host.sqlConnections.main),
    SQL_VIS_MAX_CONNS: String(host.sqlConnections.visibility),
    SQL_VIS_MAX_IDLE_CONNS: String(host.sqlConnections.visibility),
  }),
  // Who may do what is decided by the caller's access token: the stock JWT claim mapper reads its `permissions`
  // (`<namespace>:<read|write|admin>`) once its signature checks against the identity provider's JWKS; the default
  // authorizer allows by those roles. No token, or another signer's: health checks only.
  TEMPORAL_AUTH_AUTHORIZER: 'default',
  TEMPORAL_AUTH_CLAIM_MAPPER: 'default',
  TEMPORAL_JWT_KEY_SOURCE1: auth.jwksUri,
  TEMPORAL_JWT_KEY_REFRESH: '5s',
  SSL_CERT_FILE: auth.jwksCa,
  BIND_ON_IP: '127.0.0.1',
  ...ports,
});

/** A process's client at the identity provider: its access tokens come by client credentials. */
export interface OAuthClient {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  resource: string;
}
export const oauthEnvironment = (client: OAuthClient): Record<string, string> => ({
  TEMPORAL_OAUTH_TOKEN_URL: client.tokenUrl,
  TEMPORAL_OAUTH_CLIENT_ID: client.clientId,
  TEMPORAL_OAUTH_CLIENT_SECRET: client.clientSecret,
  TEMPORAL_OAUTH_RESOURCE: client.resource,
});

/** The Temporal CLI's connection (deploy/temporal-namespace.sh), as compose's temporal-init service sets it. */
export const adminToolsEnvironment = (address: string, certs: Certificates, name = 'admin-tools') => ({
  TEMPORAL_ADDRESS: address,
  TEMPORAL_NAMESPACE: 'default',
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: certs.internodeCa,
  TEMPORAL_TLS_CLIENT_CERT_PATH: certs.of(name).cert,
  TEMPORAL_TLS_CLIENT_KEY_PATH: certs.of(name).key,
  TEMPORAL_TLS_SERVER_NAME: 'temporal',
});

/** The namespace set-up (deploy/temporal-namespace.sh), as compose's temporal-init service runs it: the admin's token. */
export const namespaceSetupEnvironment = (address: string, certs: Certificates, admin: OAuthClient) => ({
  ...adminToolsEnvironment(address, certs),
  ...oauthEnvironment(admin),
});

export interface AppSettings {
  /** The API's and the workers' own roles' URLs (compose sets DATABASE_URL per service). */
  apiDatabaseUrl: string;
  workerDatabaseUrl: string;
  temporalAddress: string;
  certs: Certificates;
  webhookSecretKeys: string;
  payloadEncryptionKeys: string;
  /** The CA that signed the receivers' certificates, trusted through NODE_EXTRA_CA_CERTS. */
  extraCaCerts: string;
  /** The API's and the workers' client at the identity provider. */
  oauth: OAuthClient;
}

/** The audit keys and the one digest directory every process of this run shares (compose's AUDIT_*). */
const auditEnvironment = testAuditEnv();

/** What API and worker share (compose's x-app-environment). */
export const appEnvironment = (s: AppSettings): Record<string, string> => ({
  NODE_ENV: 'production',
  LOG_LEVEL: 'info',
  TEMPORAL_ADDRESS: s.temporalAddress,
  TEMPORAL_NAMESPACE: 'default',
  TEMPORAL_TASK_QUEUE: 'webhooks',
  TEMPORAL_TLS_CA_PATH: s.certs.internodeCa,
  TEMPORAL_TLS_CERT_PATH: s.certs.of('webhooks').cert,
  TEMPORAL_TLS_KEY_PATH: s.certs.of('webhooks').key,
  TEMPORAL_TLS_SERVER_NAME: 'temporal',
  ...oauthEnvironment(s.oauth),
  WEBHOOK_SECRET_KEYS: s.webhookSecretKeys,
  PAYLOAD_ENCRYPTION_KEYS: s.payloadEncryptionKeys,
  ...auditEnvironment,
  NODE_EXTRA_CA_CERTS: s.extraCaCerts,
});

export interface ApiSettings {
  port: number;
  jwksUri: string;
  issuer: string;
  audience: string;
  metricsToken: string;
}
export const apiEnvironment = (s: AppSettings, api: ApiSettings): Record<string, string> => ({
  ...appEnvironment(s),
  DATABASE_URL: s.apiDatabaseUrl,
  PORT: String(api.port),
  JWT_JWKS_URI: api.jwksUri,
  JWT_ISSUER: api.issuer,
  JWT_AUDIENCE: api.audience,
  METRICS_TOKEN: api.metricsToken,
  PUBLIC_BASE_URL: 'https://hooks.example.com',
  // Receivers here listen on 127.0.0.1; in production this stays false.
  ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
});
export const workerEnvironment = (s: AppSettings): Record<string, string> => ({
  ...appEnvironment(s),
  DATABASE_URL: s.workerDatabaseUrl,
  ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
  // A short retry schedule, so the scenarios that interrupt attempts finish in seconds.
  DELIVERY_INITIAL_INTERVAL_MS: '200',
  DELIVERY_MAX_INTERVAL_MS: '1000',
  WORKER_SHUTDOWN_GRACE_MS: '5000',
});
/** Variables the test sets that compose leaves at their defaults, with why. */
export const TEST_ONLY_APP_VARIABLES = [
  // A short retry schedule and grace, so the scenarios that interrupt attempts finish in seconds.
  'DELIVERY_INITIAL_INTERVAL_MS',
  'DELIVERY_MAX_INTERVAL_MS',
  'WORKER_SHUTDOWN_GRACE_MS',
];

const until = async (condition: () => boolean | Promise<boolean>, what: string, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

/** One process of the topology: started, stopped, restarted with another environment. */
export class ServiceProcess {
  process: WorkerProcess | undefined;
  /** Access-token renewals it logged, across restarts (its output keeps only its tail). */
  tokenRenewals = 0;
  constructor(
    readonly name: string,
    private readonly command: string,
    private readonly args: string[],
    public env: Record<string, string>,
    private readonly ready: (output: string) => boolean,
  ) {}

  async start(timeoutMs = 60_000): Promise<void> {
    const started = spawnProcess(this.command, this.args, this.env);
    this.process = started;
    started.child.stdout?.on('data', (chunk: Buffer) => {
      this.tokenRenewals += chunk.toString().split('Temporal access token renewed').length - 1;
    });
    await until(
      () => {
        if (started.child.exitCode !== null) assert.fail(`${this.name} exited: ${started.output()}`);
        return this.ready(started.output());
      },
      `${this.name} to start`,
      timeoutMs,
    );
  }

  /** SIGTERM and wait for the exit (graceful), or SIGKILL. */
  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<{ code: number | null; signal: string | null }> {
    const running = this.process;
    if (!running || running.child.exitCode !== null || running.child.signalCode !== null) return { code: 0, signal };
    running.child.kill(signal);
    return running.exited;
  }

  kill(): Promise<void> {
    return killWorker(this.process);
  }

  output(): string {
    return this.process?.output() ?? '';
  }
}

export const apiProcess = (name: string, env: Record<string, string>) =>
  new ServiceProcess(name, process.execPath, [join(root, 'dist', 'api', 'server.js')], env, (out) =>
    out.includes('API listening'),
  );
export const workerProcess = (name: string, env: Record<string, string>) =>
  new ServiceProcess(name, process.execPath, [join(root, 'dist', 'worker', 'main.js')], env, (out) =>
    out.includes('worker started'),
  );

/** The Temporal CLI (the admin tools' `temporal`): TEMPORAL_CLI_PATH, PATH or pip's scripts folder. */
export const temporalCli = () => temporalCliPath() ?? 'temporal';

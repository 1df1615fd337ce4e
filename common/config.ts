import Ajv, { type JSONSchemaType } from 'ajv';
import { DEFAULT_TASK_QUEUE } from './contract';
import {
  BASE64_KEYS,
  BASE64_KEY_ENTRY_PATTERN,
  BASE64_KEY_RING_PATTERN,
  HEX_OR_BASE64_KEY_PATTERN,
  HEX_OR_BASE64_KEY_RING_PATTERN,
  parseKeyRing,
} from './crypto/key-ring';
import { isDevelopment, type NodeEnv } from './node-env';
import { otlpMetricsNamed, telemetrySettings } from './telemetry/settings';

export { isDevelopment } from './node-env';

/** Six years: HIPAA's retention of documentation (45 CFR 164.316(b)(2)); production keeps audit rows at least this long. */
export const AUDIT_RETENTION_FLOOR_DAYS = 2190;

/** Everything the processes read from the environment, validated once at start-up. */
export interface Config {
  NODE_ENV: NodeEnv;
  PORT: number;
  LOG_LEVEL: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  DATA_DIR: string;
  DATABASE_URL?: string;
  /** `webhooks migrate` grants the API's role what db/roles.ts lists for it (and revokes the rest). */
  DATABASE_API_ROLE?: string;
  /** `webhooks migrate` grants the workers' role what db/roles.ts lists for them (and revokes the rest). */
  DATABASE_WORKER_ROLE?: string;
  JWT_SECRET?: string;
  JWT_JWKS_URI?: string;
  JWT_ISSUER?: string;
  JWT_AUDIENCE?: string;
  WEBHOOK_SECRET_KEY?: string;
  /** At-rest key ring `id:key[,…]` (key: 64 hex digits or base64); the first seals, all open. */
  WEBHOOK_SECRET_KEYS?: string;
  TEMPORAL_ADDRESS?: string;
  TEMPORAL_NAMESPACE: string;
  TEMPORAL_TASK_QUEUE: string;
  TEMPORAL_API_KEY?: string;
  /** Temporal's authorizer: access tokens by client credentials from this OAuth 2.0 token endpoint, renewed. */
  TEMPORAL_OAUTH_TOKEN_URL?: string;
  TEMPORAL_OAUTH_CLIENT_ID?: string;
  TEMPORAL_OAUTH_CLIENT_SECRET?: string;
  /** Sent as `scope`, `resource` (RFC 8707) and `audience` (Auth0 and others) when set. */
  TEMPORAL_OAUTH_SCOPE?: string;
  TEMPORAL_OAUTH_RESOURCE?: string;
  TEMPORAL_OAUTH_AUDIENCE?: string;
  TEMPORAL_TLS_CERT_PATH?: string;
  TEMPORAL_TLS_KEY_PATH?: string;
  TEMPORAL_TLS_CA_PATH?: string;
  TEMPORAL_TLS_SERVER_NAME?: string;
  WEBHOOK_TIMEOUT_MS: number;
  ALLOW_PRIVATE_WEBHOOK_URLS: boolean;
  /** The worker's egress proxy for deliveries to https:// receivers (HTTP_PROXY when unset). */
  HTTPS_PROXY?: string;
  /** The worker's egress proxy for deliveries to http:// receivers. */
  HTTP_PROXY?: string;
  /** Receiver hosts reached directly, past the proxy: comma-separated names, `.domain` suffixes, `*`. */
  NO_PROXY?: string;
  DELIVERY_INITIAL_INTERVAL_MS: number;
  DELIVERY_BACKOFF_COEFFICIENT: number;
  DELIVERY_MAX_INTERVAL_MS: number;
  DELIVERY_GIVE_UP_AFTER_MS: number;
  /** The first attempt runs as a local activity in the workflow's first task (the fast path); false: every attempt is an activity task. */
  DELIVERY_FIRST_ATTEMPT_LOCAL: boolean;
  TEST_DELIVERY_WAIT_MS: number;
  WORKER_MAX_CONCURRENT_ACTIVITIES: number;
  WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: number;
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: number;
  WORKER_MAX_CACHED_WORKFLOWS: number;
  /** Concurrent long polls for workflow tasks and for activity tasks; unset: the SDK's default, min(10, slots). */
  WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS?: number;
  WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS?: number;
  /** Share of the workflow-task pollers that poll the task queue rather than the worker's sticky queue. */
  WORKER_NONSTICKY_POLL_RATIO?: number;
  WORKER_SHUTDOWN_GRACE_MS: number;
  /** How often a worker erases the previous secrets whose rotation overlap is over. */
  SECRET_SWEEP_INTERVAL_MS: number;
  /** JWKS mode: the oldest token (by iat) the API accepts, in seconds. */
  JWT_MAX_AGE: number;
  /** API server: cut off clients that are slow to send headers or the whole request; cap open connections. */
  HTTP_HEADERS_TIMEOUT_MS: number;
  HTTP_REQUEST_TIMEOUT_MS: number;
  HTTP_MAX_CONNECTIONS: number;
  /** Database pool: how long to wait for a pooled connection, for a new connection, and for one statement. */
  DB_ACQUIRE_TIMEOUT_MS: number;
  DB_CONNECT_TIMEOUT_MS: number;
  DB_STATEMENT_TIMEOUT_MS: number;
  /** How long the API waits for Temporal to accept a connection before it answers 503. */
  TEMPORAL_CONNECT_TIMEOUT_MS: number;
  /** Isolation between projects: circuit breaker per registration, concurrent attempts per endpoint. */
  BREAKER_FAILURE_THRESHOLD: number;
  BREAKER_OPEN_MS: number;
  BREAKER_MAX_OPEN_MS: number;
  BREAKER_RESUME_SPREAD_MS: number;
  ENDPOINT_MAX_CONCURRENT_ATTEMPTS: number;
  /** How long an attempt queues in the worker for one of its endpoint's slots before it is deferred. */
  ENDPOINT_QUEUE_WAIT_MS: number;
  /** The longest durable wait of a delivery for an open breaker; the resumer's signal normally ends it first. */
  BREAKER_WAIT_MAX_MS: number;
  /** Deliveries per second per registration the resumer wakes once its breaker has closed. */
  BREAKER_RESUME_RATE_PER_SECOND: number;
  TEST_EVENTS_PER_MINUTE: number;
  /** The longest a member's pause holds a webhook's deliveries; then it ends by itself and they go out. */
  PAUSE_MAX_HOURS: number;
  /** Where the worker sends projects' notice e-mails (smtp:// or smtps://, credentials in the URL); unset: none. */
  SMTP_URL?: string;
  /** The From of those e-mails. */
  SMTP_FROM: string;
  /** Human-readable logs (pino-pretty) instead of JSON lines; by default only at a terminal outside production. */
  LOG_PRETTY?: boolean;
  /** Development stack (`npm start`, tests, bench): where the embedded services listen and the binaries are. */
  DEV_POSTGRES_PORT: number;
  DEV_TEMPORAL_PORT: number;
  DEV_TEMPORAL_UI_PORT?: number;
  TEMPORAL_CLI_PATH?: string;
  TEMPORAL_TEST_SERVER_PATH?: string;
  /** Delivery log, recovery, alerts and metrics. */
  DELIVERY_LOG_RETENTION_DAYS: number;
  /** How long audit rows are kept: `webhooks audit prune` removes older ones from the oldest end. */
  AUDIT_RETENTION_DAYS: number;
  /** The audit chain's HMAC key ring `id:key[,…]` (as WEBHOOK_SECRET_KEYS): the first chains new rows, all verify. */
  AUDIT_HMAC_KEYS?: string;
  /** The Ed25519 key `id:base64seed` that signs audit digests and journal lines. */
  AUDIT_SIGNING_KEY?: string;
  /** Retired signing keys' public halves `id:base64[,…]`, still trusted by `webhooks audit verify`. */
  AUDIT_SIGNING_PUBLIC_KEYS?: string;
  /** Where digests and journals go: a place the database's writers cannot reach. */
  AUDIT_DIGEST_DIR?: string;
  /** The HMAC-SHA256 key of the person hashes (32 bytes as 64 hex digits or base64): a person's deliveries are found
   * by it for an erasure, and the userUUID itself is never stored. Never in the database. */
  PERSON_HASH_KEY?: string;
  /** How long an erasure waits before it looks again at a person's deliveries still open; each wait doubles. */
  ERASURE_RECHECK_MS: number;
  /** The longest of those waits. */
  ERASURE_RECHECK_MAX_MS: number;
  /** How often the worker writes a digest of the audit trail. */
  AUDIT_DIGEST_INTERVAL_MS: number;
  RECOVER_RATE_PER_SECOND: number;
  /** Members' redeliver and recover calls per project in any minute (held in PostgreSQL for every API process). */
  REDELIVER_CALLS_PER_MINUTE: number;
  RECOVER_CALLS_PER_MINUTE: number;
  /** Reads of a project's delivery log and health a second, per API process (a token bucket). */
  READ_CALLS_PER_SECOND: number;
  /** Refused calls (403) one caller may make a minute, per API process; then 429 (a token bucket). */
  REFUSED_CALLS_PER_MINUTE: number;
  /** Audited writes (changes, test sends, links) one caller may make a minute, per API process; then 429. */
  AUDITED_WRITES_PER_MINUTE: number;
  /** Live (unexpired, unrevoked) portal links a project may hold; one more is refused (409). */
  PORTAL_LINKS_PER_PROJECT: number;
  ALERT_AFTER_MS: number;
  ALERT_WEBHOOK_URL?: string;
  ALERT_WEBHOOK_SECRET?: string;
  METRICS_TOKEN?: string;
  WORKER_METRICS_PORT?: number;
  /** Where the worker's Prometheus endpoint listens (no authentication: loopback unless told otherwise). */
  WORKER_METRICS_HOST: string;
  /** Production worker: deliver events whose input is not encrypted by our codec (a migration window). */
  ALLOW_UNENCRYPTED_EVENTS: boolean;
  /** Temporal payload encryption key ring: `id:base64key[,…]`; the first encrypts, all decrypt. */
  PAYLOAD_ENCRYPTION_KEYS?: string;
  /** Token subjects (comma-separated) allowed to use the codec endpoint; project members are not operators. */
  OPERATOR_SUBJECTS?: string;
  /** A token whose `roles` (or `role`) claim holds this value is an operator too. */
  OPERATOR_ROLE?: string;
  /** Origins (comma-separated) of the Temporal UI allowed to call the codec endpoint from the browser. */
  CODEC_CORS_ORIGINS?: string;
  /** Development (`npm start`): the codec endpoint answers callers on this machine without a token; refused in production. */
  DEV_CODEC_WITHOUT_TOKEN: boolean;
  /** In production receivers must be https:// unless this is true. */
  ALLOW_HTTP_WEBHOOK_URLS: boolean;
  /** Where customers reach the API (portal links point here): required, https, outside development; unset: loopback. */
  PUBLIC_BASE_URL?: string;
  /** Origins (comma-separated) allowed to embed the portal page in an iframe; unset: none. */
  PORTAL_FRAME_ANCESTORS?: string;
  /** With tracing on, receivers get the POST's W3C `traceparent` header; false leaves it out. */
  DELIVERY_TRACEPARENT: boolean;
}

/** Defaults of the isolation settings, also used by activities created without them (tests, bench). */
export const ISOLATION_DEFAULTS = {
  BREAKER_FAILURE_THRESHOLD: 5,
  BREAKER_OPEN_MS: 30_000,
  BREAKER_MAX_OPEN_MS: 60_000,
  BREAKER_RESUME_SPREAD_MS: 5_000,
  ENDPOINT_MAX_CONCURRENT_ATTEMPTS: 10,
  ENDPOINT_QUEUE_WAIT_MS: 1_000,
  BREAKER_WAIT_MAX_MS: 900_000,
  BREAKER_RESUME_RATE_PER_SECOND: 20,
};

const optionalString = { type: 'string', minLength: 1, nullable: true } as const;
const int = (min: number, dflt: number, max = Number.MAX_SAFE_INTEGER) =>
  ({ type: 'integer', minimum: min, maximum: max, default: dflt }) as const;

const schema: JSONSchemaType<Config> = {
  type: 'object',
  properties: {
    NODE_ENV: { type: 'string', enum: ['development', 'test', 'production'], default: 'development' },
    PORT: int(0, 3000, 65535),
    LOG_LEVEL: {
      type: 'string',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
    },
    DATA_DIR: { type: 'string', minLength: 1, default: '.data' },
    DATABASE_URL: { type: 'string', pattern: '^postgres(ql)?://', nullable: true },
    DATABASE_API_ROLE: { type: 'string', pattern: '^[a-z_][a-z0-9_]{0,62}$', nullable: true },
    DATABASE_WORKER_ROLE: { type: 'string', pattern: '^[a-z_][a-z0-9_]{0,62}$', nullable: true },
    JWT_SECRET: { type: 'string', minLength: 32, nullable: true },
    JWT_JWKS_URI: { type: 'string', pattern: '^https?://', nullable: true },
    JWT_ISSUER: optionalString,
    JWT_AUDIENCE: optionalString,
    WEBHOOK_SECRET_KEY: { type: 'string', pattern: HEX_OR_BASE64_KEY_PATTERN, nullable: true },
    WEBHOOK_SECRET_KEYS: { type: 'string', pattern: HEX_OR_BASE64_KEY_RING_PATTERN, nullable: true },
    TEMPORAL_ADDRESS: optionalString,
    TEMPORAL_NAMESPACE: { type: 'string', minLength: 1, default: 'default' },
    TEMPORAL_TASK_QUEUE: { type: 'string', minLength: 1, default: DEFAULT_TASK_QUEUE },
    TEMPORAL_API_KEY: optionalString,
    TEMPORAL_OAUTH_TOKEN_URL: { type: 'string', pattern: '^https?://', nullable: true },
    TEMPORAL_OAUTH_CLIENT_ID: optionalString,
    TEMPORAL_OAUTH_CLIENT_SECRET: optionalString,
    TEMPORAL_OAUTH_SCOPE: optionalString,
    TEMPORAL_OAUTH_RESOURCE: optionalString,
    TEMPORAL_OAUTH_AUDIENCE: optionalString,
    TEMPORAL_TLS_CERT_PATH: optionalString,
    TEMPORAL_TLS_KEY_PATH: optionalString,
    TEMPORAL_TLS_CA_PATH: optionalString,
    TEMPORAL_TLS_SERVER_NAME: optionalString,
    WEBHOOK_TIMEOUT_MS: int(100, 10_000, 600_000),
    ALLOW_PRIVATE_WEBHOOK_URLS: { type: 'boolean', default: false },
    HTTPS_PROXY: { type: 'string', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', nullable: true },
    HTTP_PROXY: { type: 'string', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', nullable: true },
    NO_PROXY: optionalString,
    DELIVERY_INITIAL_INTERVAL_MS: int(1, 1_000),
    DELIVERY_BACKOFF_COEFFICIENT: { type: 'number', minimum: 1, maximum: 100, default: 2 },
    DELIVERY_MAX_INTERVAL_MS: int(1, 600_000),
    DELIVERY_GIVE_UP_AFTER_MS: int(1_000, 86_400_000),
    DELIVERY_FIRST_ATTEMPT_LOCAL: { type: 'boolean', default: true },
    TEST_DELIVERY_WAIT_MS: int(100, 15_000, 600_000),
    WORKER_MAX_CONCURRENT_ACTIVITIES: int(1, 200),
    WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: int(1, 200),
    WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: int(1, 100),
    WORKER_MAX_CACHED_WORKFLOWS: int(0, 1_000),
    // The SDK needs two workflow pollers (one sticky, one not) while the cache is on.
    WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: { type: 'integer', minimum: 2, maximum: 1_000, nullable: true },
    WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: { type: 'integer', minimum: 1, maximum: 1_000, nullable: true },
    WORKER_NONSTICKY_POLL_RATIO: { type: 'number', exclusiveMinimum: 0, maximum: 1, nullable: true },
    WORKER_SHUTDOWN_GRACE_MS: int(0, 15_000),
    SECRET_SWEEP_INTERVAL_MS: int(1_000, 3_600_000, 86_400_000),
    JWT_MAX_AGE: int(1, 3_600, 86_400),
    HTTP_HEADERS_TIMEOUT_MS: int(1_000, 10_000, 600_000),
    HTTP_REQUEST_TIMEOUT_MS: int(1_000, 30_000, 600_000),
    HTTP_MAX_CONNECTIONS: int(1, 1_000, 1_000_000),
    DB_ACQUIRE_TIMEOUT_MS: int(100, 5_000, 600_000),
    DB_CONNECT_TIMEOUT_MS: int(100, 5_000, 600_000),
    DB_STATEMENT_TIMEOUT_MS: int(100, 10_000, 3_600_000),
    TEMPORAL_CONNECT_TIMEOUT_MS: int(100, 5_000, 600_000),
    BREAKER_FAILURE_THRESHOLD: int(1, ISOLATION_DEFAULTS.BREAKER_FAILURE_THRESHOLD, 10_000),
    BREAKER_OPEN_MS: int(100, ISOLATION_DEFAULTS.BREAKER_OPEN_MS, 86_400_000),
    BREAKER_MAX_OPEN_MS: int(100, ISOLATION_DEFAULTS.BREAKER_MAX_OPEN_MS, 86_400_000),
    BREAKER_RESUME_SPREAD_MS: int(0, ISOLATION_DEFAULTS.BREAKER_RESUME_SPREAD_MS, 3_600_000),
    ENDPOINT_MAX_CONCURRENT_ATTEMPTS: int(1, ISOLATION_DEFAULTS.ENDPOINT_MAX_CONCURRENT_ATTEMPTS, 10_000),
    // Inside the attempt deadline's 5 s margin (attemptDeadlineMs): a longer queue would let Temporal retry an attempt
    // whose POST is still under way.
    ENDPOINT_QUEUE_WAIT_MS: int(0, ISOLATION_DEFAULTS.ENDPOINT_QUEUE_WAIT_MS, 4_000),
    BREAKER_WAIT_MAX_MS: int(1_000, ISOLATION_DEFAULTS.BREAKER_WAIT_MAX_MS, 86_400_000),
    BREAKER_RESUME_RATE_PER_SECOND: int(1, ISOLATION_DEFAULTS.BREAKER_RESUME_RATE_PER_SECOND, 10_000),
    TEST_EVENTS_PER_MINUTE: int(1, 10, 10_000),
    // A month at most: held events of health monitoring lose their use long before.
    PAUSE_MAX_HOURS: int(1, 72, 720),
    SMTP_URL: { type: 'string', pattern: '^smtps?://', nullable: true },
    SMTP_FROM: { type: 'string', minLength: 3, default: 'webhooks@localhost' },
    LOG_PRETTY: { type: 'boolean', nullable: true },
    DEV_POSTGRES_PORT: int(1, 5433, 65535),
    DEV_TEMPORAL_PORT: int(1, 7233, 65535),
    DEV_TEMPORAL_UI_PORT: { type: 'integer', minimum: 1, maximum: 65535, nullable: true },
    TEMPORAL_CLI_PATH: optionalString,
    TEMPORAL_TEST_SERVER_PATH: optionalString,
    DELIVERY_LOG_RETENTION_DAYS: int(1, 30, 3650),
    AUDIT_RETENTION_DAYS: int(1, AUDIT_RETENTION_FLOOR_DAYS, 36_500),
    AUDIT_HMAC_KEYS: { type: 'string', pattern: HEX_OR_BASE64_KEY_RING_PATTERN, nullable: true },
    // An Ed25519 seed, and retired public keys: `id:base64` of 32 bytes.
    AUDIT_SIGNING_KEY: { type: 'string', pattern: BASE64_KEY_ENTRY_PATTERN, nullable: true },
    AUDIT_SIGNING_PUBLIC_KEYS: { type: 'string', pattern: BASE64_KEY_RING_PATTERN, nullable: true },
    AUDIT_DIGEST_DIR: optionalString,
    PERSON_HASH_KEY: { type: 'string', pattern: HEX_OR_BASE64_KEY_PATTERN, nullable: true },
    ERASURE_RECHECK_MS: int(1_000, 60_000, 3_600_000),
    ERASURE_RECHECK_MAX_MS: int(1_000, 900_000, 86_400_000),
    AUDIT_DIGEST_INTERVAL_MS: int(1_000, 3_600_000, 86_400_000),
    RECOVER_RATE_PER_SECOND: int(1, 10, 1_000),
    REDELIVER_CALLS_PER_MINUTE: int(1, 60, 10_000),
    RECOVER_CALLS_PER_MINUTE: int(1, 5, 1_000),
    READ_CALLS_PER_SECOND: int(1, 10, 100_000),
    REFUSED_CALLS_PER_MINUTE: int(1, 30, 100_000),
    AUDITED_WRITES_PER_MINUTE: int(1, 120, 1_000_000),
    PORTAL_LINKS_PER_PROJECT: int(1, 50, 100_000),
    ALERT_AFTER_MS: int(1_000, 900_000),
    ALERT_WEBHOOK_URL: { type: 'string', pattern: '^https?://', nullable: true },
    ALERT_WEBHOOK_SECRET: { type: 'string', minLength: 16, nullable: true },
    METRICS_TOKEN: { type: 'string', minLength: 16, nullable: true },
    WORKER_METRICS_PORT: { type: 'integer', minimum: 1, maximum: 65535, nullable: true },
    WORKER_METRICS_HOST: { type: 'string', pattern: '^[A-Za-z0-9.:-]+$', default: '127.0.0.1' },
    ALLOW_UNENCRYPTED_EVENTS: { type: 'boolean', default: false },
    PAYLOAD_ENCRYPTION_KEYS: { type: 'string', pattern: BASE64_KEY_RING_PATTERN, nullable: true },
    OPERATOR_SUBJECTS: optionalString,
    OPERATOR_ROLE: optionalString,
    CODEC_CORS_ORIGINS: { type: 'string', pattern: '^https?://[^,\\s]+(,https?://[^,\\s]+)*$', nullable: true },
    ALLOW_HTTP_WEBHOOK_URLS: { type: 'boolean', default: false },
    PUBLIC_BASE_URL: { type: 'string', pattern: '^https?://[^\\s?#]+$', nullable: true },
    PORTAL_FRAME_ANCESTORS: { type: 'string', pattern: "^https?://[^,\\s;']+(,https?://[^,\\s;']+)*$", nullable: true },
    DEV_CODEC_WITHOUT_TOKEN: { type: 'boolean', default: false },
    DELIVERY_TRACEPARENT: { type: 'boolean', default: true },
  },
  required: [],
  additionalProperties: true,
};

const validate = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true }).compile(schema);

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Which optional settings a process cannot run without. */
export interface ConfigNeeds {
  database?: boolean;
  auth?: boolean;
  temporal?: boolean;
  /** Writes audit rows (API, worker, the CLI's audited commands): production needs the audit keys and digest directory. */
  audit?: boolean;
  /**
   * A standalone process (`start:api`, `start:worker`, the image): NODE_ENV unset means production, and only an
   * explicit NODE_ENV=development lets it run on keys it generated itself.
   */
  standalone?: boolean;
  /** A command that opens no secret and no payload (`webhooks migrate`): production asks it for no keys. */
  withoutKeys?: boolean;
  /** Hashes a person's userUUID (API, worker, the CLI's erasure commands): production needs PERSON_HASH_KEY. */
  persons?: boolean;
}

/**
 * Reads and validates the environment. Unknown variables are ignored; empty strings count as unset.
 * Throws a ConfigError naming every variable that is missing or wrong.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, needs: ConfigNeeds = {}): Config {
  const candidate: Record<string, unknown> = {};
  for (const key of Object.keys(schema.properties as object)) {
    const value = env[key];
    if (value !== undefined && value !== '') candidate[key] = value;
  }
  const nodeEnvDefaulted = needs.standalone && candidate.NODE_ENV === undefined;
  if (nodeEnvDefaulted) candidate.NODE_ENV = 'production';
  const problems: string[] = [];
  if (!validate(candidate)) {
    for (const error of validate.errors ?? []) {
      // Nothing is required by the schema, so every error is about one variable: its path is /NAME.
      // Stryker disable next-line StringLiteral: Ajv gives every error a message (its messages option is on).
      problems.push(`${error.instancePath.slice(1)} ${error.message ?? 'is invalid'}`);
    }
  }
  const config = candidate as unknown as Config;
  if (needs.database && !config.DATABASE_URL)
    problems.push('DATABASE_URL is required (postgres://user:pass@host:5432/db)');
  if (needs.temporal && !config.TEMPORAL_ADDRESS) problems.push('TEMPORAL_ADDRESS is required (host:7233)');
  if (needs.auth && !config.JWT_SECRET && !config.JWT_JWKS_URI)
    problems.push('JWT_SECRET or JWT_JWKS_URI is required to authenticate API callers');
  if (config.JWT_SECRET && config.JWT_JWKS_URI) problems.push('set only one of JWT_SECRET and JWT_JWKS_URI');
  if (Boolean(config.TEMPORAL_TLS_CERT_PATH) !== Boolean(config.TEMPORAL_TLS_KEY_PATH))
    problems.push('TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH go together');
  if (config.TEMPORAL_OAUTH_TOKEN_URL) {
    if (!config.TEMPORAL_OAUTH_CLIENT_ID || !config.TEMPORAL_OAUTH_CLIENT_SECRET)
      problems.push(
        'TEMPORAL_OAUTH_CLIENT_ID and TEMPORAL_OAUTH_CLIENT_SECRET are required with TEMPORAL_OAUTH_TOKEN_URL',
      );
    if (config.TEMPORAL_API_KEY) problems.push('set only one of TEMPORAL_API_KEY and TEMPORAL_OAUTH_TOKEN_URL');
  } else if (config.TEMPORAL_OAUTH_CLIENT_ID || config.TEMPORAL_OAUTH_CLIENT_SECRET)
    problems.push(
      'TEMPORAL_OAUTH_TOKEN_URL is required with TEMPORAL_OAUTH_CLIENT_ID and TEMPORAL_OAUTH_CLIENT_SECRET',
    );
  // A schedule that could end a delivery early: a give-up window shorter than one attempt, a cap below the start.
  if (config.DELIVERY_MAX_INTERVAL_MS < config.DELIVERY_INITIAL_INTERVAL_MS)
    problems.push('DELIVERY_MAX_INTERVAL_MS must be at least DELIVERY_INITIAL_INTERVAL_MS');
  if (config.DELIVERY_GIVE_UP_AFTER_MS < 2 * config.WEBHOOK_TIMEOUT_MS + config.DELIVERY_MAX_INTERVAL_MS)
    problems.push(
      'DELIVERY_GIVE_UP_AFTER_MS must leave room for two attempts: at least 2 × WEBHOOK_TIMEOUT_MS + DELIVERY_MAX_INTERVAL_MS',
    );
  // Production is every NODE_ENV but development (a standalone process defaults to it): generated keys, http URLs and
  // open endpoints are for development only.
  const production = !isDevelopment(config);
  if (production && !needs.withoutKeys && !config.WEBHOOK_SECRET_KEY && !config.WEBHOOK_SECRET_KEYS)
    problems.push(
      'WEBHOOK_SECRET_KEY is required in production (32 bytes as 64 hex digits or base64), or the ring WEBHOOK_SECRET_KEYS',
    );
  if (production && !needs.withoutKeys && !config.PAYLOAD_ENCRYPTION_KEYS)
    problems.push(
      'PAYLOAD_ENCRYPTION_KEYS is required in production (key-id:base64 of 32 bytes, e.g. k1:$(openssl rand -base64 32))',
    );
  if (production && needs.audit)
    for (const [name, what] of [
      ['AUDIT_HMAC_KEYS', 'the audit chain key ring, id:key of 32 bytes, e.g. a1:$(openssl rand -hex 32)'],
      ['AUDIT_SIGNING_KEY', 'the Ed25519 digest key, id:base64 seed; `webhooks audit keygen` prints one'],
      ['AUDIT_DIGEST_DIR', 'where signed digests go, out of reach of the database'],
    ] as const)
      if (!config[name]) problems.push(`${name} is required in production (${what})`);
  if (production && needs.persons && !config.PERSON_HASH_KEY)
    problems.push(
      'PERSON_HASH_KEY is required in production (the key of the person hashes an erasure finds deliveries by: ' +
        '32 bytes as 64 hex digits or base64, e.g. $(openssl rand -hex 32); never change it once deliveries are logged)',
    );
  if (production && config.AUDIT_RETENTION_DAYS < AUDIT_RETENTION_FLOOR_DAYS)
    problems.push(
      `AUDIT_RETENTION_DAYS must be at least ${AUDIT_RETENTION_FLOOR_DAYS} in production (six years: HIPAA documentation retention)`,
    );
  if (config.PAYLOAD_ENCRYPTION_KEYS && validate.errors == null) {
    try {
      parseKeyRing(config.PAYLOAD_ENCRYPTION_KEYS, 'PAYLOAD_ENCRYPTION_KEYS', BASE64_KEYS);
    } catch (error) {
      problems.push((error as Error).message);
    }
  }
  // The codec endpoint decrypts patient data: in production only operators' tokens open it.
  if (production && config.DEV_CODEC_WITHOUT_TOKEN)
    problems.push('DEV_CODEC_WITHOUT_TOKEN must not be set in production: the codec endpoint is for operators only');
  if (config.ALERT_WEBHOOK_URL && !config.ALERT_WEBHOOK_SECRET)
    problems.push('ALERT_WEBHOOK_SECRET is required with ALERT_WEBHOOK_URL (alerts are signed like deliveries)');
  if (production && config.ALERT_WEBHOOK_URL && !/^https:\/\//i.test(config.ALERT_WEBHOOK_URL))
    problems.push('ALERT_WEBHOOK_URL must be an https:// URL in production');
  // The API (needs.auth) serves /metrics: in production to a bearer of METRICS_TOKEN only.
  if (production && needs.auth && !config.METRICS_TOKEN)
    problems.push('METRICS_TOKEN is required in production (the bearer token of /metrics, at least 16 characters)');
  // Portal links carry a token: in production they point at a configured https origin, never at a Host header.
  if (production && needs.auth && !config.PUBLIC_BASE_URL)
    problems.push('PUBLIC_BASE_URL is required in production (https://where customers reach the API; portal links)');
  if (production && config.PUBLIC_BASE_URL && !/^https:\/\//i.test(config.PUBLIC_BASE_URL))
    problems.push('PUBLIC_BASE_URL must be an https:// URL in production');
  // Node answers 408 to a request whose headers are late only when headersTimeout is below requestTimeout.
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS)
    problems.push('HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS');
  // Without an audience and an issuer, any token the identity provider signs (for any other app) would be accepted.
  if (production && config.JWT_JWKS_URI) {
    if (!config.JWT_ISSUER) problems.push('JWT_ISSUER is required in production when JWT_JWKS_URI is set');
    if (!config.JWT_AUDIENCE) problems.push('JWT_AUDIENCE is required in production when JWT_JWKS_URI is set');
    if (!/^https:\/\//i.test(config.JWT_JWKS_URI)) problems.push('JWT_JWKS_URI must be an https:// URL in production');
  }
  // The client secret travels to it.
  if (production && config.TEMPORAL_OAUTH_TOKEN_URL && !/^https:\/\//i.test(config.TEMPORAL_OAUTH_TOKEN_URL))
    problems.push('TEMPORAL_OAUTH_TOKEN_URL must be an https:// URL in production');
  // Notices name projects and the mail server's password is in the URL: never over a connection in clear.
  if (production && config.SMTP_URL && !smtpRequiresTls(config.SMTP_URL))
    problems.push(
      'SMTP_URL must use TLS in production: smtps://… (TLS from the start) or smtp://…?requireTLS=true (STARTTLS ' +
        'required), without ignoreTLS or tls.rejectUnauthorized=false',
    );
  // A poll holds a slot: more pollers than slots would only wait for one.
  if ((config.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS ?? 0) > config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS)
    problems.push('WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS must not exceed WORKER_MAX_CONCURRENT_WORKFLOW_TASKS');
  if ((config.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS ?? 0) > config.WORKER_MAX_CONCURRENT_ACTIVITIES)
    problems.push('WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS must not exceed WORKER_MAX_CONCURRENT_ACTIVITIES');
  if (config.BREAKER_MAX_OPEN_MS < config.BREAKER_OPEN_MS)
    problems.push('BREAKER_MAX_OPEN_MS must be at least BREAKER_OPEN_MS');
  if (config.ERASURE_RECHECK_MAX_MS < config.ERASURE_RECHECK_MS)
    problems.push('ERASURE_RECHECK_MAX_MS must be at least ERASURE_RECHECK_MS');
  // The standard OpenTelemetry variables (read by the SDK itself): checked here, so a typo fails the start.
  problems.push(...telemetrySettings(env).problems);
  // The shared OTLP endpoint alone leaves a worker's Prometheus endpoint as it is; OTLP metrics asked for by name clash.
  if (config.WORKER_METRICS_PORT !== undefined && otlpMetricsNamed(env))
    problems.push(
      'set WORKER_METRICS_PORT or the OTLP metrics variables, not both: the worker exports its metrics one way',
    );
  if (problems.length > 0 && nodeEnvDefaulted)
    problems.unshift(
      'NODE_ENV is not set, so this process runs as production (NODE_ENV=development for generated keys)',
    );
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  return config;
}

/** Whether nodemailer, given this SMTP_URL, sends only over TLS it verifies (its query parameters are its options). */
export function smtpRequiresTls(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const { protocol, searchParams } = new URL(url);
  if (searchParams.get('ignoreTLS') === 'true' || searchParams.get('tls.rejectUnauthorized') === 'false') return false;
  return protocol === 'smtps:' || (protocol === 'smtp:' && searchParams.get('requireTLS') === 'true');
}

import type { Server } from 'node:http';
import type { Knex } from 'knex';
import type { Client } from '@temporalio/client';
import { isDevelopment, loadConfig, type Config } from '../common/config';
import { createLogger, prettyLogs, type Logger } from '../common/telemetry/logger';
import { createSecretBox, resolveSecretKeyRing, type SecretBox } from '../common/crypto/secrets';
import { auditTrailKeysFromConfig } from '../common/crypto/audit-keys';
import { resolvePersonHashKey } from '../common/crypto/person-hash-key';
import { onShutdownSignal } from '../common/signals';
import { installTracing } from '../common/telemetry/tracing-sdk';
import { otlpMetricsExporter, otlpMetricsNamed } from '../common/telemetry/settings';
import { apiMetricsSource } from './health/metrics';
import { startOtlpMetrics } from './health/otlp-metrics';
import type { SendTestEvent } from './webhooks/test-event';
import {
  assertSchemaCurrent,
  configureAuditTrail,
  createDb,
  dataKeyStore,
  dbPoolOptions,
  migrateToLatest,
} from '../db';
import { temporalConnectionOptions } from '../common/temporal/connection';
import { lazyTemporalClient } from './http/lazy-temporal';
import { createTestEventSender } from './webhooks/test-event';
import { createApp, type AppDeps } from './app';
import { testSlotLeaseMs } from './http/send-limits';
import { createRedeliveryStarter, createWorkflowEndWatcher } from './deliveries/redelivery';
import { createErasureStarter } from './erasures/erasures';
import { createPurgeStarter } from './purges/purges';
import { createHttpServer } from './http/http-server';
import { authOptionsFromConfig } from './auth/authenticate';
import { readinessConnection, searchAttributesCheck } from './health/router';
import { codecAccessFromConfig } from './codec/router';
import { payloadCodecFromConfig } from '../common/crypto/payload-codec';
import { webhookUrlPolicy } from '../common/registration/webhook-url';
import { createPortalTokens, portalSigningKeys } from './auth/portal-tokens';

/** Connections a combined launcher may share with the API; whatever is passed here is not closed by close(). */
export interface StartApiDeps {
  db?: Knex;
  temporal?: Client;
  /**
   * `temporal` is a client on the NativeConnection of a worker in this process that polls TEMPORAL_TASK_QUEUE in
   * TEMPORAL_NAMESPACE (`npm start`): the API's own starts ask Temporal to hand their first task to it (eager start).
   */
  eagerStart?: boolean;
  sendTestEvent?: SendTestEvent;
  /** Opens registration secrets; made from WEBHOOK_SECRET_KEY when not given. */
  secretBox?: SecretBox;
}

export interface RunningApi {
  server: Server;
  /** Stops accepting, lets in-flight requests finish, then closes what startApi opened. */
  close(): Promise<void>;
}

export const SHUTDOWN_TIMEOUT_MS = 10_000;

/** Connects, migrates (development) or checks the schema is current (production), and serves the API on config.PORT. */
export async function startApi(config: Config, logger: Logger, deps: StartApiDeps = {}): Promise<RunningApi> {
  if (config.DEV_CODEC_WITHOUT_TOKEN)
    logger.warn(
      'DEV_CODEC_WITHOUT_TOKEN=true: /codec decodes for callers on this machine without a token (development)',
    );
  // Every audited action's row is chained with the HMAC key and journaled out of the database's reach.
  configureAuditTrail({
    ...auditTrailKeysFromConfig(config, logger),
    onJournalError: (error) => logger.error({ err: error }, 'audit journal line not written'),
  });
  // The starts of tests and redeliveries traced from the API, when the OTEL_* variables say so.
  const tracing = installTracing('webhook-api');
  const ownDb = deps.db ? undefined : createDb(config.DATABASE_URL!, dbPoolOptions(config));
  const db = deps.db ?? ownDb!;
  // One codec for the API's client and its codec endpoint: each project's payloads under its data key.
  const payloadCodec = payloadCodecFromConfig(config, logger, dataKeyStore(db));
  const ownTemporal = deps.temporal
    ? undefined
    : lazyTemporalClient(config, logger.child({ component: 'temporal-token' }), payloadCodec);
  const temporal = deps.temporal ?? (() => ownTemporal!.get());
  const readiness = readinessConnection({
    ...temporalConnectionOptions(config),
    // Behind Temporal's authorizer the probe reads search attributes with the client's token.
    ...(config.TEMPORAL_OAUTH_TOKEN_URL && ownTemporal && { apiKey: () => ownTemporal.accessToken() }),
  });
  const searchAttributes = searchAttributesCheck(readiness, config.TEMPORAL_NAMESPACE, logger);
  // The same series as /metrics over OTLP, when asked for by name (api/health/otlp-metrics.ts).
  const otlpMetrics = otlpMetricsNamed(process.env)
    ? startOtlpMetrics('webhook-api', apiMetricsSource(db), otlpMetricsExporter(process.env), logger)
    : undefined;
  /** Closes what startApi opened, each whatever happens to the others; the last metrics read the database first. */
  const closeOwned = async () => {
    await otlpMetrics?.shutdown().catch(() => undefined);
    await Promise.allSettled([readiness.close(), ownTemporal?.close(), ownDb?.destroy(), tracing?.flush()]);
  };
  try {
    // Says at start what missing search attributes cost (or, with Temporal down, at the first /readyz that reaches it);
    // behind the authorizer, once the client has its token.
    void (config.TEMPORAL_OAUTH_TOKEN_URL && ownTemporal ? ownTemporal.get() : Promise.resolve())
      .then(() => searchAttributes())
      .catch(() => undefined);
    // In production migrations are `webhooks migrate`'s, as the owner: the API's role may not change the schema.
    if (isDevelopment(config)) {
      const applied = await migrateToLatest(db);
      logger.info({ applied }, 'database migrations applied');
    } else await assertSchemaCurrent(db);
    const sendTestEvent: SendTestEvent =
      deps.sendTestEvent ?? createTestEventSender(temporal, config, { eagerStart: deps.eagerStart });
    const keyRing = resolveSecretKeyRing(config, logger);
    const personHashKey = resolvePersonHashKey(config, logger);
    const testEventLimits = {
      perMinute: config.TEST_EVENTS_PER_MINUTE,
      waitMs: config.TEST_DELIVERY_WAIT_MS,
      attemptMs: config.WEBHOOK_TIMEOUT_MS,
    };
    const appDeps: AppDeps = {
      db,
      secretBox: deps.secretBox ?? createSecretBox(keyRing),
      logger,
      auth: authOptionsFromConfig(config),
      sendTestEvent,
      testEventLimits,
      redelivery: createRedeliveryStarter(temporal, config, { eagerStart: deps.eagerStart, logger, personHashKey }),
      recoverRatePerSecond: config.RECOVER_RATE_PER_SECOND,
      redeliveryLimits: {
        redeliverPerMinute: config.REDELIVER_CALLS_PER_MINUTE,
        recoverPerMinute: config.RECOVER_CALLS_PER_MINUTE,
      },
      readLimits: { perSecond: config.READ_CALLS_PER_SECOND },
      refusalLimits: { perMinute: config.REFUSED_CALLS_PER_MINUTE },
      writeLimits: { perMinute: config.AUDITED_WRITES_PER_MINUTE },
      // Until the TEST attempt has ended, which may be after the answer: as long as the TEST slot's lease.
      watchWorkflowEnd: createWorkflowEndWatcher(temporal, testSlotLeaseMs(testEventLimits)),
      metricsToken: config.METRICS_TOKEN,
      webhookUrlPolicy: webhookUrlPolicy(config),
      pauseMaxHours: config.PAUSE_MAX_HOURS,
      codec: { codec: payloadCodec, ...codecAccessFromConfig(config) },
      erasures: { personHashKey, start: createErasureStarter(temporal, config) },
      purges: { start: createPurgeStarter(temporal, config) },
      portal: {
        tokens: createPortalTokens(portalSigningKeys(keyRing)),
        publicBaseUrl: config.PUBLIC_BASE_URL,
        linksPerProject: config.PORTAL_LINKS_PER_PROJECT,
        frameAncestors: config.PORTAL_FRAME_ANCESTORS?.split(','),
      },
    };
    const app = createApp({ ...appDeps, readiness: { temporal: readiness, searchAttributes } });
    const server = createHttpServer(app, config).listen(config.PORT);
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve).once('error', reject);
    });
    logger.info({ address: server.address() }, 'API listening');

    const close = async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await closeOwned();
    };
    return { server, close };
  } catch (error) {
    await closeOwned();
    throw error;
  }
}

/** Entry point of `npm run start:api`: fails fast on bad configuration, shuts down in order on SIGINT/SIGTERM. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(process.env, { database: true, auth: true, audit: true, persons: true, standalone: true });
  } catch (error) {
    createLogger().fatal((error as Error).message);
    process.exitCode = 1;
    return;
  }
  const logger = createLogger(config.LOG_LEVEL, 'webhooks', undefined, {
    pretty: prettyLogs(config),
    otlpService: 'webhook-api',
  });
  const api = await startApi(config, logger);
  onShutdownSignal(logger, SHUTDOWN_TIMEOUT_MS, () => api.close());
}

if (require.main === module) {
  main().catch((error: unknown) => {
    createLogger().fatal({ err: error }, 'API failed to start');
    process.exit(1);
  });
}

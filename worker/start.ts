import type { PayloadCodec } from '@temporalio/common';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, createWebhookHttpClient, egressProxy, proxyOrigin, traceHttpClient } from '../activities';
import { createErasureActivities } from '../activities/erasure';
import { createPurgeActivities } from '../activities/purge';
import { temporalConnectionOptions, temporalTokenRefresher } from '../common/temporal/connection';
import { isDevelopment, type Config } from '../common/config';
import type { Logger } from '../common/telemetry/logger';
import { createSecretBox, resolveSecretKeyRing, type SecretBox } from '../common/crypto/secrets';
import {
  FAILURE_CONVERTER_PATH,
  encryptedDataConverter,
  unencryptedEventsAllowed,
  workerPayloadCodecFromConfig,
  type EncryptionCodec,
} from '../common/crypto/payload-codec';
import { assertSchemaCurrent, configureAuditTrail, createDb, dataKeyStore, dbPoolOptions } from '../db';
import { DELIVERY_SEARCH_ATTRIBUTE_KEYS, PersonHashKey, attemptDeadlineMs } from '../common/contract';
import {
  isMissing,
  missingSearchAttributesMessage,
  namespaceSearchAttributes,
  type NamespaceSearchAttributes,
} from '../common/temporal/namespace-search-attributes';
import { resolvePersonHashKey } from '../common/crypto/person-hash-key';
import { installRuntimeLogger } from './runtime';
import { startSecretSweep } from './secret-sweep';
import { startAuditDigests } from './audit-digests';
import { auditTrailKeysFromConfig } from '../common/crypto/audit-keys';
import { startDeliveryLogRetention } from './delivery-log-retention';
import { startBreakerResumer } from './breaker-resumer';
import { startPauseExpiry } from './pause-expiry';
import { createNotifier } from '../activities/notices';
import { unencryptedActivityInputGuard } from './unencrypted-guard';
import { installTracing } from '../common/telemetry/tracing-sdk';
import { otlpMetricsExporter, telemetrySettings } from '../common/telemetry/settings';
import { WORKFLOW_INTERCEPTOR_MODULE, tracingActivityInterceptors, workflowSpanSinks } from './tracing';

/** Written by `npm run build` (worker/build-workflow-bundle.ts); absent when running from sources. */
export const WORKFLOW_BUNDLE_PATH = join(__dirname, '..', 'workflow-bundle.js');

export interface RunningWorker {
  worker: Worker;
  /** The worker's payload codec (its data keys cached), for a client in the same process (`npm start`'s API). */
  payloadCodec: PayloadCodec;
  /** Settles when the worker has stopped (rejects when it crashed). */
  run: Promise<void>;
  /** Stops polling, lets in-flight attempts finish (WORKER_SHUTDOWN_GRACE_MS), then closes connections. */
  shutdown(): Promise<void>;
}

/**
 * What `npm run build` bundles: the workflows, the failure converter that encodes their failures' messages, and the
 * tracing interceptors (inert for a delivery started without a trace context).
 */
export function workflowBundleOptions(): {
  workflowsPath: string;
  failureConverterPath: string;
  workflowInterceptorModules: string[];
} {
  return {
    workflowsPath: require.resolve('../workflows'),
    failureConverterPath: FAILURE_CONVERTER_PATH,
    workflowInterceptorModules: [WORKFLOW_INTERCEPTOR_MODULE],
  };
}

/** Where the workflow code comes from: the prebuilt bundle in production, the sources in development and tests. */
export function workflowSource(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  return existsSync(WORKFLOW_BUNDLE_PATH)
    ? { workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }
    : { workflowsPath: require.resolve('../workflows') };
}

/**
 * Slots, pollers and cache from the WORKER_* settings (the bench's engine-limit worker takes the same). Pollers go
 * through the poller-behavior options: SDK 1.24 still declares maxConcurrentWorkflowTaskPolls and
 * maxConcurrentActivityTaskPolls but no longer reads them.
 */
export function workerTuningOptions(
  config: Config,
): Pick<
  WorkerOptions,
  | 'maxConcurrentActivityTaskExecutions'
  | 'maxConcurrentLocalActivityExecutions'
  | 'maxConcurrentWorkflowTaskExecutions'
  | 'maxCachedWorkflows'
  | 'workflowTaskPollerBehavior'
  | 'activityTaskPollerBehavior'
  | 'nonStickyToStickyPollRatio'
> {
  const polls = (maximum: number | undefined) =>
    maximum === undefined ? undefined : ({ type: 'simple-maximum', maximum } as const);
  return {
    maxConcurrentActivityTaskExecutions: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: config.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
    maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    workflowTaskPollerBehavior: polls(config.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS),
    activityTaskPollerBehavior: polls(config.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS),
    nonStickyToStickyPollRatio: config.WORKER_NONSTICKY_POLL_RATIO,
  };
}

/**
 * The namespace's search attributes, and what missing ones cost, said once. Upserting a missing ProjectId/WebhookType
 * would fail every workflow task, so the workflow skips them rather than stall deliveries.
 */
async function searchAttributesOf(
  connection: NativeConnection,
  config: Config,
  logger: Logger,
): Promise<NamespaceSearchAttributes> {
  const found = await namespaceSearchAttributes(connection.operatorService, config.TEMPORAL_NAMESPACE);
  if (found.state === 'missing')
    logger.warn(
      { missing: found.missing, namespace: config.TEMPORAL_NAMESPACE },
      missingSearchAttributesMessage(found.missing, config.TEMPORAL_NAMESPACE),
    );
  // Hosted namespaces may refuse the operator API: assume they were registered out of band.
  if (found.state === 'unknown')
    logger.warn({ err: found.error }, 'could not list search attributes; assuming they exist');
  return found;
}

export async function startWorker(
  config: Config,
  logger: Logger,
  /** Opens registration secrets; made from WEBHOOK_SECRET_KEY when not given. */
  secretBox: SecretBox = createSecretBox(resolveSecretKeyRing(config, logger)),
): Promise<RunningWorker> {
  if (!config.DATABASE_URL) throw new Error('DATABASE_URL is required to run the worker');
  // Breaker transitions and a pause's end write audit rows: keyed and journaled like the API's.
  configureAuditTrail({
    ...auditTrailKeysFromConfig(config, logger),
    onJournalError: (error) => logger.error({ err: error }, 'audit journal line not written'),
  });
  installRuntimeLogger(
    logger,
    config.WORKER_METRICS_PORT === undefined
      ? undefined
      : { host: config.WORKER_METRICS_HOST, port: config.WORKER_METRICS_PORT },
    // Over OTLP when the OTEL_* variables say so and no Prometheus endpoint was asked for (config refuses both named).
    config.WORKER_METRICS_PORT === undefined && telemetrySettings(process.env).metrics
      ? otlpMetricsExporter(process.env)
      : undefined,
  );
  // Spans of the workflow, activities and POSTs, exported over OTLP when the OTEL_* variables say so.
  const tracing = installTracing('webhook-worker');
  const personHashKey = resolvePersonHashKey(config, logger);
  if (config.ALLOW_UNENCRYPTED_EVENTS)
    logger.warn(
      'ALLOW_UNENCRYPTED_EVENTS=true: events whose input is not encrypted with PAYLOAD_ENCRYPTION_KEYS are delivered ' +
        '(a migration window); anyone who can reach Temporal can then cause a signed delivery',
    );
  else if (!unencryptedEventsAllowed(config))
    logger.info(
      'events whose input is not encrypted with PAYLOAD_ENCRYPTION_KEYS are refused, and so are inputs not sealed for ' +
        'their workflow',
    );
  if (config.ALLOW_PRIVATE_WEBHOOK_URLS)
    logger.warn('ALLOW_PRIVATE_WEBHOOK_URLS=true: the SSRF guard is off; never in production');
  if (config.HTTPS_PROXY || config.HTTP_PROXY)
    logger.info(
      {
        httpsProxy: proxyOrigin(config.HTTPS_PROXY),
        httpProxy: proxyOrigin(config.HTTP_PROXY),
        noProxy: config.NO_PROXY,
      },
      'deliveries leave through the egress proxy',
    );
  const db = createDb(config.DATABASE_URL, {
    ...dbPoolOptions(config),
    max: Math.min(config.WORKER_MAX_CONCURRENT_ACTIVITIES, 20),
  });
  // Read before connecting: a worker without the key ring must not start (nor, in production, with a missing one).
  // Each project's payloads are sealed under its data key, kept wrapped in the database.
  let payloadCodec: EncryptionCodec;
  try {
    payloadCodec = workerPayloadCodecFromConfig(config, logger, dataKeyStore(db));
  } catch (error) {
    await db.destroy();
    throw error;
  }
  const dataConverter = encryptedDataConverter(payloadCodec);
  // Development's `npm start` migrates in its API; in production `webhooks migrate` must have run first.
  if (!isDevelopment(config))
    await assertSchemaCurrent(db).catch(async (error: unknown) => {
      await Promise.allSettled([db.destroy(), tracing?.flush()]);
      throw error;
    });
  const { address, tls } = temporalConnectionOptions(config);
  // The connection takes each renewed token before the one it carries expires (polls and calls alike).
  const renewing: { connection?: NativeConnection } = {};
  const tokenLog = logger.child({ component: 'temporal-token' });
  const tokens = await temporalTokenRefresher(config, tokenLog, (token) => renewing.connection?.setApiKey(token)).catch(
    async (error: unknown) => {
      await db.destroy();
      throw error;
    },
  );
  const firstToken = tokens?.current();
  const connection = await NativeConnection.connect({
    address,
    tls,
    apiKey: firstToken ?? config.TEMPORAL_API_KEY,
  }).catch(async (error: unknown) => {
    tokens?.stop();
    await db.destroy();
    throw error;
  });
  renewing.connection = connection;
  if (tokens && tokens.current() !== firstToken) await connection.setApiKey(tokens.current());
  const untracedHttp = createWebhookHttpClient({
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    allowPrivate: config.ALLOW_PRIVATE_WEBHOOK_URLS,
    proxy: egressProxy(config),
  });
  const http = tracing ? traceHttpClient(untracedHttp, { traceparent: config.DELIVERY_TRACEPARENT }) : untracedHttp;
  const stopSecretSweep = startSecretSweep(db, config.SECRET_SWEEP_INTERVAL_MS, logger);
  const stopRetention = startDeliveryLogRetention(db, config.DELIVERY_LOG_RETENTION_DAYS, logger);
  const stopAuditDigests = startAuditDigests(db, config.AUDIT_DIGEST_INTERVAL_MS, logger);
  // Projects' own contacts are told through the worker's delivery client (SSRF guard, egress proxy) and SMTP_URL.
  const notifier = createNotifier({
    db,
    secretBox,
    logger: logger.child({ component: 'notices' }),
    http,
    ...(config.SMTP_URL && { smtp: { url: config.SMTP_URL, from: config.SMTP_FROM } }),
  });
  const stopPauseExpiry = startPauseExpiry(db, logger, undefined, notifier.notify);
  const stopResumer = startBreakerResumer(
    db,
    connection,
    {
      namespace: config.TEMPORAL_NAMESPACE,
      dataConverter,
      ratePerSecond: config.BREAKER_RESUME_RATE_PER_SECOND,
      probeLeaseMs: attemptDeadlineMs(config.WEBHOOK_TIMEOUT_MS),
    },
    logger,
  );
  /** Closes what the worker opened, each whatever happens to the others. */
  const closeAll = async () => {
    tokens?.stop();
    stopSecretSweep();
    stopRetention();
    stopAuditDigests();
    stopPauseExpiry();
    notifier.close();
    await stopResumer();
    await Promise.allSettled([connection.close(), http.close(), db.destroy(), tracing?.flush()]);
  };
  const source = workflowSource();
  try {
    const searchAttributes = await searchAttributesOf(connection, config, logger);
    const activities = createActivities({
      db,
      http,
      config,
      secretBox,
      logger: logger.child({ component: 'delivery' }),
      searchAttributes: !isMissing(
        searchAttributes,
        DELIVERY_SEARCH_ATTRIBUTE_KEYS.map((key) => key.name),
      ),
      // Each logged delivery carries its person's keyed hash, which an erasure finds it by.
      personHashKey,
      // Inputs sealed for no workflow come from clients before sealing: accepted only where plain events are.
      requireBoundInputs: !unencryptedEventsAllowed(config),
      notify: notifier.notify,
      alerts: {
        alertAfterMs: config.ALERT_AFTER_MS,
        ...(config.ALERT_WEBHOOK_URL &&
          config.ALERT_WEBHOOK_SECRET && {
            webhook: { url: config.ALERT_WEBHOOK_URL, secret: config.ALERT_WEBHOOK_SECRET },
          }),
      },
    });
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter });
    // Erasures run on the same queue: they find a person's delivery runs and delete the closed ones from Temporal.
    const erasureActivities = createErasureActivities({
      db,
      temporal: {
        client,
        namespace: config.TEMPORAL_NAMESPACE,
        listByPersonHash: !isMissing(searchAttributes, [PersonHashKey.name]),
      },
      logger: logger.child({ component: 'erasure' }),
    });
    // So do purges: a project's executions deleted by Temporal's batch jobs, its rows, its data keys.
    const purgeActivities = createPurgeActivities({
      db,
      temporal: { client, namespace: config.TEMPORAL_NAMESPACE },
      logger: logger.child({ component: 'purge' }),
    });
    const worker = await Worker.create({
      connection,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      ...source,
      activities: { ...activities, ...erasureActivities, ...purgeActivities },
      dataConverter,
      interceptors: {
        activity: [
          ...(tracing ? tracingActivityInterceptors() : []),
          unencryptedActivityInputGuard(logger.child({ component: 'delivery' })),
        ],
        // From sources (development, tests); a prebuilt bundle carries the module already.
        ...(!source.workflowBundle && { workflowModules: [WORKFLOW_INTERCEPTOR_MODULE] }),
      },
      sinks: workflowSpanSinks(tracing),
      ...workerTuningOptions(config),
      shutdownGraceTime: config.WORKER_SHUTDOWN_GRACE_MS,
    });
    const run = worker.run().finally(closeAll);
    logger.info(
      { taskQueue: config.TEMPORAL_TASK_QUEUE, namespace: config.TEMPORAL_NAMESPACE, ...source },
      'worker started',
    );
    return {
      worker,
      payloadCodec,
      run,
      async shutdown() {
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await run.catch(() => undefined);
      },
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

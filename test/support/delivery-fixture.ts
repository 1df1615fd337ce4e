import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { PayloadCodec } from '@temporalio/common';
import type { Knex } from 'knex';
import { dataKeyStore } from '../../db';
import { Worker, type NativeConnection, type WorkerOptions } from '@temporalio/worker';
import { createApp, type AppDeps } from '../../api';
import { listenLocal, type LocalServer } from './jwks-server';
import { TEST_JWT_SECRET } from './tokens';
import { ISOLATION_DEFAULTS, loadConfig } from '../../common/config';
import { attemptDeadlineMs } from '../../common/contract';
import { startBreakerResumer } from '../../worker/breaker-resumer';
import { payloadCodecFromConfig } from '../../common/crypto/payload-codec';
import {
  createActivities,
  createWebhookHttpClient,
  egressProxy,
  type ActivityConfig,
  type AlertOptions,
} from '../../activities';
import type { Logger } from '../../common/telemetry/logger';
import type { DeliveryOption } from '../../activities/delivery-options';
import type { Notify } from '../../activities/notices';
import { createErasureActivities } from '../../activities/erasure';
import { createPurgeActivities, type PurgeActivities } from '../../activities/purge';
import { Registrations, captureLogger, fastConfig } from './deliveries';
import { createTestDatabase, type TestDatabase } from './postgres';
import { startTestReceiver, type TestReceiver } from './receiver';
import { uniqueTaskQueue, workflowBundle } from './temporal';
import { startBoth } from './setup';
import { TEST_PERSON_HASH_KEY } from './audit-keys';

/** The person hash key of the tests' workers and APIs (TEST_PERSON_HASH_KEY). */
export const testPersonHashKey = Buffer.from(TEST_PERSON_HASH_KEY, 'hex');

export interface DeliveryWorkerOptions {
  /** A fresh queue unless given. */
  taskQueue?: string;
  /** The suite's connection unless given: a second worker on the same task queue needs one of its own. */
  connection?: NativeConnection;
  config?: ActivityConfig;
  logger?: Logger;
  /** What the worker's start-up check of the namespace's search attributes would report. */
  searchAttributes?: boolean;
  /** The worker's codec; decodeOnlyPayloadCodec unless given. */
  payloadCodec?: PayloadCodec;
  /** Operator alerts of the activities (none unless given). */
  alerts?: AlertOptions;
  /** Refuse inputs sealed for no workflow, as a production worker does (default false). */
  requireBoundInputs?: boolean;
  /** Wraps the real activities (a test standing in for an earlier worker's scheduling). */
  wrapActivities?: (activities: ReturnType<typeof createActivities>) => ReturnType<typeof createActivities>;
  /** Tells projects' own contacts (test/endpoint-state/notices.test.ts); none told unless given. */
  notify?: Notify;
  /** CAs the worker's HTTP client trusts beside Node's (an https receiver with a certificate of the test's own CA). */
  trustedCa?: string[];
  /** What deliveries carry beyond the signed body (activities/delivery-options); the worker's own unless given. */
  deliveryOptions?: readonly DeliveryOption[];
  /** Slots of the worker, to build a backlog the server must order (priority and fairness tests). */
  slots?: Pick<WorkerOptions, 'maxConcurrentActivityTaskExecutions' | 'maxConcurrentWorkflowTaskExecutions'>;
  /** The worker's PERSON_HASH_KEY: the tests' own (TEST_PERSON_HASH_KEY) unless given; null: the worker holds none. */
  personHashKey?: Buffer | null;
  /** Whether the erasure activities list runs by PersonHash (what the worker's namespace check would say); default true. */
  listByPersonHash?: boolean;
  /** How many of a person's log rows and runs one erasure look takes (LOOK_BATCH unless given). */
  erasureLookBatch?: number;
  /** How many delivery log rows one transaction of a purge deletes (PURGE_DELIVERY_BATCH unless given). */
  purgeDeliveryBatch?: number;
  /** Wraps the real purge activities (a test failing a step once). */
  wrapPurgeActivities?: (activities: PurgeActivities) => PurgeActivities;
}

/** What a delivery suite works with; filled in by the hooks, so read it inside tests and hooks only. */
export interface DeliveryFixture {
  env: TestWorkflowEnvironment;
  database: TestDatabase;
  registrations: Registrations;
  receiver: TestReceiver;
  /** Runs a worker with the real activities (the suite's database, a real HTTP client) while `work` runs. */
  runWorker<T>(work: (taskQueue: string) => Promise<T>, options?: DeliveryWorkerOptions): Promise<T>;
}

/**
 * The worker reads what the CLI and the API encrypt (they use the development key ring in DATA_DIR, and each
 * project's data key in `db`) and writes plain payloads, so the tests' own Temporal client reads results and histories
 * without the codec.
 */
export function decodeOnlyPayloadCodec(db: Knex): PayloadCodec {
  const codec = payloadCodecFromConfig(loadConfig({ NODE_ENV: 'development' }), undefined, dataKeyStore(db));
  return {
    encode: (payloads) => Promise.resolve(payloads),
    decode: (payloads, context) => codec.decode(payloads, context),
  };
}

/** Mocha hooks of a delivery suite: one Temporal environment and database per suite, a fresh receiver per test. */
export function useDeliveryFixture(createEnvironment: () => Promise<TestWorkflowEnvironment>): DeliveryFixture {
  const fixture = { runWorker } as DeliveryFixture;
  async function runWorker<T>(work: (taskQueue: string) => Promise<T>, options: DeliveryWorkerOptions = {}) {
    const { taskQueue = uniqueTaskQueue('delivery'), config = fastConfig, searchAttributes } = options;
    const http = createWebhookHttpClient({
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: config.ALLOW_PRIVATE_WEBHOOK_URLS,
      proxy: egressProxy(config),
      trustedCa: options.trustedCa,
    });
    const worker = await Worker.create({
      connection: options.connection ?? fixture.env.nativeConnection,
      dataConverter: { payloadCodecs: [options.payloadCodec ?? decodeOnlyPayloadCodec(fixture.database.db)] },
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: {
        // The worker's erasures, as startWorker registers them beside the deliveries.
        ...createErasureActivities({
          db: fixture.database.db,
          temporal: {
            client: fixture.env.client,
            namespace: 'default',
            listByPersonHash: options.listByPersonHash ?? true,
          },
          logger: options.logger ?? captureLogger().logger,
          lookBatch: options.erasureLookBatch,
        }),
        // And its purges.
        ...(options.wrapPurgeActivities ?? ((activities) => activities))(
          createPurgeActivities({
            db: fixture.database.db,
            temporal: { client: fixture.env.client, namespace: 'default' },
            logger: options.logger ?? captureLogger().logger,
            deliveryBatch: options.purgeDeliveryBatch,
          }),
        ),
        ...(options.wrapActivities ?? ((activities) => activities))(
          createActivities({
            db: fixture.database.db,
            secretBox: fixture.registrations.secretBox,
            logger: options.logger ?? captureLogger().logger,
            config,
            http,
            searchAttributes,
            alerts: options.alerts,
            requireBoundInputs: options.requireBoundInputs,
            notify: options.notify,
            deliveryOptions: options.deliveryOptions,
            personHashKey: options.personHashKey === null ? undefined : (options.personHashKey ?? testPersonHashKey),
          }),
        ),
      },
      ...options.slots,
    });
    // The worker's resumer wakes deliveries waiting for an open breaker, as startWorker runs it.
    const stopResumer = startBreakerResumer(
      fixture.database.db,
      options.connection ?? fixture.env.nativeConnection,
      {
        namespace: 'default',
        dataConverter: { payloadCodecs: [decodeOnlyPayloadCodec(fixture.database.db)] },
        ratePerSecond: config.BREAKER_RESUME_RATE_PER_SECOND ?? ISOLATION_DEFAULTS.BREAKER_RESUME_RATE_PER_SECOND,
        probeLeaseMs: attemptDeadlineMs(config.WEBHOOK_TIMEOUT_MS),
        intervalMs: 200,
      },
      options.logger ?? captureLogger().logger,
    );
    try {
      return await worker.runUntil(work(taskQueue));
    } finally {
      await stopResumer();
      await http.close();
    }
  }
  before(async () => {
    [fixture.env, fixture.database] = await startBoth(
      createEnvironment(),
      createTestDatabase(),
      (env) => env.teardown(),
      (database) => database.destroy(),
    );
    fixture.registrations = new Registrations(fixture.database.db);
    await workflowBundle();
  });
  after(async () => {
    await fixture.env?.teardown();
    await fixture.database?.destroy();
  });
  beforeEach(async () => (fixture.receiver = await startTestReceiver()));
  afterEach(() => fixture.receiver.close());
  return fixture;
}

/**
 * The API in process on the suite's database, signing in with HS256 test tokens, for suites that call it over HTTP.
 * `overrides` adds or replaces dependencies (a URL policy, the codec). Register it after useDeliveryFixture.
 */
export function useLocalApi(fixture: DeliveryFixture, overrides: () => Partial<AppDeps> = () => ({})) {
  let server: LocalServer | undefined;
  before(async () => {
    const app = createApp({
      db: fixture.database.db,
      secretBox: fixture.registrations.secretBox,
      logger: captureLogger().logger,
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      // The test endpoint is not exercised through these suites' API.
      sendTestEvent: () => Promise.reject(new Error('not used by this suite')),
      ...overrides(),
    });
    server = await listenLocal(app.callback());
  });
  after(() => server?.close());
  return {
    get url(): string {
      return server!.url;
    },
  };
}

// The delivery log's suites (test/delivery-log-*.test.ts): a real worker with the real activities on a Temporal dev
// server, the API in process with redelivery on each test's own queue, a receiver for operator alerts, and helpers
// that call the API as a member and write log rows directly.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { createApp, type AppDeps } from '../../api/app';
import { createRedeliveryStarter } from '../../api/deliveries/redelivery';
import type { ActivityConfig } from '../../activities';
import type { DeliverWebhookEventInput } from '../../common/contract';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { captureLogger, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

/** Retries stop after 1.5 s, so a receiver answering 500 makes a delivery give up quickly. */
export const givingUp: ActivityConfig = { ...fastConfig, DELIVERY_GIVE_UP_AFTER_MS: 1_500 };
/** The operator alert webhook's secret: alerts are signed with it as deliveries are with a registration's. */
export const ALERT_SECRET = 'alert-secret-0123456789abcdef';

/** A delivery as the list and detail routes show it. */
export interface LogItem {
  id: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  attemptLog?: { attempt: number; at: string; statusCode?: number; errorCode?: string; durationMs: number }[];
}

export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
  text: string;
  contentType: string;
}

/** A new project with these members. */
export async function memberProject(db: Knex, ...members: string[]): Promise<string> {
  const id = newProjectId();
  await store.addProject(db, id);
  for (const member of members) await store.addMember(db, id, member);
  return id;
}

/**
 * `count` log rows written directly, created a minute apart from 2026-01-01T00:00Z, types alternating and every third
 * failed, for the tests of queries and purges; returns their ids newest first.
 */
export async function seedDeliveries(db: Knex, projectId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const id = `webhook-event-${projectId}-${String(i).padStart(2, '0')}`;
    const type = i % 2 === 0 ? 'FALL_DETECTION' : 'VITAL_THRESHOLD';
    await store.upsertDelivery(db, { id, projectId, type, workflowId: id }, i % 3 === 0 ? 'failed' : 'delivered');
    await db('deliveries')
      .where({ id })
      .update({ created_at: new Date(Date.UTC(2026, 0, 1, 0, i)) });
    ids.push(id);
  }
  return ids.reverse();
}

/**
 * Mocha hooks and helpers of a delivery-log suite: one Temporal dev server, database and API per suite; a fresh task
 * queue, log capture and alert receiver per test. Call inside a describe; read `taskQueue`, `log` and `alertReceiver`
 * inside tests only.
 */
export function useDeliveryLogSuite() {
  const fx = useDeliveryFixture(createLocalEnvironment);
  let api: LocalServer;
  let alertReceiver: TestReceiver;
  let taskQueue: string;
  let log: ReturnType<typeof captureLogger>;
  /** The API's dependencies, read at each request: a test may change one (metricsToken) or call a route's code. */
  const appDeps = {} as AppDeps;

  before(async () => {
    Object.assign(appDeps, {
      db: fx.database.db,
      secretBox: fx.registrations.secretBox,
      logger: captureLogger().logger,
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.reject(new Error('not used here')),
      // Each test's worker polls its own queue: redeliveries go there.
      redelivery: (row, delayMs) =>
        createRedeliveryStarter(fx.env.client, {
          TEMPORAL_TASK_QUEUE: taskQueue,
          NODE_ENV: 'development',
          ALLOW_UNENCRYPTED_EVENTS: false,
        })(row, delayMs),
      recoverRatePerSecond: 10,
    } satisfies AppDeps);
    api = await listenLocal(createApp(appDeps).callback());
  });
  after(() => api?.close());
  beforeEach(async () => {
    taskQueue = uniqueTaskQueue('log');
    log = captureLogger();
    alertReceiver = await startTestReceiver();
    appDeps.metricsToken = undefined;
  });
  afterEach(() => alertReceiver.close());

  /** A real worker with the real activities on this test's queue, alerts going to the alert receiver. */
  function withWorker<T>(work: () => Promise<T>, config = givingUp, alertAfterMs = 600_000): Promise<T> {
    return fx.runWorker(() => work(), {
      taskQueue,
      // The log's own rules are under test: the circuit breaker (test/endpoint-state/breaker.test.ts) stays out of the way.
      config: { ...config, BREAKER_FAILURE_THRESHOLD: 10_000 },
      logger: log.logger,
      alerts: { alertAfterMs, webhook: { url: alertReceiver.url, secret: ALERT_SECRET } },
    });
  }

  /** Delivers one event and waits for its workflow to end (delivered, skipped or failed); returns its id. */
  async function deliver(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = `webhook-event-${randomUUID()}`;
    const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
      args: [input],
      taskQueue,
      workflowId,
    });
    await handle.result().catch(() => undefined);
    return workflowId;
  }

  /** A request to the API, as `user` (a member's HS256 token) when given. */
  async function call<T = Record<string, unknown>>(
    method: string,
    path: string,
    options: { user?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...(options.user && bearer(hsToken(options.user))), ...options.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const response = await fetch(api.url + path, { method, headers, body });
    const text = await response.text();
    const contentType = response.headers.get('content-type') ?? '';
    return {
      status: response.status,
      body: (/json/.test(contentType) ? JSON.parse(text) : {}) as T,
      text,
      contentType,
    };
  }

  const list = (projectId: string, query = '', user = 'alice') =>
    call<{ items: LogItem[]; nextCursor: string | null; detail?: string }>(
      'GET',
      `/webhooks/project/${projectId}/deliveries${query}`,
      { user },
    );
  const detail = (projectId: string, id: string, user = 'alice') =>
    call<LogItem & { detail?: string }>('GET', `/webhooks/project/${projectId}/deliveries/${encodeURIComponent(id)}`, {
      user,
    });

  return {
    fx,
    appDeps,
    withWorker,
    deliver,
    call,
    list,
    detail,
    project: (...members: string[]) => memberProject(fx.database.db, ...members),
    seed: (projectId: string, count: number) => seedDeliveries(fx.database.db, projectId, count),
    get taskQueue() {
      return taskQueue;
    },
    get log() {
      return log;
    },
    get alertReceiver() {
      return alertReceiver;
    },
  };
}

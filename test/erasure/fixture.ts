// The erasure suites: a real worker (deliveries and erasures) on a Temporal dev server, the API in process with the
// erasure routes on each test's own queue, a receiver that verifies signatures, and helpers that deliver a person's
// events, ask for an erasure as an operator and wait for it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { createApp, type AppDeps } from '../../api/app';
import { createRedeliveryStarter } from '../../api/deliveries/redelivery';
import { createErasureStarter } from '../../api/erasures/erasures';
import type { ActivityConfig } from '../../activities';
import { personHash } from '../../common/crypto/person-hash';
import type { DeliverWebhookEventInput, DeliverWebhookEventResult } from '../../common/contract';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import * as store from '../../db';
import { captureLogger, fastConfig, newProjectId } from '../support/deliveries';
import { testPersonHashKey, useDeliveryFixture, type DeliveryWorkerOptions } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

/** The one subject the test API's operator policy lists. */
export const OPERATOR = 'ops-erin';
/** Their keyed hashes, as the worker and the API make them (TEST_PERSON_HASH_KEY). */
export const hashOf = (userUUID: string) => personHash(testPersonHashKey, userUUID);

export const fall = (projectId: string, userUUID: string): DeliverWebhookEventInput => ({
  projectId,
  webhookType: 'FALL_DETECTION',
  userUUID,
  payload: {
    userUUID,
    reasons: ['fall'],
    happenedAt: '2026-11-28T08:15:00.000Z',
    email: 'person@example.com',
    firstName: 'Pat',
    lastName: 'Doe',
  },
});

export const vital = (projectId: string, userUUID: string): DeliverWebhookEventInput => ({
  projectId,
  webhookType: 'VITAL_THRESHOLD',
  userUUID,
  payload: {
    userUUID,
    email: 'person@example.com',
    firstName: 'Pat',
    lastName: 'Doe',
    triggeredVitals: [{ vitalType: 'heartrate', badValue: 182, thresholdValue: 150, vital_id: 'v-1', reason: 'high' }],
  },
});

export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
  contentType: string;
  location: string | null;
}

export interface ErasureReply {
  id: string;
  status: string;
  personHash: string;
  requestedAt: string;
  completedAt?: string;
  counts: { deliveriesFound: number; historiesDeleted: number; logRowsDeleted: number; stillOpen: number };
  failure?: string;
  detail?: string;
}

/**
 * A dev server that removes a deleted run within a second or two: Temporal deletes a closed run only once the run's
 * close task is acknowledged, and the history service acknowledges its transfer queue every 30 s by default
 * (history.transferProcessorUpdateAckInterval), which every erasure would otherwise wait for.
 */
export const erasureEnvironment = (searchAttributes: boolean | 'without PersonHash' = true) =>
  createLocalEnvironment({
    searchAttributes,
    dynamicConfig: { 'history.transferProcessorUpdateAckInterval': '"500ms"' },
  });

/** Each retry 100-200 ms, given up after a minute: a fall a receiver refuses stays open for the test to watch. */
export const retrying: ActivityConfig = { ...fastConfig, BREAKER_FAILURE_THRESHOLD: 10_000 };

/**
 * Mocha hooks and helpers of an erasure suite (call inside a describe): one Temporal dev server, database and API per
 * suite, a fresh task queue per test. Read `taskQueue` inside tests only.
 */
export function useErasureSuite(
  createEnvironment: () => Promise<TestWorkflowEnvironment>,
  workerOptions: Pick<DeliveryWorkerOptions, 'listByPersonHash'> = {},
) {
  const fx = useDeliveryFixture(createEnvironment);
  let api: LocalServer;
  let taskQueue: string;
  const appDeps = {} as AppDeps;

  before(async () => {
    Object.assign(appDeps, {
      db: fx.database.db,
      secretBox: fx.registrations.secretBox,
      logger: captureLogger().logger,
      auth: { mode: 'secret', secret: TEST_JWT_SECRET },
      sendTestEvent: () => Promise.reject(new Error('not used here')),
      operators: { subjects: new Set([OPERATOR]) },
      // Each test's worker polls its own queue: the erasure's job goes there, and looks again after 300 ms.
      erasures: {
        personHashKey: testPersonHashKey,
        start: (request) =>
          createErasureStarter(fx.env.client, {
            TEMPORAL_TASK_QUEUE: taskQueue,
            ERASURE_RECHECK_MS: 300,
            ERASURE_RECHECK_MAX_MS: 1_000,
          })(request),
      },
    } satisfies AppDeps);
    api = await listenLocal(createApp(appDeps).callback());
  });
  after(() => api?.close());
  beforeEach(() => {
    taskQueue = uniqueTaskQueue('erasure');
  });

  /** A real worker with the real activities (deliveries and erasures) on this test's queue while `work` runs. */
  const withWorker = <T>(
    work: () => Promise<T>,
    options: Pick<DeliveryWorkerOptions, 'erasureLookBatch'> = {},
  ): Promise<T> => fx.runWorker(() => work(), { taskQueue, config: retrying, ...workerOptions, ...options });

  /** A project whose webhook goes to the test's receiver; returns its id and the webhook's secret. */
  async function project(): Promise<{ projectId: string; secret: string }> {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    return { projectId, secret };
  }

  /** Starts one event's delivery as a starter holding the key does (PersonHash at start); returns its workflow id. */
  async function start(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = `webhook-event-${randomUUID()}`;
    await startDeliveryWorkflow(fx.env.client, input, { taskQueue, workflowId, personHash: hashOf(input.userUUID) });
    return workflowId;
  }

  /** Delivers one event and waits for it to be delivered; returns its workflow id. */
  async function delivered(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = await start(input);
    const result = (await fx.env.client.workflow.getHandle(workflowId).result()) as DeliverWebhookEventResult;
    assert.equal(result.status, 'delivered', workflowId);
    return workflowId;
  }

  /** Redelivers a logged delivery as the API does (the starter holding the key); waits for it; returns its id. */
  async function redelivered(projectId: string, id: string): Promise<string> {
    const row = await store.findDelivery(fx.database.db, projectId, id);
    assert.ok(row, id);
    const starter = createRedeliveryStarter(
      fx.env.client,
      { TEMPORAL_TASK_QUEUE: taskQueue, NODE_ENV: 'development', ALLOW_UNENCRYPTED_EVENTS: false },
      { personHashKey: testPersonHashKey },
    );
    const workflowId = await starter(row, 0);
    await fx.env.client.workflow.getHandle(workflowId).result();
    return workflowId;
  }

  async function call<T = Record<string, unknown>>(
    method: string,
    path: string,
    options: { user?: string; body?: unknown; raw?: string } = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...(options.user && bearer(hsToken(options.user))) };
    const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(api.url + path, { method, headers, body });
    const text = await response.text();
    const contentType = response.headers.get('content-type') ?? '';
    return {
      status: response.status,
      body: (/json/.test(contentType) ? JSON.parse(text) : {}) as T,
      contentType,
      location: response.headers.get('location'),
    };
  }

  /** POST /erasures as the operator: 202 with the erasure's id. */
  async function requestErasure(userUUID: string): Promise<string> {
    const reply = await call<{ id: string; status: string }>('POST', '/erasures', {
      user: OPERATOR,
      body: { userUUID },
    });
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    assert.equal(reply.body.status, 'pending');
    assert.equal(reply.location, `/erasures/${reply.body.id}`);
    return reply.body.id;
  }

  const status = (id: string) => call<ErasureReply>('GET', `/erasures/${id}`, { user: OPERATOR });

  /** Polls GET /erasures/{id} until its status is `wanted` (failing at once if it failed instead). */
  async function erasureReaches(id: string, wanted: string, timeoutMs = 30_000): Promise<ErasureReply> {
    return eventually(
      `erasure ${id} ${wanted}`,
      async () => {
        const reply = await status(id);
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        if (reply.body.status === 'failed' && wanted !== 'failed') assert.fail(`erasure failed: ${reply.body.failure}`);
        return reply.body.status === wanted && reply.body;
      },
      timeoutMs,
    );
  }

  /** Whether Temporal still knows the workflow (any run of it). */
  async function described(workflowId: string): Promise<boolean> {
    try {
      await fx.env.client.workflow.getHandle(workflowId).describe();
      return true;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  /** The delivery log's rows of these workflows (by event id), with their attempts. */
  async function logRows(ids: string[]): Promise<{ deliveries: number; attempts: number }> {
    const db = fx.database.db;
    const [deliveries] = await db('deliveries').whereIn('id', ids).count<{ count: string }[]>('* as count');
    const [attempts] = await db('delivery_attempts')
      .whereIn('delivery_id', ids)
      .count<{ count: string }[]>('* as count');
    return { deliveries: Number(deliveries!.count), attempts: Number(attempts!.count) };
  }

  return {
    fx,
    withWorker,
    project,
    start,
    delivered,
    redelivered,
    call,
    requestErasure,
    status,
    erasureReaches,
    described,
    logRows,
    get taskQueue() {
      return taskQueue;
    },
  };
}

// The purge suites: a real worker (deliveries and purges) on a Temporal dev server, the API in process with the purge
// routes on each test's own queue, a receiver that verifies signatures, and helpers that fill a project with everything
// a customer leaves (registration with custom headers, deliveries, contacts, notices, portal links, members, a data
// key), ask for its purge as an operator, wait for it, and say what is left of it.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Knex } from 'knex';
import { createApp, type AppDeps } from '../../api/app';
import { createPurgeStarter } from '../../api/purges/purges';
import type { ActivityConfig } from '../../activities';
import type { DeliverWebhookEventInput, DeliverWebhookEventResult } from '../../common/contract';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import * as store from '../../db';
import { captureLogger, fastConfig, newProjectId } from '../support/deliveries';
import { testPersonHashKey, useDeliveryFixture, type DeliveryWorkerOptions } from '../support/delivery-fixture';
import { personHash } from '../../common/crypto/person-hash';
import { eventually } from '../support/eventually';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

/** The one subject the test API's operator policy lists. */
export const OPERATOR = 'ops-olga';
/** A member of every project the suite fills. */
export const MEMBER = 'alice';

export const fall = (projectId: string): DeliverWebhookEventInput => {
  const userUUID = randomUUID();
  return {
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
  };
};

export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
  contentType: string;
  location: string | null;
}

export interface PurgeCountsReply {
  executionsDeleted: number;
  registrationsDeleted: number;
  portalLinksDeleted: number;
  contactsDeleted: number;
  noticesDeleted: number;
  membersDeleted: number;
  deliveryRowsDeleted: number;
  attemptsDeleted: number;
  dataKeysDestroyed: number;
}

export interface PurgeReply {
  id: string;
  projectId: string;
  status: string;
  step: string;
  requestedAt: string;
  completedAt?: string;
  counts: PurgeCountsReply;
  failure?: string;
  detail?: string;
}

/** What is left of a project in the database, table by table. */
export interface ProjectRows {
  projects: number;
  project_members: number;
  webhook_registrations: number;
  webhook_circuit_breakers: number;
  endpoint_health: number;
  webhook_send_limits: number;
  project_notification_contacts: number;
  project_notices: number;
  project_notice_outbox: number;
  portal_links: number;
  deliveries: number;
  delivery_attempts: number;
  live_data_keys: number;
}

/**
 * A dev server that removes a deleted execution within a second or two (the history service acknowledges its transfer
 * queue every 30 s by default, history.transferProcessorUpdateAckInterval), with the search attributes registered.
 */
export const purgeEnvironment = (searchAttributes = true) =>
  createLocalEnvironment({
    searchAttributes,
    dynamicConfig: { 'history.transferProcessorUpdateAckInterval': '"500ms"' },
  });

/** Each retry 100-200 ms, given up after a minute: a fall a receiver refuses stays open for the test to watch. */
export const retrying: ActivityConfig = { ...fastConfig, BREAKER_FAILURE_THRESHOLD: 10_000 };

/**
 * Mocha hooks and helpers of a purge suite (call inside a describe): one Temporal dev server, database and API per
 * suite, a fresh task queue per test. Read `taskQueue` inside tests only.
 */
export function usePurgeSuite(createEnvironment: () => Promise<TestWorkflowEnvironment> = purgeEnvironment) {
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
      // Each test's worker polls its own queue: the purge's job goes there.
      // An attempt's deadline there is short: the rows go half a second after the executions.
      purges: {
        start: (purge) =>
          createPurgeStarter(
            fx.env.client,
            { TEMPORAL_TASK_QUEUE: taskQueue, WEBHOOK_TIMEOUT_MS: retrying.WEBHOOK_TIMEOUT_MS },
            { lateWritesMs: 500 },
          )(purge),
      },
    } satisfies AppDeps);
    api = await listenLocal(createApp(appDeps).callback());
  });
  after(() => api?.close());
  beforeEach(() => {
    taskQueue = uniqueTaskQueue('purge');
  });

  const db = () => fx.database.db;

  /** A real worker with the real activities (deliveries and purges) on this test's queue while `work` runs. */
  const withWorker = <T>(
    work: () => Promise<T>,
    options: Pick<DeliveryWorkerOptions, 'wrapPurgeActivities' | 'purgeDeliveryBatch' | 'searchAttributes'> = {},
  ): Promise<T> => fx.runWorker(() => work(), { taskQueue, config: retrying, ...options });

  /**
   * A project with everything a customer leaves but deliveries: a registration to the test's receiver with a custom
   * header, a member, contacts, a queued notice, a portal link and a data key. Returns its id and the data key's id.
   */
  async function project(): Promise<{ projectId: string; dataKeyId: string }> {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    await store.updateRegistration(
      db(),
      projectId,
      {},
      {
        headers: { secretBox: fx.registrations.secretBox, values: { 'X-Gateway-Key': 'gk-secret' } },
      },
    );
    await store.addMember(db(), projectId, MEMBER);
    await store.setNotificationContacts(db(), projectId, { url: 'https://n.example/', emails: ['ops@example.com'] });
    await store.queueNotice(db(), { projectId, condition: 'pause-started', facts: { pausedBy: 'member alice' } });
    await store.addPortalLink(
      db(),
      { id: randomUUID(), projectId, generation: 0, expiresAt: new Date(Date.now() + 3_600_000) },
      50,
    );
    const key = await store.insertProjectDataKey(db(), {
      id: `dk-${randomUUID()}`,
      projectId,
      wrapped: randomBytes(60),
      wrappingKeyId: 'k1',
    });
    return { projectId, dataKeyId: key.id };
  }

  /** Starts one event's delivery as a starter does (ProjectId at start); returns its workflow id. */
  async function start(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = `webhook-event-${randomUUID()}`;
    await startDeliveryWorkflow(fx.env.client, input, {
      taskQueue,
      workflowId,
      personHash: personHash(testPersonHashKey, input.userUUID),
    });
    return workflowId;
  }

  /** Delivers one event and waits for it to be delivered; returns its workflow id. */
  async function delivered(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = await start(input);
    const result = (await fx.env.client.workflow.getHandle(workflowId).result()) as DeliverWebhookEventResult;
    assert.equal(result.status, 'delivered', workflowId);
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

  /** POST /purges as the operator: 202 with the purge's record; returns its id. */
  async function requestPurge(projectId: string): Promise<string> {
    const reply = await call<PurgeReply>('POST', '/purges', { user: OPERATOR, body: { projectId } });
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    assert.deepEqual([reply.body.status, reply.body.projectId], ['pending', projectId]);
    assert.equal(reply.location, `/purges/${reply.body.id}`);
    return reply.body.id;
  }

  const status = (id: string) => call<PurgeReply>('GET', `/purges/${id}`, { user: OPERATOR });

  /** Polls GET /purges/{purgeId} until its status is `wanted` (failing at once if it failed instead). */
  async function purgeReaches(id: string, wanted: string, timeoutMs = 60_000): Promise<PurgeReply> {
    return eventually(
      `purge ${id} ${wanted}`,
      async () => {
        const reply = await status(id);
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        if (reply.body.status === 'failed' && wanted !== 'failed') assert.fail(`purge failed: ${reply.body.failure}`);
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

  /** The project's rows in every table that holds any (its data key counted while it still has its bytes). */
  async function rowsOf(projectId: string): Promise<ProjectRows> {
    const count = async (query: Knex.QueryBuilder) =>
      Number((await query.count<{ count: string }[]>('* as count'))[0]!.count);
    const byProject = (table: string) => count(db()(table).where({ project_id: projectId }));
    const registration = db()('webhook_registrations').where({ project_id: projectId }).select('id');
    return {
      projects: await count(db()('projects').where({ id: projectId })),
      project_members: await byProject('project_members'),
      webhook_registrations: await byProject('webhook_registrations'),
      webhook_circuit_breakers: await count(db()('webhook_circuit_breakers').whereIn('registration_id', registration)),
      endpoint_health: await byProject('endpoint_health'),
      webhook_send_limits: await byProject('webhook_send_limits'),
      project_notification_contacts: await byProject('project_notification_contacts'),
      project_notices: await byProject('project_notices'),
      project_notice_outbox: await byProject('project_notice_outbox'),
      portal_links: await byProject('portal_links'),
      deliveries: await byProject('deliveries'),
      delivery_attempts: await count(
        db()('delivery_attempts').whereIn(
          'delivery_id',
          db()('deliveries').where({ project_id: projectId }).select('id'),
        ),
      ),
      live_data_keys: await count(db()('project_data_keys').where({ project_id: projectId }).whereNotNull('wrapped')),
    };
  }

  return {
    fx,
    db,
    withWorker,
    project,
    start,
    delivered,
    call,
    requestPurge,
    status,
    purgeReaches,
    described,
    rowsOf,
    get taskQueue() {
      return taskQueue;
    },
  };
}

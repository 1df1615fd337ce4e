// What the endpoint-state suites share: on the dev server, the API's calls, the events they start and what they read
// back (pause, gone, rate-limit); without Temporal, the attempt activity run as the worker runs it on real PostgreSQL
// (breaker-attempts, pause-hold, rate-limit-attempt).
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import {
  createActivities,
  createWebhookHttpClient,
  type ActivityConfig,
  type WebhookHttpClient,
} from '../../activities';
import type { DeliverWebhookEventInput, DeliveryAttemptInput, SubscribableType } from '../../common/contract';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { USER, captureLogger, newProjectId, Registrations, vitalPayload } from '../support/deliveries';
import type { DeliveryFixture } from '../support/delivery-fixture';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { startTestReceiver, type ReceivedRequest, type TestReceiver } from '../support/receiver';
import { bearer, hsToken } from '../support/tokens';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const vitalEvent = (projectId: string): DeliverWebhookEventInput => ({
  projectId,
  webhookType: 'VITAL_THRESHOLD',
  userUUID: USER,
  payload: vitalPayload,
});

/** F a fall, V a vital, for each request in the order given (the receiver's arrival order). */
export const kindsOf = (requests: readonly Pick<ReceivedRequest, 'rawBody'>[]) =>
  requests.map((request) => ('reasons' in JSON.parse(request.rawBody.toString()) ? 'F' : 'V')).join('');

/** The API in process called as `user` (alice unless named): the status and the JSON body, {} without one. */
export function apiCaller(api: { readonly url: string }) {
  return async (method: string, path: string, body?: unknown, user = 'alice') => {
    const response = await fetch(`${api.url}${path}`, {
      method,
      headers: { ...bearer(hsToken(user)), ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
  };
}

export type ApiCall = ReturnType<typeof apiCaller>;

/** A project of alice's registered to the suite's receiver for `types` (falls and vitals unless named). */
export async function memberProject(
  fx: DeliveryFixture,
  types: SubscribableType[] = ['FALL_DETECTION', 'VITAL_THRESHOLD'],
) {
  const projectId = newProjectId();
  const secret = await fx.registrations.register(projectId, fx.receiver.url, types);
  await store.addMember(fx.database.db, projectId, 'alice');
  return { projectId, secret };
}

/** The project's delivery log as the API lists it, newest first. */
export const deliveriesOf = async (call: ApiCall, projectId: string) =>
  (await call('GET', `/webhooks/project/${projectId}/deliveries?limit=100`)).body.items as {
    id: string;
    status: string;
    attempts: number;
  }[];

/** Starts the events' deliveries one after the other, so that the first listed are the oldest waiters. */
export async function startEvents(fx: DeliveryFixture, taskQueue: string, events: DeliverWebhookEventInput[]) {
  const handles = [];
  for (const event of events)
    handles.push(
      await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [event],
        taskQueue,
        workflowId: `webhook-event-${randomUUID()}`,
      }),
    );
  return handles;
}

/** The deliveries the resumer lists for the project's registration. */
export async function listedWaiters(fx: DeliveryFixture, projectId: string) {
  const registration = await store.findRegistration(fx.database.db, projectId);
  return fx.database.db('webhook_breaker_waiters').where({ registration_id: registration!.id });
}

/** Mocha hooks of a suite that runs the attempt activity itself: a database, the worker's HTTP client, a receiver a test. */
export function useAttemptSuite(timeoutMs: number) {
  const suite = {} as {
    database: TestDatabase;
    registrations: Registrations;
    http: WebhookHttpClient;
    receiver: TestReceiver;
  };
  before(async () => {
    suite.database = await createTestDatabase();
    suite.registrations = new Registrations(suite.database.db);
    suite.http = createWebhookHttpClient({ timeoutMs, allowPrivate: true });
  });
  after(async () => {
    await suite.http?.close();
    await suite.database?.destroy();
  });
  beforeEach(async () => (suite.receiver = await startTestReceiver()));
  afterEach(() => suite.receiver.close());
  return {
    get database() {
      return suite.database;
    },
    get registrations() {
      return suite.registrations;
    },
    get http() {
      return suite.http;
    },
    get receiver() {
      return suite.receiver;
    },
    /** The worker's attempt activity over this suite's database and client, logging to `logger`. */
    attemptActivity(config: ActivityConfig, logger = captureLogger().logger) {
      return createActivities({
        db: suite.database.db,
        secretBox: suite.registrations.secretBox,
        logger,
        config,
        http: suite.http,
      }).deliverWebhookAttempt;
    },
  };
}

/**
 * One run of the attempt activity as the worker runs it (MockActivityEnvironment gives it its context): its outcome,
 * or the failure it threw. The failures are what the tests expect: not printed.
 */
export function runAttempt(
  activity: (input: DeliveryAttemptInput) => Promise<unknown>,
  input: DeliveryAttemptInput,
  { attempt = 1, workflowId = `webhook-event-${randomUUID()}` }: { attempt?: number; workflowId?: string } = {},
): Promise<unknown> {
  const env = new MockActivityEnvironment(
    { attempt, workflowExecution: { workflowId, runId: randomUUID() }, activityId: '1' },
    { logger: new DefaultLogger('ERROR', () => undefined) },
  );
  return env.run(activity, input).then(
    (outcome) => outcome,
    (error: unknown) => error,
  );
}

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { startApi, type RunningApi } from '../../api';
import { main as cli } from '../../cli/index';
import { emitWebhookEvent } from '../../client/emit';
import { loadConfig, type Config } from '../../common/config';
import { DATA_KEY_ID_METADATA_KEY, KEY_ID_METADATA_KEY } from '../../common/crypto/payload-codec';
import { verifyWebhookSignature } from '../../common/crypto/signature';
import { connectTemporalClient } from '../../common/temporal/connection';
import { addMember, addProject, findDataKey, findRegistration } from '../../db';
import { startWorker, type RunningWorker } from '../../worker/start';
import { fallEvent, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid, type ReceivedRequest } from '../support/receiver';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { bearer, hsToken } from '../support/tokens';

const silent = pino({ level: 'silent' });
const hexKey = () => randomBytes(32).toString('hex');
const payloadKey = () => randomBytes(32).toString('base64');
/** Longer than any delivery here takes (seconds) and than DELIVERY_GIVE_UP_AFTER_MS below, shorter than the test. */
const DELIVERY_DEADLINE_MS = 45_000;

const stringHeaders = (request: ReceivedRequest): Record<string, string> =>
  Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));

/** Whether the stock `standardwebhooks` verifier, configured with this one secret, accepts the delivery. */
function stockAccepts(secret: string, request: ReceivedRequest): boolean {
  try {
    new Webhook(secret).verify(request.rawBody, stringHeaders(request));
    return true;
  } catch {
    return false;
  }
}

/**
 * Each procedure as docs/configuration.md tells an operator to run it, on the processes an operator runs: the API
 * (`startApi`) and the worker (`startWorker`) from configuration alone, `emitWebhookEvent` through a client of that
 * configuration, the CLI, a real receiver checking signatures.
 */
describe('documented key procedures lose no delivery (Temporal dev server, API and worker from configuration)', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const jwtSecret = 'jwt-secret-before-the-change-0123456789';
  let running: { api?: RunningApi; worker?: RunningWorker; clients: Client[] };
  beforeEach(() => (running = { clients: [] }));
  afterEach(async () => {
    await running.api?.close();
    await running.worker?.shutdown();
    await Promise.all(running.clients.map((client) => client.connection.close()));
  });

  /** The configuration every process of one test shares, as an operator's environment file holds it. */
  function environment(taskQueue: string, overrides: Record<string, string | undefined>): Config {
    return loadConfig(
      {
        PORT: '0',
        DATABASE_URL: fx.database.url,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        JWT_SECRET: jwtSecret,
        WEBHOOK_SECRET_KEY: fx.registrations.key,
        ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
        WEBHOOK_TIMEOUT_MS: '1000',
        DELIVERY_INITIAL_INTERVAL_MS: '100',
        DELIVERY_BACKOFF_COEFFICIENT: '1',
        DELIVERY_MAX_INTERVAL_MS: '200',
        // Long enough for every step below, short enough that a lost delivery fails the test rather than hang it.
        DELIVERY_GIVE_UP_AFTER_MS: '30000',
        // Failures the tests provoke on purpose must not open the breaker (its own tests cover it).
        BREAKER_FAILURE_THRESHOLD: '1000',
        WORKER_SHUTDOWN_GRACE_MS: '2000',
        ...overrides,
      },
      { database: true, auth: true },
    );
  }

  async function restartApi(config: Config): Promise<string> {
    await running.api?.close();
    running.api = await startApi(config, silent, { sendTestEvent: () => Promise.reject(new Error('not used')) });
    return `http://127.0.0.1:${(running.api.server.address() as AddressInfo).port}`;
  }

  async function restartWorker(config: Config): Promise<void> {
    await running.worker?.shutdown();
    running.worker = await startWorker(config, silent);
  }

  async function client(config: Config): Promise<Client> {
    const connected = await connectTemporalClient(config);
    running.clients.push(connected);
    return connected;
  }

  /** A project with alice as its member and a webhook registered through the API; returns the secret. */
  async function register(api: string, projectId: string): Promise<string> {
    await addProject(fx.database.db, projectId);
    await addMember(fx.database.db, projectId, 'alice');
    const reply = await fetch(`${api}/webhooks/register`, {
      method: 'POST',
      headers: { ...bearer(hsToken('alice', { secret: jwtSecret })), 'content-type': 'application/json' },
      body: JSON.stringify({ projectId, url: fx.receiver.url, types: ['FALL_DETECTION'] }),
    });
    assert.equal(reply.status, 201);
    return ((await reply.json()) as { secret: string }).secret;
  }

  /**
   * The delivery's request, or the test fails with the reason the delivery gave up or, when it is stuck (a workflow
   * task that keeps failing, e.g. on a payload key the worker lacks), with the task's last failure.
   */
  async function delivered(temporal: Client, workflowId: string): Promise<ReceivedRequest> {
    const handle = temporal.workflow.getHandle(workflowId);
    const deadline = new AbortController();
    const stuck = async (): Promise<never> => {
      const { events } = await handle.fetchHistory();
      const failures = (events ?? []).map((e) => e.workflowTaskFailedEventAttributes?.failure?.message).filter(Boolean);
      assert.fail(`delivery ${workflowId} did not end within ${DELIVERY_DEADLINE_MS} ms: ${failures.at(-1) ?? ''}`);
    };
    try {
      const result = await Promise.race([
        temporal.withAbortSignal(deadline.signal, () => handle.result()),
        sleep(DELIVERY_DEADLINE_MS, undefined, { signal: deadline.signal }).then(stuck),
      ]);
      assert.equal((result as { status: string }).status, 'delivered');
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      const causes: string[] = [];
      for (let cause: Error | undefined = error.cause; cause; cause = (cause as { cause?: Error }).cause)
        causes.push(cause.message);
      assert.fail(`delivery ${workflowId} was lost: ${causes.join(' <- ')}`);
    } finally {
      deadline.abort();
    }
    // The webhook id is the workflow id; the last request is the one the receiver accepted.
    const request = fx.receiver.requests.filter((r) => r.headers['webhook-id'] === workflowId).at(-1);
    assert.ok(request, `no request of ${workflowId} reached the receiver`);
    return request;
  }

  /**
   * The ring key that protects the workflow's input in Temporal's history: the one that sealed it, or the one that wraps
   * the project data key that sealed it (envelope encryption), with that data key's id.
   */
  async function inputKeyId(temporal: Client, workflowId: string): Promise<{ ringKey: string; dataKey?: string }> {
    const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
    const input = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    const dataKey = input?.metadata?.[DATA_KEY_ID_METADATA_KEY];
    if (!dataKey) return { ringKey: Buffer.from(input?.metadata?.[KEY_ID_METADATA_KEY] ?? '').toString() };
    const stored = await findDataKey(fx.database.db, Buffer.from(dataKey).toString());
    return { ringKey: stored?.wrappingKeyId ?? '', dataKey: stored?.id };
  }

  it('WEBHOOK_SECRET_KEYS rotated during a signing-secret overlap: after reseal and dropping the old key, deliveries verify with both secrets', async () => {
    const taskQueue = uniqueTaskQueue('secret-keys');
    const payloadKeys = `p1:${payloadKey()}`;
    const before = environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: payloadKeys });
    const api = await restartApi(before);
    const projectId = newProjectId();
    const old = await register(api, projectId);
    const rotated = await fetch(`${api}/webhooks/project/${projectId}/secret/rotate`, {
      method: 'POST',
      headers: { ...bearer(hsToken('alice', { secret: jwtSecret })), 'content-type': 'application/json' },
      body: JSON.stringify({ overlapSeconds: 86_400 }),
    });
    assert.equal(rotated.status, 200);
    const fresh = ((await rotated.json()) as { secret: string }).secret;

    // docs/configuration.md: the new key first in WEBHOOK_SECRET_KEYS, the old one still readable (WEBHOOK_SECRET_KEY
    // as k0), restart, reseal, then drop the old key.
    const newKey = `k1:${hexKey()}`;
    await restartApi(environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: payloadKeys, WEBHOOK_SECRET_KEYS: newKey }));
    const out: string[] = [];
    const err: string[] = [];
    const env = {
      DATABASE_URL: fx.database.url,
      WEBHOOK_SECRET_KEY: fx.registrations.key,
      WEBHOOK_SECRET_KEYS: newKey,
    };
    assert.equal(await cli(['secrets', 'reseal'], { env, out: (l) => out.push(l), err: (l) => err.push(l) }), 0);
    assert.match(out.join('\n'), /^Resealed (\d+) of \1 webhook secrets under key k1$/, err.join('\n'));
    const row = await findRegistration(fx.database.db, projectId);
    assert.match(row!.secretSealed, /^v2:k1:/);
    assert.match(row!.previousSecretSealed!, /^v2:k1:/, 'the previous secret, inside its overlap, was resealed too');

    const after = environment(taskQueue, {
      PAYLOAD_ENCRYPTION_KEYS: payloadKeys,
      WEBHOOK_SECRET_KEY: undefined,
      WEBHOOK_SECRET_KEYS: newKey,
    });
    await restartApi(after);
    await restartWorker(after);
    const temporal = await client(after);
    for (let i = 0; i < 2; i++) {
      const workflowId = await emitWebhookEvent(temporal, fallEvent(projectId), { taskQueue });
      const request = await delivered(temporal, workflowId);
      assert.equal(String(request.headers['webhook-signature']).split(' ').length, 2);
      assert.equal(stockAccepts(old, request), true, 'a receiver still holding the old secret accepts it');
      assert.equal(stockAccepts(fresh, request), true, 'a receiver holding the new secret accepts it');
      assert.equal(independentSignatureValid(fresh, request), true, 'X-Signature is made with the new secret');
      const x = { timestamp: request.headers['x-timestamp'], signature: request.headers['x-signature'] };
      assert.equal(verifyWebhookSignature({ secret: [old, fresh], ...x, rawBody: request.rawBody }), true);
    }
  });

  it('PAYLOAD_ENCRYPTION_KEYS rotated: a delivery waiting and one retrying under the old key deliver once the worker restarts with the new ring', async () => {
    const taskQueue = uniqueTaskQueue('payload-keys');
    const p1 = `p1:${payloadKey()}`;
    const p2 = `p2:${payloadKey()}`;
    const before = environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: p1 });
    const projectId = newProjectId();
    await register(await restartApi(before), projectId);
    const oldClient = await client(before);

    // One delivery retrying: the worker under the old ring made attempts (their inputs and failures are in the
    // history, sealed with p1) and is stopped while the receiver still fails.
    fx.receiver.fallback = { status: 503 };
    await restartWorker(before);
    const retrying = await emitWebhookEvent(oldClient, fallEvent(projectId), { taskQueue });
    await fx.receiver.waitForRequests(2);
    await running.worker!.shutdown();
    running.worker = undefined;
    // One delivery waiting: emitted under the old ring while no worker runs.
    const waiting = await emitWebhookEvent(oldClient, fallEvent(projectId), { taskQueue });
    fx.receiver.fallback = { status: 200 };

    // docs/configuration.md: the new key first, the old one after it, on every client and worker.
    const after = environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: `${p2},${p1}` });
    await restartWorker(after);
    const newClient = await client(after);
    const started = await emitWebhookEvent(newClient, fallEvent(projectId), { taskQueue });
    for (const workflowId of [retrying, waiting, started]) await delivered(newClient, workflowId);
    // The project's data key sealed both; it stays wrapped by p1 until `webhooks data-keys rewrap` wraps it under p2.
    const old = await inputKeyId(newClient, retrying);
    assert.deepEqual(await inputKeyId(newClient, started), old);
    assert.equal(old.ringKey, 'p1');
    const out: string[] = [];
    const env = { DATABASE_URL: fx.database.url, PAYLOAD_ENCRYPTION_KEYS: `${p2},${p1}` };
    assert.equal(await cli(['data-keys', 'rewrap'], { env, out: (l) => out.push(l), err: () => undefined }), 0);
    // Other tests' projects share this database: at least this one's key was rewrapped.
    assert.match(out.join('\n'), /^Rewrapped [1-9]\d* project data keys under key p2$/);
    assert.deepEqual(await inputKeyId(newClient, retrying), { ...old, ringKey: 'p2' });
    // Only p2 now: both histories still open (their data key is wrapped by p2).
    const only = environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: p2 });
    for (const workflowId of [retrying, started])
      assert.equal((await (await client(only)).workflow.getHandle(workflowId).result()).status, 'delivered');
  });

  it('PAYLOAD_ENCRYPTION_KEYS rolled out in two steps: a worker not yet switched already decodes what a switched client sealed', async () => {
    const taskQueue = uniqueTaskQueue('payload-rollout');
    const p1 = `p1:${payloadKey()}`;
    const p2 = `p2:${payloadKey()}`;
    const projectId = newProjectId();
    await register(await restartApi(environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: p1 })), projectId);
    // Step 1 is done everywhere (the new key known, second); step 2 (the new key first) reached the client only.
    await restartWorker(environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: `${p1},${p2}` }));
    const switched = await client(environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: `${p2},${p1}` }));
    const workflowId = await emitWebhookEvent(switched, fallEvent(projectId), { taskQueue });
    await delivered(switched, workflowId);
    assert.equal((await inputKeyId(switched, workflowId)).ringKey, 'p2');
  });

  it('JWT_SECRET changed: old tokens get 401 at once, new ones work, and a delivery in flight is delivered', async () => {
    const taskQueue = uniqueTaskQueue('jwt-secret');
    const before = environment(taskQueue, { PAYLOAD_ENCRYPTION_KEYS: `p1:${payloadKey()}` });
    const projectId = newProjectId();
    const secret = await register(await restartApi(before), projectId);
    await restartWorker(before);
    const temporal = await client(before);
    fx.receiver.fallback = { status: 503 };
    const inFlight = await emitWebhookEvent(temporal, fallEvent(projectId), { taskQueue });
    await fx.receiver.waitForRequests(1);

    const newSecret = 'jwt-secret-after-the-change-9876543210';
    const api = await restartApi({ ...before, JWT_SECRET: newSecret });
    const read = (token: string) => fetch(`${api}/webhooks/project/${projectId}`, { headers: bearer(token) });
    const refused = await read(hsToken('alice', { secret: jwtSecret }));
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('content-type'), 'application/problem+json');
    assert.equal((await read(hsToken('alice', { secret: newSecret }))).status, 200);

    // Workers never read JWT_SECRET, and events reach Temporal without the API: the delivery carries on.
    fx.receiver.fallback = { status: 200 };
    assert.equal(independentSignatureValid(secret, await delivered(temporal, inFlight)), true);
  });
});

// The standalone entry points as real processes (`start:api` is api/server.ts, `start:worker` is worker/main.ts, the
// image runs their builds): they never run on keys they generated themselves unless NODE_ENV=development, and a
// production worker refuses events whose input a client without the payload key sent, on the real dev server.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { ActivityFailure, Client, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, WorkflowIdReusePolicy } from '@temporalio/common';
import { Worker, bundleWorkflowCode } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { freePort } from '../../dev/ports';
import {
  ENCRYPTED_ENCODING,
  EncryptionCodec,
  encryptedDataConverter,
  generatePayloadKey,
  parsePayloadKeyRing,
} from '../../common/crypto/payload-codec';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import {
  FailureType,
  RESUME_DELIVERY_SIGNAL,
  type DeliverWebhookEventInput,
  type DeliveryAttemptInput,
  type ResumeDeliverySignal,
} from '../../common/contract';
import { createRedeliveryStarter, EventNotTrustedError } from '../../api/deliveries/redelivery';
import { recoverAsOperator, redeliverAsOperator } from '../../api/deliveries/deliveries';
import * as store from '../../db';
import { ProjectDataKeys } from '../../common/crypto/data-keys';
import { Registrations, USER, fallEvent, newProjectId } from '../support/deliveries';
import type { TestDatabase } from '../support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { uniqueTaskQueue } from '../support/temporal';
import { startTemporalAndDatabase } from '../support/setup';
import { TEST_JWT_SECRET } from '../support/tokens';
import { testAuditEnv } from '../support/audit-keys';

const ROOT = join(__dirname, '..', '..');

interface Launched {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  /** Resolves once the output matches; fails when the process exits first or the time is up. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** An entry point as `npm run start:*` runs it (from the sources), with only the given environment. */
function launch(entry: 'api/server.ts' | 'worker/main.ts', env: Record<string, string>): Launched {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', join(ROOT, entry)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const output = () => chunks.join('');
  return {
    child,
    output,
    exited,
    async waitFor(pattern, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(output())) {
        if (child.exitCode !== null || child.signalCode !== null)
          assert.fail(`${entry} exited (${child.exitCode}) before ${pattern}:\n${output().slice(-3000)}`);
        if (Date.now() > deadline) assert.fail(`${entry}: no ${pattern} in time:\n${output().slice(-3000)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** An IPv4 address of this machine that is not loopback, to see whether a port listens beyond 127.0.0.1. */
const outsideAddress = Object.values(networkInterfaces())
  .flat()
  .find((address) => address && address.family === 'IPv4' && !address.internal)?.address;

const reachable = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(5_000) }).then(
    (response) => response.status,
    () => undefined,
  );

describe('standalone entry points: configured keys only, unless NODE_ENV=development', function () {
  this.timeout(180_000);

  it('start:api and start:worker with NODE_ENV unset exit non-zero, naming every missing key, and generate none', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-guards-'));
    const common = { DATABASE_URL: 'postgres://u:p@127.0.0.1:1/none', DATA_DIR: dataDir };
    const api = launch('api/server.ts', { ...common, JWT_SECRET: TEST_JWT_SECRET });
    const worker = launch('worker/main.ts', common);
    const [apiCode, workerCode] = await Promise.all([api.exited, worker.exited]);
    for (const [name, code, output] of [
      ['start:api', apiCode, api.output()],
      ['start:worker', workerCode, worker.output()],
    ] as const) {
      assert.notEqual(code, 0, `${name} must not start:\n${output}`);
      assert.match(output, /NODE_ENV is not set, so this process runs as production/, name);
      assert.match(output, /PAYLOAD_ENCRYPTION_KEYS is required/, name);
      assert.match(output, /WEBHOOK_SECRET_KEY is required.*WEBHOOK_SECRET_KEYS/, name);
      for (const variable of ['AUDIT_HMAC_KEYS', 'AUDIT_SIGNING_KEY', 'AUDIT_DIGEST_DIR', 'PERSON_HASH_KEY'])
        assert.match(output, new RegExp(`${variable} is required in production`), name);
    }
    assert.match(api.output(), /METRICS_TOKEN is required in production/);
    assert.doesNotMatch(worker.output(), /METRICS_TOKEN/, 'the worker serves no /metrics of its own');
    assert.deepEqual(readdirSync(dataDir), [], 'no key was generated');
  });

  it('the image runs the guarded API entry point as production: without keys it exits naming them', async () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    const env = Object.fromEntries(
      [...runtime.matchAll(/^\s*(?:ENV\s+)?([A-Z_]+)=(\S+?)\s*\\?$/gm)].map((m) => [m[1]!, m[2]!]),
    );
    assert.notEqual(env.NODE_ENV, 'development', 'the image never runs on generated keys');
    const cmd = JSON.parse(/^CMD\s+(.+)$/m.exec(runtime)![1]!) as string[];
    assert.deepEqual(cmd, ['node', 'dist/api/server.js'], 'the build of api/server.ts, run below from its source');
    const api = launch('api/server.ts', {
      ...env,
      DATABASE_URL: 'postgres://u:p@127.0.0.1:1/none',
      JWT_SECRET: TEST_JWT_SECRET,
    });
    assert.notEqual(await api.exited, 0);
    assert.match(api.output(), /PAYLOAD_ENCRYPTION_KEYS is required/);
    assert.match(api.output(), /METRICS_TOKEN is required in production/);
  });

  describe('with NODE_ENV=development', () => {
    let env: TestWorkflowEnvironment;
    let database: TestDatabase;
    before(async () => {
      [env, database] = await startTemporalAndDatabase();
    });
    after(async () => {
      await env?.teardown();
      await database?.destroy();
    });

    it('both start on generated development keys; the worker serves its metrics on 127.0.0.1 only', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-guards-'));
      const [port, metricsPort] = [await freePort(), await freePort()];
      const common = { NODE_ENV: 'development', DATABASE_URL: database.url, DATA_DIR: dataDir };
      const api = launch('api/server.ts', { ...common, JWT_SECRET: TEST_JWT_SECRET, PORT: String(port) });
      const worker = launch('worker/main.ts', {
        ...common,
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: uniqueTaskQueue('dev-worker'),
        WORKER_METRICS_PORT: String(metricsPort),
      });
      try {
        await api.waitFor(/API listening/);
        assert.equal(await reachable(`http://127.0.0.1:${port}/healthz`), 200);
        await worker.waitFor(/worker started/);
        assert.equal(await reachable(`http://127.0.0.1:${metricsPort}/metrics`), 200);
        if (outsideAddress)
          assert.equal(
            await reachable(`http://${outsideAddress}:${metricsPort}/metrics`),
            undefined,
            'not beyond loopback',
          );
        assert.ok(readdirSync(dataDir).includes('payload-encryption.keys'), 'the development key ring was generated');
        for (const file of ['audit-hmac.keys', 'audit-signing.key', 'person-hash.key'])
          assert.ok(readdirSync(dataDir).includes(file), `the development key ${file} was generated`);
      } finally {
        await Promise.all([api.stop(), worker.stop()]);
      }
    });
  });
});

describe('a production worker refuses events not encrypted with the payload key', function () {
  this.timeout(240_000);
  const payloadKeys = generatePayloadKey();
  /** A client's data converter as the service's processes have it: the ring and the database's data keys. */
  const encrypting = () =>
    encryptedDataConverter(
      new EncryptionCodec(parsePayloadKeyRing(payloadKeys), {
        dataKeys: new ProjectDataKeys(parsePayloadKeyRing(payloadKeys), store.dataKeyStore(database.db)),
      }),
    );
  let env: TestWorkflowEnvironment;
  let database: TestDatabase;
  let registrations: Registrations;
  let receiver: TestReceiver;
  /** The monitoring system's client: our codec and failure converter. */
  let client: Client;

  before(async () => {
    [env, database] = await startTemporalAndDatabase();
    registrations = new Registrations(database.db);
    client = new Client({ connection: env.connection, dataConverter: encrypting() });
  });
  after(async () => {
    await env?.teardown();
    await database?.destroy();
  });
  beforeEach(async () => (receiver = await startTestReceiver()));
  afterEach(() => receiver.close());

  /** `start:worker` with NODE_ENV=production and its guards; http receivers on 127.0.0.1 allowed for the test's. */
  async function productionWorker(extra: Record<string, string> = {}) {
    const taskQueue = uniqueTaskQueue('production');
    const metricsPort = await freePort();
    const worker = launch('worker/main.ts', {
      NODE_ENV: 'production',
      DATABASE_URL: database.url,
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      PAYLOAD_ENCRYPTION_KEYS: payloadKeys,
      WEBHOOK_SECRET_KEY: registrations.key,
      ALLOW_HTTP_WEBHOOK_URLS: 'true',
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      WEBHOOK_TIMEOUT_MS: '1000',
      DELIVERY_INITIAL_INTERVAL_MS: '100',
      DELIVERY_MAX_INTERVAL_MS: '200',
      WORKER_METRICS_PORT: String(metricsPort),
      WORKER_METRICS_HOST: '0.0.0.0',
      ...testAuditEnv(),
      ...extra,
    });
    await worker.waitFor(/worker started/);
    const metrics = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text());
    return { worker, taskQueue, metricsPort, metrics };
  }

  const start = (starter: Client, input: DeliverWebhookEventInput, taskQueue: string) =>
    startDeliveryWorkflow(starter, input, { taskQueue, workflowId: `guard-${newProjectId()}` });

  it('a plain client’s event fails with UnencryptedEventRefused, reaches no receiver, is logged and counted; an encrypted one delivers', async () => {
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const { worker, taskQueue, metricsPort, metrics } = await productionWorker();
    try {
      assert.match(worker.output(), /events whose input is not encrypted with PAYLOAD_ENCRYPTION_KEYS are refused/);
      // A plain Temporal client (no codec), as anyone who can reach the frontend has.
      const plain = await start(env.client, fallEvent(projectId), taskQueue);
      const refusal = await client.workflow
        .getHandle(plain.workflowId)
        .result()
        .then(
          () => assert.fail('the unencrypted event must not be delivered'),
          (error: unknown) => error,
        );
      assert.ok(refusal instanceof WorkflowFailedError, String(refusal));
      assert.ok(refusal.cause instanceof ApplicationFailure);
      assert.equal(refusal.cause.type, FailureType.UnencryptedEventRefused);
      assert.equal(refusal.cause.nonRetryable, true);
      assert.match(refusal.cause.message, /not encrypted with the payload key \(PAYLOAD_ENCRYPTION_KEYS\)/);

      // Read without the codec, the history holds the failure's message only as ciphertext.
      const history = await env.client.workflow.getHandle(plain.workflowId).fetchHistory();
      const failed = history.events?.find((e) => e.workflowExecutionFailedEventAttributes)
        ?.workflowExecutionFailedEventAttributes?.failure;
      assert.ok(failed, 'the workflow failed');
      assert.equal(failed.applicationFailureInfo?.type, FailureType.UnencryptedEventRefused);
      assert.doesNotMatch(failed.message ?? '', /encrypted|PAYLOAD/);
      assert.equal(Buffer.from(failed.encodedAttributes?.metadata?.encoding ?? []).toString(), ENCRYPTED_ENCODING);
      assert.ok(
        !Buffer.from(failed.encodedAttributes?.data ?? [])
          .toString()
          .includes('payload key'),
      );
      const kinds = history.events?.map((e) => temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? '') ?? [];
      assert.ok(!kinds.some((k) => k.includes('ACTIVITY')), 'no activity task');
      // One marker: the refusal's patch marker, no local activity's (the lookup never ran).
      assert.equal(kinds.filter((k) => k === 'EVENT_TYPE_MARKER_RECORDED').length, 1, kinds.join(', '));

      await worker.waitFor(/Unencrypted event refused/);
      assert.ok(!worker.output().includes(USER), 'no payload in the log');
      const counted = /webhook_unencrypted_refused\w*\{[^}]*what="event"[^}]*\} 1\b/;
      for (let i = 0; i < 50 && !counted.test(await metrics()); i += 1) await new Promise((r) => setTimeout(r, 100));
      assert.match(await metrics(), counted);
      if (outsideAddress)
        assert.equal(await reachable(`http://${outsideAddress}:${metricsPort}/metrics`), 200, 'WORKER_METRICS_HOST');

      const encrypted = await start(client, fallEvent(projectId), taskQueue);
      assert.equal((await encrypted.result()).status, 'delivered');
      assert.equal(receiver.requests.length, 1, 'only the encrypted event reached the receiver');
      assert.ok(independentSignatureValid(secret, receiver.requests[0]!));
    } finally {
      await worker.stop();
    }
  });

  it('the breaker resumer’s signals are encrypted and wake the deliveries; a plain signal is ignored', async () => {
    const projectId = newProjectId();
    await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const { worker, taskQueue, metrics } = await productionWorker({
      BREAKER_FAILURE_THRESHOLD: '1',
      // Open long enough that no probe (the first delivery's or this one's) comes while the copied signals are checked,
      // however slow the machine (15 s was once outlasted beside a mutation run): only a signal the breaker did not
      // send could make a second request then.
      BREAKER_OPEN_MS: '30000',
      BREAKER_MAX_OPEN_MS: '30000',
      BREAKER_RESUME_SPREAD_MS: '0',
      // Only the resumer's signal can end the wait within this test; its safety timer is minutes away.
      BREAKER_WAIT_MAX_MS: '600000',
    });
    try {
      receiver.fallback = { status: 500 };
      const first = await start(client, fallEvent(projectId), taskQueue);
      await receiver.waitForRequests(1);
      // The first failure must have opened the breaker before the second delivery starts, or the second one would
      // send its own request rather than wait (a slow CI machine once let it through).
      await waitForOpenBreaker();
      const waiting = await start(client, fallEvent(projectId), taskQueue);
      // A plain resumeDelivery, as a client without the key would send it: ignored, logged and counted.
      await waitForWaiter(waiting.workflowId);
      await env.client.workflow.getHandle(waiting.workflowId).signal(RESUME_DELIVERY_SIGNAL, 1_000);
      await worker.waitFor(/Unencrypted resumeDelivery signal ignored/);
      assert.match(await metrics(), /webhook_unencrypted_refused\w*\{[^}]*what="signal"[^}]*\} 1\b/);
      // Encrypted, but copied from another delivery's history (it names that workflow), or a bare wait token as
      // signals were before they named their workflow: ignored, logged and counted, the wait goes on.
      const copied: ResumeDeliverySignal = { workflowId: first.workflowId, waitToken: 1_000 };
      await client.workflow.getHandle(waiting.workflowId).signal(RESUME_DELIVERY_SIGNAL, copied);
      await client.workflow.getHandle(waiting.workflowId).signal(RESUME_DELIVERY_SIGNAL, 1_000);
      await worker.waitFor(
        /resumeDelivery signal ignored: not sealed for this workflow[\s\S]*resumeDelivery signal ignored: not sealed/,
      );
      await refusedCount(metrics, 'signal', 'other');
      await refusedCount(metrics, 'signal', 'unbound');
      assert.equal(receiver.requests.length, 1, 'no copied signal woke the waiting delivery');
      receiver.fallback = { status: 200 };
      const started = Date.now();
      assert.equal((await first.result()).status, 'delivered');
      assert.equal((await waiting.result()).status, 'delivered');
      assert.ok(Date.now() - started < 60_000, 'woken by the resumer, not by the safety timer');

      const history = await env.client.workflow.getHandle(waiting.workflowId).fetchHistory();
      const signals = (history.events ?? [])
        .map((e) => e.workflowExecutionSignaledEventAttributes)
        .filter((s) => s?.signalName === RESUME_DELIVERY_SIGNAL);
      const encodings = signals.map((s) => Buffer.from(s!.input?.payloads?.[0]?.metadata?.encoding ?? []).toString());
      assert.ok(encodings.filter((e) => e === ENCRYPTED_ENCODING).length >= 1, encodings.join(', '));
      assert.equal(encodings.filter((e) => e !== ENCRYPTED_ENCODING).length, 1, 'only the test’s plain signal');
    } finally {
      await worker.stop();
    }

    async function waitForOpenBreaker(): Promise<void> {
      for (let i = 0; i < 200; i += 1) {
        const open = await database
          .db('webhook_circuit_breakers as b')
          .join('webhook_registrations as r', 'r.id', 'b.registration_id')
          .where('r.project_id', projectId)
          .where('b.open_until', '>', database.db.fn.now())
          .first();
        if (open) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.fail('the first failure never opened the breaker');
    }

    async function waitForWaiter(workflowId: string): Promise<void> {
      for (let i = 0; i < 200; i += 1) {
        const row = await database.db('webhook_breaker_waiters').where({ workflow_id: workflowId }).first();
        if (row) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.fail('the delivery never waited for the breaker');
    }
  });

  it('ALLOW_UNENCRYPTED_EVENTS=true opens a migration window, logged at start: the plain client’s event delivers', async () => {
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const { worker, taskQueue } = await productionWorker({ ALLOW_UNENCRYPTED_EVENTS: 'true' });
    try {
      assert.match(worker.output(), /ALLOW_UNENCRYPTED_EVENTS=true/);
      const plain = await start(env.client, fallEvent(projectId), taskQueue);
      assert.equal((await client.workflow.getHandle(plain.workflowId).result()).status, 'delivered');
      assert.equal(receiver.requests.length, 1);
      assert.ok(independentSignatureValid(secret, receiver.requests[0]!));
    } finally {
      await worker.stop();
    }
  });

  /** Waits (the meter exports every second) for webhook_input_refused{what, binding} to read exactly 1. */
  async function refusedCount(metrics: () => Promise<string>, what: string, binding: string): Promise<void> {
    const sample = (text: string) =>
      text
        .split('\n')
        .find(
          (line) =>
            /^webhook_input_refused\w*\{/.test(line) &&
            line.includes(`what="${what}"`) &&
            line.includes(`binding="${binding}"`),
        );
    let text = '';
    for (let i = 0; i < 50 && !sample((text = await metrics())); i += 1) await new Promise((r) => setTimeout(r, 100));
    assert.match(sample(text) ?? `no webhook_input_refused{what="${what}",binding="${binding}"}`, / 1$/);
  }

  /** The raw (still encrypted) input of a workflow's run, as anyone who can read its history has it. */
  async function rawInput(workflowId: string, runId?: string) {
    const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    const input = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input;
    assert.equal(Buffer.from(input?.payloads?.[0]?.metadata?.encoding ?? []).toString(), ENCRYPTED_ENCODING);
    return input!;
  }

  /** Starts deliverWebhookEvent with these raw payloads: what a copy of another run's input is. */
  async function startRaw(
    workflowId: string,
    taskQueue: string,
    input: Awaited<ReturnType<typeof rawInput>>,
    reuse = WorkflowIdReusePolicy.ALLOW_DUPLICATE,
  ) {
    const { runId } = await env.client.workflowService.startWorkflowExecution({
      namespace: 'default',
      workflowId,
      workflowType: { name: 'deliverWebhookEvent' },
      taskQueue: { name: taskQueue },
      input,
      requestId: randomUUID(),
      workflowIdReusePolicy: reuse as unknown as temporal.api.enums.v1.WorkflowIdReusePolicy,
    });
    return runId;
  }

  /** How a workflow failed: the innermost ApplicationFailure. */
  async function refusalOf(workflowId: string): Promise<ApplicationFailure> {
    const error = await client.workflow
      .getHandle(workflowId)
      .result()
      .then(
        () => assert.fail(`${workflowId} must not complete`),
        (caught: unknown) => caught,
      );
    assert.ok(error instanceof WorkflowFailedError, String(error));
    const cause = error.cause instanceof ActivityFailure ? error.cause.cause : error.cause;
    assert.ok(cause instanceof ApplicationFailure, String(cause));
    return cause;
  }

  it('an encrypted input copied under a new workflow id, or sealed for none, is refused: nothing sent, logged, counted', async () => {
    const projectId = newProjectId();
    await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const { worker, taskQueue, metrics } = await productionWorker();
    try {
      const original = await start(client, fallEvent(projectId), taskQueue);
      assert.equal((await original.result()).status, 'delivered');
      const copyId = `copy-${randomUUID()}`;
      await startRaw(copyId, taskQueue, await rawInput(original.workflowId));
      const refused = await refusalOf(copyId);
      assert.equal(refused.type, FailureType.InputNotBound);
      assert.equal(refused.nonRetryable, true);
      assert.match(refused.message, /sealed for another workflow/);
      await worker.waitFor(/Event refused: its input was sealed for another workflow id/);

      // An older client's input, encrypted but sealed for no workflow: refused by the lookup before any read or POST.
      const unsealed = `unsealed-${randomUUID()}`;
      await client.workflow.start('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId: unsealed,
      });
      const unbound = await refusalOf(unsealed);
      assert.equal(unbound.type, FailureType.InputNotBound);
      assert.match(unbound.message, /not sealed for its workflow/);

      assert.equal(receiver.requests.length, 1, 'only the original reached the receiver');
      await refusedCount(metrics, 'event', 'other');
      await refusedCount(metrics, 'event', 'unbound');
      assert.ok(!worker.output().includes(USER), 'no payload in the log');
    } finally {
      await worker.stop();
    }
  });

  it('a copied attempt input scheduled by a foreign workflow on our task queue is refused: nothing sent', async () => {
    const projectId = newProjectId();
    await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
    const { worker, taskQueue, metrics } = await productionWorker();
    const foreignQueue = uniqueTaskQueue('foreign');
    // The foreign worker holds our codec only so its scheduled input is the same ciphertext a byte copy would be.
    const foreign = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: foreignQueue,
      dataConverter: encrypting(),
      workflowBundle: await bundleWorkflowCode({ workflowsPath: require.resolve('../fixtures/workflows/foreign') }),
    });
    try {
      const original = await start(client, fallEvent(projectId), taskQueue);
      assert.equal((await original.result()).status, 'delivered');
      const { runId } = await original.describe();
      const event = fallEvent(projectId);
      const attempt: DeliveryAttemptInput = {
        projectId,
        webhookType: 'FALL_DETECTION',
        body: JSON.stringify(event.payload),
        earlierAttempts: 0,
        waitToken: 1,
        boundTo: { workflowId: original.workflowId, runId },
      };
      const unsealed: DeliveryAttemptInput = { ...attempt, boundTo: undefined };
      await foreign.runUntil(async () => {
        for (const copied of [attempt, unsealed]) {
          const failure = await client.workflow
            .execute('foreignAttempt', {
              args: [taskQueue, copied],
              taskQueue: foreignQueue,
              workflowId: `foreign-${randomUUID()}`,
            })
            .then(
              () => assert.fail('the copied attempt must not run'),
              (error: unknown) => (error as WorkflowFailedError).cause?.cause,
            );
          assert.ok(failure instanceof ApplicationFailure, String(failure));
          assert.equal(failure.type, FailureType.InputNotBound);
        }
      });
      assert.equal(receiver.requests.length, 1, 'only the original reached the receiver');
      await refusedCount(metrics, 'attempt', 'other');
      await refusedCount(metrics, 'attempt', 'unbound');
    } finally {
      await worker.stop();
    }
  });

  describe('redelivery reads the run the log recorded', () => {
    /** A production API's starter: our codec, plain inputs refused. */
    const starter = (taskQueue: string) =>
      createRedeliveryStarter(client, {
        TEMPORAL_TASK_QUEUE: taskQueue,
        NODE_ENV: 'production',
        ALLOW_UNENCRYPTED_EVENTS: false,
      });

    /** A made-up VITAL_THRESHOLD naming the victim project, started plain under the delivered event's id. */
    async function forgeLaterRun(workflowId: string, victimProject: string): Promise<string> {
      const forged: DeliverWebhookEventInput = {
        projectId: victimProject,
        webhookType: 'VITAL_THRESHOLD',
        userUUID: USER,
        payload: {
          userUUID: USER,
          email: 'made.up@example.com',
          firstName: 'Made',
          lastName: 'Up',
          triggeredVitals: [
            { vitalType: 'heartrate', badValue: 250, thresholdValue: 120, vital_id: 'v1', reason: 'high' },
          ],
        },
      };
      const handle = await env.client.workflow.start('deliverWebhookEvent', {
        args: [forged],
        // A queue no worker polls: the run stays open, holding the workflow id.
        taskQueue: uniqueTaskQueue('nobody'),
        workflowId,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      });
      return handle.firstExecutionRunId;
    }

    it('a later plain run under a delivered id is never sent, by redelivery or recovery; the logged event is', async () => {
      const projectId = newProjectId();
      const victim = newProjectId();
      const secret = await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
      const victimReceiver = await startTestReceiver();
      await registrations.register(victim, victimReceiver.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
      const { worker, taskQueue } = await productionWorker({ DELIVERY_GIVE_UP_AFTER_MS: '2500' });
      try {
        const delivered = await start(client, fallEvent(projectId), taskQueue);
        assert.equal((await delivered.result()).status, 'delivered');
        receiver.fallback = { status: 500 };
        const failed = await start(client, fallEvent(projectId), taskQueue);
        await refusalOf(failed.workflowId);
        await forgeLaterRun(delivered.workflowId, victim);
        await forgeLaterRun(failed.workflowId, victim);
        receiver.fallback = { status: 200 };
        const before = receiver.requests.length;

        const deps = { db: database.db, redelivery: starter(taskQueue) };
        const again = await redeliverAsOperator(deps, projectId, delivered.workflowId);
        assert.equal((await client.workflow.getHandle(again.id).result()).status, 'delivered');
        assert.equal((await recoverAsOperator(deps, projectId, { since: new Date(0).toISOString() })).count, 1);
        await receiver.waitForRequests(before + 2);
        const resent = receiver.requests.slice(before);
        assert.deepEqual(
          resent.map((r) => r.headers['webhook-id']).sort(),
          [delivered.workflowId, failed.workflowId].sort(),
        );
        for (const request of resent) {
          assert.ok(independentSignatureValid(secret, request));
          assert.equal(
            (JSON.parse(request.rawBody.toString()) as { reasons?: unknown }).reasons !== undefined,
            true,
            'the logged fall',
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
        assert.equal(victimReceiver.requests.length, 0, 'the made-up event reached nobody');
      } finally {
        await worker.stop();
        await victimReceiver.close();
      }
    });

    it('refuses, with 409 and a log line, a row without its run whose id a later run holds, a plain run, another type', async () => {
      const projectId = newProjectId();
      await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);
      const { worker, taskQueue } = await productionWorker();
      const lines: string[] = [];
      const logger = { warn: (fields: object, msg: string) => lines.push(`${msg} ${JSON.stringify(fields)}`) };
      const redelivery = createRedeliveryStarter(
        client,
        { TEMPORAL_TASK_QUEUE: taskQueue, NODE_ENV: 'production', ALLOW_UNENCRYPTED_EVENTS: false },
        { logger: logger as never },
      );
      try {
        const delivered = await start(client, fallEvent(projectId), taskQueue);
        assert.equal((await delivered.result()).status, 'delivered');
        const row = (await store.findDelivery(database.db, projectId, delivered.workflowId))!;
        assert.ok(row.runId, 'the log keeps the run');
        const forgedRun = await forgeLaterRun(delivered.workflowId, projectId);
        const before = receiver.requests.length;
        const refusals: [string, store.DeliveryRow, RegExp, string][] = [
          [
            'a row from before runs were kept',
            { ...row, runId: null },
            /started after the delivery was logged/,
            'later-run',
          ],
          ['the plain run', { ...row, runId: forgedRun }, /not encrypted with the payload key/, 'not-encrypted'],
          ['another type', { ...row, type: 'VITAL_THRESHOLD' }, /not the logged event/, 'other-type'],
          ['another project', { ...row, projectId: newProjectId() }, /not the logged event/, 'other-project'],
        ];
        for (const [what, changed, detail, reason] of refusals) {
          const error = await redelivery(changed, 0).then(
            () => assert.fail(`${what}: must be refused`),
            (caught: unknown) => caught,
          );
          assert.ok(error instanceof EventNotTrustedError, `${what}: ${String(error)}`);
          assert.equal(error.status, 409);
          assert.match(error.detail, detail, what);
          assert.ok(
            lines.some((l) => l.includes(`"reason":"${reason}"`)),
            `${what}: logged (${lines.join('; ')})`,
          );
        }
        // The row as logged still redelivers: the run it recorded.
        const again = await redelivery(row, 0);
        assert.equal((await client.workflow.getHandle(again).result()).status, 'delivered');
        assert.equal(receiver.requests.length, before + 1);
      } finally {
        await worker.stop();
      }
    });
  });
});

import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import type { ActivityConfig } from '../../activities';
import { createTestEventSender } from '../../api/webhooks/test-event';
import type { DeliverWebhookEventInput } from '../../common/contract';
import type { deliverWebhookEvent } from '../../workflows';
import { FailureType, ProjectIdKey, WebhookTypeKey, type DeliveryFailedDetails } from '../../common/contract';
import {
  USER,
  captureLogger,
  fallEvent,
  fallPayload,
  fastConfig,
  newProjectId,
  vitalPayload,
} from '../support/deliveries';
import { independentSignatureValid, startTestReceiver } from '../support/receiver';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { freePort } from '../../dev/ports';
import { loadConfig } from '../../common/config';
import { startWorker } from '../../worker/start';
import { connectTemporalClient } from '../../common/temporal/connection';

describe('delivery end to end (Temporal dev server, real receiver on 127.0.0.1)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  let log: ReturnType<typeof captureLogger>;
  beforeEach(() => (log = captureLogger()));

  const withWorker = <T>(fn: (taskQueue: string) => Promise<T>, config: ActivityConfig = fastConfig) =>
    fx.runWorker(fn, { config, logger: log.logger });

  const start = (taskQueue: string, input: DeliverWebhookEventInput, workflowId = `webhook-event-${randomUUID()}`) =>
    fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
      args: [input],
      taskQueue,
      workflowId,
    });

  /** The workflow's failure, asserting the run ended Failed. */
  async function failureOf(result: Promise<unknown>): Promise<ApplicationFailure> {
    const error = await result.then(
      () => assert.fail('the workflow should have failed'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof WorkflowFailedError, String(error));
    assert.ok(error.cause instanceof ApplicationFailure, String(error.cause));
    return error.cause;
  }

  /**
   * The attempt's own failure under the workflow's: directly (the first attempt runs as a local activity) or
   * under an ActivityFailure (a later attempt, an activity task).
   */
  function attemptFailureOf(failure: ApplicationFailure): ApplicationFailure {
    const cause = failure.cause instanceof ActivityFailure ? failure.cause.cause : failure.cause;
    assert.ok(cause instanceof ApplicationFailure, String(cause));
    return cause;
  }

  it('delivers a FALL_DETECTION: exact JSON bytes, signed over the raw bytes, with the spec headers', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const workflowId = `webhook-event-${randomUUID()}`;
    const result = await withWorker(async (taskQueue) => {
      const handle = await start(taskQueue, fallEvent(projectId), workflowId);
      return handle.result();
    });
    assert.equal(fx.receiver.requests.length, 1);
    const [request] = fx.receiver.requests;
    assert.equal(request!.method, 'POST');
    assert.equal(request!.path, '/hooks/receive');
    // The body is only the event data, byte for byte; the wrapper (webhookType, userUUID) is not sent.
    assert.equal(request!.rawBody.toString('utf8'), JSON.stringify(fallPayload));
    assert.equal(request!.headers['content-type'], 'application/json');
    assert.equal(request!.headers['x-webhook-id'], workflowId);
    assert.match(String(request!.headers['x-timestamp']), /^\d{13}$/);
    assert.ok(Math.abs(Number(request!.headers['x-timestamp']) - request!.receivedAt) < 5_000);
    assert.match(String(request!.headers['x-signature']), /^[0-9a-f]{64}$/);
    assert.ok(independentSignatureValid(secret, request!), 'signature must verify with an independent HMAC');
    assert.ok(!independentSignatureValid(secret + 'x', request!), 'and not with another secret');
    assert.deepEqual(
      { ...result, durationMs: 0 },
      {
        status: 'delivered',
        webhookId: workflowId,
        attempts: 1,
        statusCode: 200,
        durationMs: 0,
      },
    );
    // Operators find the delivery by project and type in the UI.
    const description = await fx.env.client.workflow.getHandle(workflowId).describe();
    assert.equal(description.typedSearchAttributes.get(ProjectIdKey), projectId);
    assert.equal(description.typedSearchAttributes.get(WebhookTypeKey), 'FALL_DETECTION');
  });

  it('skips silently, without error or request, when the project has no webhook', async () => {
    const result = await withWorker(async (taskQueue) => (await start(taskQueue, fallEvent(newProjectId()))).result());
    assert.equal(result.status, 'skipped');
    assert.equal(result.status === 'skipped' && result.reason, 'no-webhook');
    assert.equal(fx.receiver.requests.length, 0);
  });

  it('fails non-retryably naming the type when the webhook is not subscribed to it; nothing is sent', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const failure = await withWorker(async (taskQueue) =>
      failureOf(
        start(taskQueue, { projectId, webhookType: 'VITAL_THRESHOLD', userUUID: USER, payload: vitalPayload }).then(
          (h) => h.result(),
        ),
      ),
    );
    assert.equal(failure.type, FailureType.NotSubscribed);
    assert.equal(failure.nonRetryable, true);
    assert.match(failure.message, /has not registered a webhook for event: VITAL_THRESHOLD/);
    assert.equal(fx.receiver.requests.length, 0);
  });

  it('delivers a TEST event whatever the subscribed types', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['VITAL_THRESHOLD']);
    const result = await withWorker(async (taskQueue) =>
      (await start(taskQueue, { projectId, webhookType: 'TEST', userUUID: '', payload: { test: 'hello' } })).result(),
    );
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests[0]!.rawBody.toString(), '{"test":"hello"}');
    assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
  });

  it('retries 500 and 503, then delivers on 200: a fresh timestamp and signature per attempt, same bytes and id', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script({ status: 500 }, { status: 503 }, { status: 200 });
    const result = await withWorker(async (taskQueue) => (await start(taskQueue, fallEvent(projectId))).result());
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 3);
    assert.equal(result.status === 'delivered' && result.statusCode, 200);
    assert.equal(fx.receiver.requests.length, 3);
    const timestamps = fx.receiver.requests.map((r) => Number(r.headers['x-timestamp']));
    assert.ok(timestamps[0]! < timestamps[1]! && timestamps[1]! < timestamps[2]!, `timestamps ${timestamps.join(',')}`);
    assert.equal(new Set(fx.receiver.requests.map((r) => r.headers['x-signature'])).size, 3);
    for (const request of fx.receiver.requests) {
      assert.ok(independentSignatureValid(secret, request));
      assert.ok(request.rawBody.equals(fx.receiver.requests[0]!.rawBody));
      assert.equal(request.headers['x-webhook-id'], result.webhookId);
    }
    // Each failed attempt is a warn line with what operators need, and nothing personal or secret.
    const warnings = log.lines.filter((l) => l.level === 40);
    assert.deepEqual(
      warnings.map((w) => [w.projectId, w.webhookType, w.workflowId, w.attempt, w.statusCode, typeof w.durationMs]),
      [
        [projectId, 'FALL_DETECTION', result.webhookId, 1, 500, 'number'],
        [projectId, 'FALL_DETECTION', result.webhookId, 2, 503, 'number'],
      ],
    );
    const allLogs = log.raw.join('');
    for (const forbidden of [secret, 'ada@example.com', 'Lovelace', fallPayload.happenedAt])
      assert.ok(!allLogs.includes(forbidden), `logs must not contain ${forbidden}`);
  });

  it('does not follow a 302: the attempt fails and the redirect target is never called', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script({ status: 302, headers: { location: '/elsewhere' } }, { status: 200 });
    const result = await withWorker(async (taskQueue) => (await start(taskQueue, fallEvent(projectId))).result());
    assert.equal(result.attempts, 2);
    assert.deepEqual(
      fx.receiver.requests.map((r) => `${r.method} ${r.path}`),
      ['POST /hooks/receive', 'POST /hooks/receive'],
    );
    assert.equal(log.lines.find((l) => l.level === 40)?.statusCode, 302);
  });

  it('times an attempt out after WEBHOOK_TIMEOUT_MS and retries', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    // The receiver would answer after 10 s: an attempt cut at about WEBHOOK_TIMEOUT_MS (1 s), well before, was timed
    // out by us (the upper bound leaves 5× the timeout for a loaded machine).
    fx.receiver.script({ status: 200, delayMs: 10_000 }, { status: 200 });
    const result = await withWorker(async (taskQueue) => (await start(taskQueue, fallEvent(projectId))).result());
    assert.equal(result.attempts, 2);
    const warning = log.lines.find((l) => l.level === 40);
    assert.equal(warning?.errorCode, 'TIMEOUT');
    assert.ok(
      Number(warning?.durationMs) >= 900 && Number(warning?.durationMs) < 5_000,
      `took ${String(warning?.durationMs)}`,
    );
  });

  it('honours Retry-After on 503 and 429', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.script(
      { status: 503, headers: { 'retry-after': '1' } },
      { status: 429, headers: { 'retry-after': '1' } },
      { status: 200 },
    );
    // Without Retry-After the next attempt would come after 100 ms.
    const config = { ...fastConfig, DELIVERY_MAX_INTERVAL_MS: 5_000 };
    const result = await withWorker(
      async (taskQueue) => (await start(taskQueue, fallEvent(projectId))).result(),
      config,
    );
    assert.equal(result.attempts, 3);
    const [first, second, third] = fx.receiver.requests.map((r) => r.receivedAt);
    assert.ok(second! - first! >= 950, `second attempt after ${second! - first!} ms`);
    assert.ok(third! - second! >= 950, `third attempt after ${third! - second!} ms`);
  });

  describe('a Retry-After that asks for no wait, or too long a wait, still leads to delivery', () => {
    // A distinct backoff (300 ms, flat) and cap (600 ms), so both the floor and the cap show in the spacing.
    const config = {
      ...fastConfig,
      DELIVERY_INITIAL_INTERVAL_MS: 300,
      DELIVERY_BACKOFF_COEFFICIENT: 1,
      DELIVERY_MAX_INTERVAL_MS: 600,
    };
    const past = new Date(Date.now() - 3_600_000).toUTCString();
    const cases: [string, number][] = [
      ['0', 300],
      ['-1', 300],
      ['1.5', 300],
      [past, 300],
      ['abc', 300],
      ['99999999999', 600],
    ];
    for (const [retryAfter, minGapMs] of cases)
      it(`Retry-After: ${retryAfter === past ? 'an HTTP date in the past' : retryAfter}`, async () => {
        const projectId = newProjectId();
        const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
        const busy = { status: 503, headers: { 'retry-after': retryAfter } };
        fx.receiver.script(busy, busy, busy, { status: 200 });
        const result = await withWorker(
          async (taskQueue) => (await start(taskQueue, fallEvent(projectId))).result(),
          config,
        );
        assert.equal(result.status, 'delivered');
        assert.equal(result.attempts, 4);
        assert.equal(fx.receiver.requests.length, 4);
        assert.deepEqual(
          new Set(fx.receiver.requests.map((r) => r.headers['x-webhook-id'])),
          new Set([result.webhookId]),
        );
        for (const request of fx.receiver.requests) assert.ok(independentSignatureValid(secret, request));
        const arrivals = fx.receiver.requests.map((r) => r.receivedAt);
        for (let i = 1; i < arrivals.length; i++) {
          const gap = arrivals[i]! - arrivals[i - 1]!;
          assert.ok(gap >= minGapMs, `attempt ${i + 1} came ${gap} ms after the previous one (policy: ${minGapMs} ms)`);
          assert.ok(gap < 5_000, `attempt ${i + 1} came ${gap} ms after the previous one: not capped`);
        }
      });
  });

  // Retries 2 s apart: time for the test's change to the registration to commit between two attempts.
  const slowRetry: ActivityConfig = {
    ...fastConfig,
    DELIVERY_INITIAL_INTERVAL_MS: 2_000,
    DELIVERY_MAX_INTERVAL_MS: 2_000,
  };

  it('stops pending retries without delivering once the webhook is deleted', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 500 };
    const result = await withWorker(async (taskQueue) => {
      const handle = await start(taskQueue, fallEvent(projectId));
      await fx.receiver.waitForRequests(2);
      await fx.registrations.delete(projectId);
      return handle.result();
    }, slowRetry);
    assert.equal(result.status, 'skipped');
    assert.equal(result.status === 'skipped' && result.reason, 'registration-deleted');
    const sent = fx.receiver.requests.length;
    assert.equal(sent, 2);
    assert.equal(result.attempts, sent);
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(fx.receiver.requests.length, sent, 'no attempt after the deletion');
  });

  it('delivers to a re-registration with its new URL and new secret', async () => {
    const projectId = newProjectId();
    const oldSecret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 500 };
    const second = await startTestReceiver();
    try {
      let newSecret = '';
      const result = await withWorker(async (taskQueue) => {
        const handle = await start(taskQueue, fallEvent(projectId));
        await fx.receiver.waitForRequests(1);
        await fx.registrations.delete(projectId);
        newSecret = await fx.registrations.register(projectId, second.url, ['FALL_DETECTION']);
        return handle.result();
      }, slowRetry);
      assert.equal(result.status, 'delivered');
      assert.equal(second.requests.length, 1);
      assert.ok(independentSignatureValid(newSecret, second.requests[0]!), 'signed with the new secret');
      assert.ok(!independentSignatureValid(oldSecret, second.requests[0]!), 'not with the old one');
    } finally {
      await second.close();
    }
  });

  it('fails at once, sending nothing, a delivery whose workflow id cannot be an X-Webhook-Id (outside ASCII)', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const failure = await withWorker(async (taskQueue) =>
      failureOf(
        start(taskQueue, fallEvent(projectId), `webhook-event-ünïcödé-${randomUUID()}`).then((h) => h.result()),
      ),
    );
    assert.equal(failure.type, FailureType.DeliveryFailed);
    assert.match(failure.message, /failed after 1 attempt\(s\): The workflow id cannot be sent as X-Webhook-Id/);
    assert.equal(attemptFailureOf(failure).type, FailureType.InvalidEvent);
    assert.equal(fx.receiver.requests.length, 0);
  });

  it('refuses 127.0.0.1 and localhost when ALLOW_PRIVATE_WEBHOOK_URLS is unset: non-retryable, nothing sent', async () => {
    const config = { ...fastConfig, ALLOW_PRIVATE_WEBHOOK_URLS: false };
    for (const url of [fx.receiver.url, fx.receiver.url.replace('127.0.0.1', 'localhost')]) {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, url, ['FALL_DETECTION']);
      const failure = await withWorker(
        async (taskQueue) => failureOf(start(taskQueue, fallEvent(projectId)).then((h) => h.result())),
        config,
      );
      assert.equal(failure.type, FailureType.DeliveryFailed);
      assert.match(
        failure.message,
        /failed after 1 attempt\(s\): Refused to deliver: the webhook URL leads to a loopback address/,
      );
      const attemptFailure = attemptFailureOf(failure);
      assert.equal(attemptFailure.type, FailureType.TargetForbidden);
      assert.equal(attemptFailure.nonRetryable, true);
    }
    assert.equal(fx.receiver.requests.length, 0);
  });

  it('fails invalid events non-retryably with a message naming the problem, without sending', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    const badVital = {
      ...vitalPayload,
      triggeredVitals: [{ ...vitalPayload.triggeredVitals[0], vitalType: 'mood' }],
    };
    const cases: [unknown, RegExp][] = [
      [
        { projectId, webhookType: 'VITAL_THRESHOLD', userUUID: USER, payload: badVital },
        /triggeredVitals\[0\]\.vitalType must be one of/,
      ],
      [
        {
          projectId,
          webhookType: 'FALL_DETECTION',
          userUUID: USER,
          payload: { ...fallPayload, happenedAt: 'yesterday' },
        },
        /payload\.happenedAt must be an ISO 8601/,
      ],
      [
        { projectId, webhookType: 'SMOKE_ALARM', userUUID: USER, payload: fallPayload },
        /Unknown event type "SMOKE_ALARM"/,
      ],
    ];
    await withWorker(async (taskQueue) => {
      for (const [input, message] of cases) {
        const failure = await failureOf(start(taskQueue, input as DeliverWebhookEventInput).then((h) => h.result()));
        assert.equal(failure.type, FailureType.InvalidEvent);
        assert.equal(failure.nonRetryable, true);
        assert.match(failure.message, message);
      }
    });
    assert.equal(fx.receiver.requests.length, 0);
  });

  describe('test event sender', () => {
    it('reports a delivered TEST event with status, duration and workflow id', async () => {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      fx.receiver.script({ status: 204 });
      const outcome = await withWorker((taskQueue) =>
        createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: taskQueue, TEST_DELIVERY_WAIT_MS: 10_000 })(
          projectId,
        ),
      );
      assert.equal(outcome.delivered, true);
      assert.ok(outcome.delivered && outcome.statusCode === 204 && outcome.durationMs >= 0);
      assert.match(outcome.workflowId, new RegExp(`^webhook-test-${projectId}-`));
      const body = JSON.parse(fx.receiver.requests[0]!.rawBody.toString()) as { test: string };
      assert.deepEqual(Object.keys(body), ['test']);
      assert.ok(body.test.includes(projectId));
      assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
    });

    it('reports the receiver status after exactly one attempt when it refuses', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      fx.receiver.fallback = { status: 500 };
      const outcome = await withWorker((taskQueue) =>
        createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: taskQueue, TEST_DELIVERY_WAIT_MS: 10_000 })(
          projectId,
        ),
      );
      assert.equal(outcome.delivered, false);
      assert.ok(!outcome.delivered && outcome.statusCode === 500);
      assert.ok(!outcome.delivered && /HTTP 500/.test(outcome.reason));
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(fx.receiver.requests.length, 1, 'TEST is one attempt, no retries');
    });

    it('reports the error code when nothing listens on the port', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, `http://127.0.0.1:${await freePort()}/hook`, ['FALL_DETECTION']);
      const outcome = await withWorker((taskQueue) =>
        createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: taskQueue, TEST_DELIVERY_WAIT_MS: 10_000 })(
          projectId,
        ),
      );
      assert.equal(outcome.delivered, false);
      assert.ok(!outcome.delivered && /ECONNREFUSED/.test(outcome.reason), JSON.stringify(outcome));
    });

    it('gives up waiting after TEST_DELIVERY_WAIT_MS', async () => {
      const projectId = newProjectId();
      await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      fx.receiver.script({ status: 200, delayMs: 800 });
      const outcome = await withWorker((taskQueue) =>
        createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: taskQueue, TEST_DELIVERY_WAIT_MS: 200 })(projectId),
      );
      assert.equal(outcome.delivered, false);
      assert.ok(!outcome.delivered && /within 200 ms/.test(outcome.reason));
    });
  });

  it('startWorker: runs from configuration alone, with search attributes detected, and shuts down cleanly', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const taskQueue = uniqueTaskQueue('start-worker');
    const config = loadConfig(
      {
        DATABASE_URL: fx.database.url,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        WEBHOOK_SECRET_KEY: fx.registrations.key,
        ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
        PAYLOAD_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
      },
      { database: true },
    );
    const running = await startWorker(config, log.logger);
    // The worker encrypts what it writes: its result is read by a client holding the same key ring.
    const client = await connectTemporalClient(config);
    try {
      const handle = await client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId: `webhook-event-${randomUUID()}`,
      });
      const result = await handle.result();
      assert.equal(result.status, 'delivered');
      assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
      const description = await handle.describe();
      assert.equal(description.typedSearchAttributes.get(ProjectIdKey), projectId);
      assert.ok(!log.lines.some((l) => String(l.msg).startsWith('search attributes missing')));
    } finally {
      await running.shutdown();
      await client.connection.close();
    }
    assert.equal(running.worker.getState(), 'STOPPED');
  });

  it('exposes the last attempt in the failure details (what the test endpoint and operators read)', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 502 };
    const failure = await withWorker(async (taskQueue) =>
      failureOf(
        start(taskQueue, { projectId, webhookType: 'TEST', userUUID: '', payload: { test: 't' } }).then((h) =>
          h.result(),
        ),
      ),
    );
    const details = failure.details?.[0] as DeliveryFailedDetails;
    assert.deepEqual(details, {
      projectId,
      webhookType: 'TEST',
      attempts: 1,
      statusCode: 502,
      lastError: 'Receiver answered HTTP 502',
    });
  });
});

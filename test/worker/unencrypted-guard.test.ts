// The activities' refusal of inputs not encrypted with the payload key (worker/unencrypted-guard.ts) as a unit: what
// it refuses, what it logs and counts, and how it unwraps allowed inputs, argument by argument.
import assert from 'node:assert/strict';
import { ApplicationFailure, noopMetricMeter, type MetricMeter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { unencryptedRefusedTotal } from '../../common/telemetry/delivery-metrics';
import { FailureType } from '../../common/contract';
import { unencryptedActivityInputGuard } from '../../worker/unencrypted-guard';
import { captureLogger } from '../support/deliveries';

const refusedMarker = (value: unknown) => ({ __unencryptedPayload: { allowed: false, value } });
const allowedMarker = (value: unknown) => ({ __unencryptedPayload: { allowed: true, value } });

/** A metric meter that records what the guard counts through the worker's meter. */
function recordingMeter() {
  const added: { name: string; unit?: string; value: number; tags?: unknown }[] = [];
  const meter: MetricMeter = {
    createHistogram: (...args) => noopMetricMeter.createHistogram(...args),
    createGauge: (...args) => noopMetricMeter.createGauge(...args),
    withTags() {
      return this;
    },
    createCounter: (name, unit) => ({
      name,
      unit: unit ?? '',
      description: '',
      kind: 'counter',
      valueType: 'int',
      add: (value, tags) => void added.push({ name, unit, value, tags }),
      withTags() {
        return this;
      },
    }),
  };
  return { meter, added };
}

const refusedCount = async () =>
  (await unencryptedRefusedTotal.get()).values.find((v) => v.labels.what === 'activity')?.value ?? 0;

describe('the activity input guard (unencrypted payloads)', () => {
  it('refuses for good, naming the activity, and logs and counts the refusal without the input', async () => {
    const log = captureLogger();
    const { meter, added } = recordingMeter();
    const env = new MockActivityEnvironment(
      {
        activityType: 'deliverWebhookAttempt',
        workflowType: 'someoneElsesWorkflow',
        workflowExecution: { workflowId: 'foreign-1', runId: 'r1' },
      },
      { interceptors: [unencryptedActivityInputGuard(log.logger)], metricMeter: meter },
    );
    const before = await refusedCount();
    const ran: unknown[] = [];
    const refusal = await env
      .run((input: unknown) => (ran.push(input), Promise.resolve('sent')), refusedMarker({ body: 'x' }))
      .then(
        () => assert.fail('must be refused'),
        (error: unknown) => error,
      );
    assert.ok(refusal instanceof ApplicationFailure);
    assert.equal(refusal.type, FailureType.UnencryptedEventRefused);
    assert.equal(refusal.nonRetryable, true);
    assert.equal(
      refusal.message,
      'Activity deliverWebhookAttempt refused: its input is not encrypted with the payload key (PAYLOAD_ENCRYPTION_KEYS)',
    );
    assert.deepEqual(ran, []);
    const warned = log.lines.filter((line) => line.level === 40);
    assert.equal(warned.length, 1);
    assert.equal(warned[0]!.msg, 'activity input not encrypted with PAYLOAD_ENCRYPTION_KEYS: refused, nothing sent');
    assert.equal(warned[0]!.activityType, 'deliverWebhookAttempt');
    assert.equal(warned[0]!.workflowType, 'someoneElsesWorkflow');
    assert.equal(warned[0]!.workflowId, 'foreign-1');
    assert.equal(await refusedCount(), before + 1);
    assert.deepEqual(added, [
      {
        name: 'webhook_unencrypted_refused',
        unit: 'payloads',
        value: 1,
        // The SDK's activity meter adds the activity's own tags.
        tags: { what: 'activity', activityType: 'deliverWebhookAttempt', namespace: 'test', taskQueue: 'test' },
      },
    ]);
  });

  it('refuses when any one argument is refused, even beside encrypted and allowed ones', async () => {
    const { meter } = recordingMeter();
    const env = new MockActivityEnvironment(undefined, {
      interceptors: [unencryptedActivityInputGuard(captureLogger().logger)],
      metricMeter: meter,
    });
    const ran: unknown[] = [];
    const activity = (...args: unknown[]) => (ran.push(args), Promise.resolve('sent'));
    await assert.rejects(env.run(activity, { body: 'a' }, allowedMarker(1), refusedMarker(2)), ApplicationFailure);
    assert.deepEqual(ran, []);
  });

  it('unwraps allowed arguments one by one and passes the others as they came, logging and counting nothing', async () => {
    const log = captureLogger();
    const { meter, added } = recordingMeter();
    const env = new MockActivityEnvironment(undefined, {
      interceptors: [unencryptedActivityInputGuard(log.logger)],
      metricMeter: meter,
    });
    const before = await refusedCount();
    const ran: unknown[] = [];
    const activity = (...args: unknown[]) => (ran.push(args), Promise.resolve('sent'));
    assert.equal(await env.run(activity, { body: 'a' }, allowedMarker({ body: 'b' }), 3), 'sent');
    assert.equal(await env.run(activity, allowedMarker({ body: 'c' })), 'sent');
    assert.equal(await env.run(activity, { body: 'd' }, null), 'sent');
    // A marker without a verdict (not refused) is unwrapped like an allowed one.
    assert.equal(await env.run(activity, { __unencryptedPayload: { value: 'e' } }), 'sent');
    assert.deepEqual(ran, [[{ body: 'a' }, { body: 'b' }, 3], [{ body: 'c' }], [{ body: 'd' }, null], ['e']]);
    assert.deepEqual(log.lines, []);
    assert.deepEqual(added, []);
    assert.equal(await refusedCount(), before);
  });
});

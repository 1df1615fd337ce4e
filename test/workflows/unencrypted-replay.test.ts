// The refusal of unencrypted events is decided once and recorded: a history replays as it ran whichever way
// ALLOW_UNENCRYPTED_EVENTS is set on the worker that replays it. Opening or closing the migration window while
// deliveries are in flight must never turn them into nondeterminism errors (stuck, neither delivered nor failed).
import assert from 'node:assert/strict';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import { EncryptionCodec, generatePayloadKey, parsePayloadKeyRing } from '../../common/crypto/payload-codec';
import { FailureType } from '../../common/contract';
import { fallEvent, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createLocalEnvironment, workflowBundle } from '../support/temporal';

describe('unencrypted events: the decision replays whatever ALLOW_UNENCRYPTED_EVENTS says now', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const ring = parsePayloadKeyRing(generatePayloadKey());
  /** The worker's codec in production: refused, or allowed (the migration window). */
  const workerCodec = (allowed: boolean) => new EncryptionCodec(ring, { markUnencrypted: { allowed } });

  async function replay(workflowId: string, allowed: boolean): Promise<void> {
    const history = await fx.env.client.workflow.getHandle(workflowId).fetchHistory();
    await Worker.runReplayHistory(
      { workflowBundle: await workflowBundle(), dataConverter: { payloadCodecs: [workerCodec(allowed)] } },
      history,
      workflowId,
    );
  }

  it('a delivery accepted while the window was open replays on a worker that refuses', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const workflowId = `window-${projectId}`;
    const result = await fx.runWorker(
      async (taskQueue) => {
        const handle = await startDeliveryWorkflow(fx.env.client, fallEvent(projectId), { taskQueue, workflowId });
        // The result is sealed by the worker: read with the key.
        const reader = new Client({
          connection: fx.env.connection,
          dataConverter: { payloadCodecs: [workerCodec(true)] },
        });
        return (await reader.workflow.getHandle(handle.workflowId).result()) as { status: string };
      },
      { payloadCodec: workerCodec(true) },
    );
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
    await replay(workflowId, false);
  });

  it('a refused event replays as refused on a worker whose window is open', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const workflowId = `refused-${projectId}`;
    const refusal = await fx.runWorker(
      async (taskQueue) => {
        const handle = await startDeliveryWorkflow(fx.env.client, fallEvent(projectId), { taskQueue, workflowId });
        return handle.result().then(
          () => assert.fail('refused'),
          (error: unknown) => error,
        );
      },
      { payloadCodec: workerCodec(false) },
    );
    assert.ok(refusal instanceof WorkflowFailedError && refusal.cause instanceof ApplicationFailure);
    assert.equal(refusal.cause.type, FailureType.UnencryptedEventRefused);
    assert.equal(fx.receiver.requests.length, 0, 'nothing sent');
    await replay(workflowId, true);
  });
});

// Sealed inputs on a worker that requires them, on the real dev server: deliveries in flight when sealing ships keep
// going. An attempt an earlier worker scheduled without a seal is refused once, before any request, and the delivery
// goes on with a sealed one, counting the same attempts. (Copies and forgeries: test/operations/production-guards.test.ts.)
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { temporal } from '@temporalio/proto';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import { FailureType, type DeliverWebhookEventResult } from '../../common/contract';
import { fallEvent, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

describe('sealed inputs: deliveries in flight when sealing ships (Temporal dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);

  it('an attempt scheduled without a seal is refused before any request, then scheduled again sealed and delivered', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    // The first attempt (the lookup's) fails, so the durable activity takes over; the earlier worker's scheduling of
    // it is what the wrapper stands in for: the same input without its seal.
    fx.receiver.script({ status: 500 });
    let unsealed = 0;
    const workflowId = `webhook-event-${randomUUID()}`;
    const result = await fx.runWorker(
      async (taskQueue) => {
        const handle = await startDeliveryWorkflow(fx.env.client, fallEvent(projectId), { taskQueue, workflowId });
        return (await handle.result()) as DeliverWebhookEventResult;
      },
      {
        requireBoundInputs: true,
        wrapActivities: (activities) => ({
          ...activities,
          deliverWebhookAttempt: (input) =>
            activities.deliverWebhookAttempt(unsealed++ === 0 ? { ...input, boundTo: undefined } : input),
        }),
      },
    );
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 2, 'the refused attempt made no request and is not counted');
    assert.equal(fx.receiver.requests.length, 2);
    assert.ok(independentSignatureValid(secret, fx.receiver.requests[1]!));
    const history = await fx.env.client.workflow.getHandle(workflowId).fetchHistory();
    const failures = (history.events ?? []).filter(
      (e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    );
    assert.deepEqual(
      failures.map((e) => e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type),
      [FailureType.InputNotBound],
    );
  });
});

// The operator alert is sent outside the delivery attempt: an alert endpoint that hangs neither delays nor fails the
// attempt that raised the alert, and the alert still goes out (or is logged as failed), on the real dev server.
import assert from 'node:assert/strict';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import type { DeliverWebhookEventResult } from '../../common/contract';
import { createAlertSender } from '../../activities/alerts';
import { captureLogger, fallEvent, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

const ALERT_SECRET = 'alert-secret-0123456789abcdef';

describe('operator alerts outside the delivery attempt', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  let alertReceiver: TestReceiver;
  beforeEach(async () => (alertReceiver = await startTestReceiver()));
  afterEach(() => alertReceiver.close());

  it('a hanging alert endpoint leaves the attempt’s outcome and timing alone; the alert goes out, then is logged as failed', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    // The first attempt fails (an alert is raised at once: ALERT_AFTER_MS 0), the second delivers.
    fx.receiver.script({ status: 500 });
    alertReceiver.fallback = { delayMs: 600_000 };
    const log = captureLogger();
    const unreachable = () => log.lines.filter((line) => line.msg === 'alert webhook unreachable');
    const result = await fx.runWorker(
      async (taskQueue) => {
        const handle = await startDeliveryWorkflow(fx.env.client, fallEvent(projectId), {
          taskQueue,
          workflowId: `alert-${projectId}`,
        });
        const outcome = (await handle.result()) as DeliverWebhookEventResult;
        // Ordered, not timed: the delivery ended while the alert POST still hung (its timeout is 60 s away).
        assert.equal(unreachable().length, 0, 'the attempt did not wait for the alert endpoint');
        return outcome;
      },
      {
        logger: log.logger,
        alerts: { alertAfterMs: 0, webhook: { url: alertReceiver.url, secret: ALERT_SECRET, timeoutMs: 60_000 } },
      },
    );
    assert.equal(result.status, 'delivered');
    assert.equal(result.attempts, 2);
    assert.deepEqual(
      fx.receiver.requests.map((r) => r.headers['x-webhook-id']),
      [`alert-${projectId}`, `alert-${projectId}`],
    );
    const [alert] = await alertReceiver.waitForRequests(1);
    assert.ok(independentSignatureValid(ALERT_SECRET, alert!), 'the alert went out, signed');
    assert.equal((JSON.parse(alert!.rawBody.toString()) as { alert: string }).alert, 'endpoint-failing');
    // The endpoint dies with the POST in flight: logged as failed, nothing else happens.
    await alertReceiver.close();
    for (let i = 0; i < 100 && unreachable().length === 0; i += 1) await new Promise((r) => setTimeout(r, 50));
    assert.equal(unreachable().length, 1);
    assert.equal(unreachable()[0]!.alert, 'endpoint-failing');
  });
});

describe('operator alerts: the alert POST’s default timeout', () => {
  it('abandons a hanging alert endpoint after 10 s when no timeout is given, and logs it as failed', async () => {
    const hanging = await startTestReceiver();
    hanging.fallback = { delayMs: 600_000 };
    try {
      const log = captureLogger();
      const send = createAlertSender(log.logger, {
        alertAfterMs: 0,
        webhook: { url: hanging.url, secret: ALERT_SECRET },
      });
      const sent = Date.now();
      await send({
        alert: 'endpoint-failing',
        projectId: newProjectId(),
        webhookType: 'FALL_DETECTION',
        deliveryIds: ['webhook-event-x'],
        consecutiveFailures: 1,
        failingSince: null,
        lastError: 'HTTP 500',
        raisedAt: new Date().toISOString(),
      });
      await hanging.waitForRequests(1);
      const unreachable = () => log.lines.find((line) => line.msg === 'alert webhook unreachable');
      while (!unreachable() && Date.now() - sent < 13_000) await new Promise((r) => setTimeout(r, 100));
      const waited = Date.now() - sent;
      assert.ok(unreachable(), `still waiting for the alert endpoint after ${waited} ms`);
      assert.ok(waited >= 9_500 && waited < 13_000, `abandoned after ${waited} ms, not 10 s`);
    } finally {
      await hanging.close();
    }
  });
});

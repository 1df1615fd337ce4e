// Operator alerts from a real worker on the Temporal dev server: one signed alert per failure episode of deliveries
// given up, one when an endpoint has failed for ALERT_AFTER_MS; and the settings of alerts, retention and recovery.
import assert from 'node:assert/strict';
import { loadConfig } from '../../common/config';
import { fallEvent } from '../support/deliveries';
import { ALERT_SECRET, givingUp, useDeliveryLogSuite } from './fixture';
import { independentSignatureValid } from '../support/receiver';

describe('delivery log: operator alerts when deliveries fail', function () {
  this.timeout(60_000);
  const suite = useDeliveryLogSuite();
  const { fx, withWorker, deliver, call, project } = suite;

  it('raises one signed alert per failure episode; a delivery in between ends the episode', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    await withWorker(async () => {
      fx.receiver.fallback = { status: 500 };
      const first = await deliver(fallEvent(p));
      await deliver(fallEvent(p));
      // The alert's POST runs outside the attempt: it may land just after the delivery ends.
      await suite.alertReceiver.waitForRequests(1);
      assert.equal(suite.alertReceiver.requests.length, 1, 'two give-ups, one episode: one alert');
      const [alert] = suite.alertReceiver.requests;
      assert.ok(independentSignatureValid(ALERT_SECRET, alert!), 'signed like a delivery');
      const body = JSON.parse(alert!.rawBody.toString('utf8')) as Record<string, unknown>;
      assert.equal(body.alert, 'delivery-gave-up');
      assert.equal(body.projectId, p);
      assert.equal(body.webhookType, 'FALL_DETECTION');
      assert.deepEqual(body.deliveryIds, [first]);
      assert.ok(Number(body.consecutiveFailures) >= 2);
      assert.ok(!/Ada|Lovelace|example\.com|3f2b8c1e/.test(alert!.rawBody.toString('utf8')), 'no personal data');
      const lines = suite.log.lines.filter((l) => String(l.msg).startsWith('operator alert:'));
      assert.equal(lines.length, 1);
      assert.equal(lines[0]!.level, 50);

      fx.receiver.fallback = { status: 200 };
      await deliver(fallEvent(p));
      assert.equal((await call('GET', `/webhooks/project/${p}/health`, { user: 'alice' })).body.state, 'healthy');
      fx.receiver.fallback = { status: 500 };
      const third = await deliver(fallEvent(p));
      await suite.alertReceiver.waitForRequests(2);
      assert.equal(suite.alertReceiver.requests.length, 2, 'a new episode: a new alert');
      assert.deepEqual(
        (JSON.parse(suite.alertReceiver.requests[1]!.rawBody.toString()) as { deliveryIds: string[] }).deliveryIds,
        [third],
      );
    });
  });

  it('alerts once when an endpoint has failed for ALERT_AFTER_MS, before the delivery gives up', async () => {
    const p = await project('alice');
    await fx.registrations.register(p, fx.receiver.url, ['FALL_DETECTION']);
    fx.receiver.fallback = { status: 500 };
    // Long enough a window for attempts after ALERT_AFTER_MS: the hand-over from the first attempt waits on a timer.
    await withWorker(() => deliver(fallEvent(p)), { ...givingUp, DELIVERY_GIVE_UP_AFTER_MS: 4_000 }, 1_000);
    await suite.alertReceiver.waitForRequests(1);
    assert.equal(suite.alertReceiver.requests.length, 1);
    const body = JSON.parse(suite.alertReceiver.requests[0]!.rawBody.toString()) as Record<string, unknown>;
    assert.equal(body.alert, 'endpoint-failing');
    assert.ok(Date.parse(String(body.raisedAt)) - Date.parse(String(body.failingSince)) >= 1_000);
  });
});

describe('delivery log settings: alerts, retention, recovery and metrics', () => {
  it('config: ALERT_WEBHOOK_URL needs ALERT_WEBHOOK_SECRET; defaults for retention, alerts and recovery', () => {
    const config = loadConfig({});
    assert.equal(config.DELIVERY_LOG_RETENTION_DAYS, 30);
    assert.equal(config.ALERT_AFTER_MS, 900_000);
    assert.equal(config.RECOVER_RATE_PER_SECOND, 10);
    assert.equal(config.WORKER_METRICS_PORT, undefined);
    assert.throws(
      () => loadConfig({ ALERT_WEBHOOK_URL: 'https://alerts.example/hook' }),
      /ALERT_WEBHOOK_SECRET is required with ALERT_WEBHOOK_URL/,
    );
    assert.throws(() => loadConfig({ DELIVERY_LOG_RETENTION_DAYS: '0' }), /DELIVERY_LOG_RETENTION_DAYS/);
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN/);
  });
});

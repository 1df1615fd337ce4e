import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  isSubscribed,
  notSubscribedMessage,
  type AttemptFailureDetails,
  type DeliverWebhookEventInput,
  type DeliveryAttemptOutcome,
  type DeliveryOutcomeReport,
} from '../common/contract';
import {
  claimEpisodeAlert,
  findEndpointHealth,
  markDeliveryFailed,
  recordDeliveryAttempt,
  recordEndpointFailure,
  upsertDelivery,
  type DeliveryKey,
  type EndpointHealthRow,
} from '../db';
import { DEFAULT_ALERT_AFTER_MS, createAlertSender, type OperatorAlert, type SendAlert } from './alerts';
import type { ActivityDeps } from './deps';
import { currentRun } from './input-binding';
import { eventPersonHash } from '../common/crypto/person-hash';
import { deliveriesTotal, deliveryAttemptsTotal, deliveryLatencySeconds } from '../common/telemetry/delivery-metrics';

/** One attempt of a delivery: its number counts every attempt of the delivery (a row per attempt in the log). */
export interface AttemptKey extends DeliveryKey {
  attempt: number;
}

/**
 * The delivery log, endpoint health, alerts and delivery metrics, written by the activities: status, error codes
 * and timing only, never payloads or response bodies.
 */
export function createDeliveryLog(deps: Pick<ActivityDeps, 'db' | 'logger' | 'alerts' | 'notify' | 'personHashKey'>) {
  const { db, logger } = deps;
  const alertAfterMs = deps.alerts?.alertAfterMs ?? DEFAULT_ALERT_AFTER_MS;
  const sendAlert: SendAlert = createAlertSender(logger.child({ component: 'alerts' }), {
    alertAfterMs,
    ...deps.alerts,
  });

  const alertOf = (
    kind: OperatorAlert['alert'],
    key: Pick<DeliveryKey, 'id' | 'type'>,
    health: EndpointHealthRow,
  ): OperatorAlert => ({
    alert: kind,
    projectId: health.projectId,
    webhookType: key.type,
    deliveryIds: [key.id],
    consecutiveFailures: health.consecutiveFailures,
    failingSince: health.failingSince?.toISOString() ?? null,
    lastError: health.lastError,
    raisedAt: new Date().toISOString(),
  });

  /** Counted once per run attempt, in prom-client and in Temporal's meter (the worker's Prometheus endpoint). */
  function countAttempt(type: string, result: 'delivered' | 'failed', latencySeconds?: number): void {
    deliveryAttemptsTotal.inc({ type, result });
    const meter = Context.current().metricMeter;
    meter.createCounter('webhook_delivery_attempts', 'attempts').add(1, { type, result });
    if (result === 'delivered') countOutcome(type, 'delivered');
    if (latencySeconds === undefined) return;
    deliveryLatencySeconds.observe({ type }, latencySeconds);
    meter.createHistogram('webhook_delivery_latency', 'float', 's').record(latencySeconds, { type });
  }

  /** A delivery ended: counted in prom-client and in Temporal's meter. */
  function countOutcome(type: string, outcome: 'delivered' | 'failed' | 'skipped'): void {
    deliveriesTotal.inc({ type, outcome });
    Context.current().metricMeter.createCounter('webhook_deliveries', 'deliveries').add(1, { type, outcome });
  }

  async function recordAttempt(key: AttemptKey, outcome: DeliveryAttemptOutcome | ApplicationFailure) {
    const runAttempt = key.attempt;
    if (outcome instanceof ApplicationFailure) {
      const details = outcome.details?.[0] as AttemptFailureDetails | undefined;
      const error = outcome.message;
      const row = await recordDeliveryAttempt(db, key, {
        runAttempt,
        statusCode: details?.statusCode,
        errorCode: details?.errorCode,
        durationMs: details?.durationMs ?? 0,
        error,
        delivered: false,
      });
      if (!row) return;
      countAttempt(key.type, 'failed');
      await recordEndpointFailure(db, key.projectId, error);
      const claimed = await claimEpisodeAlert(db, key.projectId, alertAfterMs);
      if (claimed) await sendAlert(alertOf('endpoint-failing', key, claimed));
    } else if (outcome.status === 'delivered') {
      const row = await recordDeliveryAttempt(db, key, {
        runAttempt,
        statusCode: outcome.statusCode,
        durationMs: outcome.durationMs,
        delivered: true,
      });
      if (!row) return;
      // A redelivery's age is the member's choice, not the pipeline's latency: only first runs are measured.
      const firstRun = key.id === key.workflowId;
      countAttempt(
        key.type,
        'delivered',
        firstRun ? Math.max(0, Date.now() - row.createdAt.getTime()) / 1000 : undefined,
      );
    }
  }

  return {
    /**
     * The lookup found a valid event: pending when the webhook takes it, else skipped with the reason. The row's first
     * write, so it carries the event's person hash (when the worker holds the key), which later writes keep.
     */
    async planned(input: DeliverWebhookEventInput, types: readonly string[] | undefined): Promise<void> {
      const { workflowId, runId } = currentRun();
      const personHash = deps.personHashKey && eventPersonHash(deps.personHashKey, input.userUUID);
      const key = {
        id: input.webhookId ?? workflowId,
        projectId: input.projectId,
        type: input.webhookType,
        workflowId,
        runId,
        ...(personHash !== undefined && { personHash }),
      };
      if (!types) await this.skipped(key, 'No webhook is registered for the project');
      else if (!isSubscribed(types, input.webhookType))
        await this.skipped(key, notSubscribedMessage(input.projectId, input.webhookType));
      else await upsertDelivery(db, key, 'pending');
    },

    /** The event was not sent (no webhook, or deleted meanwhile): skipped, with the reason. */
    async skipped(key: DeliveryKey, reason: string): Promise<void> {
      if (await upsertDelivery(db, key, 'skipped', reason)) countOutcome(key.type, 'skipped');
    },

    /** The webhook is paused: the delivery waits, held, for the pause to end (no attempt, nothing counted). */
    async held(key: DeliveryKey): Promise<void> {
      await upsertDelivery(db, key, 'held').catch(logFailedWrite);
    },

    /**
     * Logs an attempt's outcome (delivered, or the failure about to be thrown) and returns or rethrows it. A log
     * write that fails is logged, never allowed to turn a delivered attempt into a retried POST.
     */
    async attempt<T extends DeliveryAttemptOutcome>(key: AttemptKey, run: () => T): Promise<T> {
      let outcome: T;
      try {
        outcome = run();
      } catch (failure) {
        if (failure instanceof ApplicationFailure) await recordAttempt(key, failure).catch(logFailedWrite);
        throw failure;
      }
      await recordAttempt(key, outcome).catch(logFailedWrite);
      return outcome;
    },

    /** Logs a failed attempt and hands its failure back for the activity to throw. */
    async failedAttempt(key: AttemptKey, failure: ApplicationFailure): Promise<ApplicationFailure> {
      await recordAttempt(key, failure).catch(logFailedWrite);
      return failure;
    },

    /** The workflow gave up: failed, counted, and the episode's alert raised if not raised yet. */
    async gaveUp(key: DeliveryKey, lastError: string): Promise<void> {
      if (!(await markDeliveryFailed(db, key, lastError))) return;
      countOutcome(key.type, 'failed');
      // A member's TEST is one attempt whose failure the test endpoint already reports to them: no give-up alert.
      if (key.type === 'TEST') return;
      // The project's own contacts hear of it too: the type and X-Webhook-Id, nothing of the event.
      deps.notify?.({
        condition: 'delivery-gave-up',
        projectId: key.projectId,
        facts: { webhookType: key.type, webhookIds: [key.id] },
      });
      // A give-up without a failed POST (a refused target, a bad URL) still starts an episode.
      const health = await findEndpointHealth(db, key.projectId);
      if (!health || health.consecutiveFailures === 0) await recordEndpointFailure(db, key.projectId, lastError);
      const claimed = await claimEpisodeAlert(db, key.projectId);
      if (claimed) await sendAlert(alertOf('delivery-gave-up', key, claimed));
    },
  };

  function logFailedWrite(error: unknown): void {
    logger.error({ err: error }, 'delivery log write failed: the delivery goes on without it');
  }
}

export type DeliveryLog = ReturnType<typeof createDeliveryLog>;

/** Activity: the workflow reports how a delivery ended when no attempt could say it (given up, skipped). */
export function createRecordDeliveryOutcome(
  deps: Pick<ActivityDeps, 'db' | 'logger' | 'alerts' | 'notify' | 'personHashKey'>,
  deliveryLog: DeliveryLog = createDeliveryLog(deps),
) {
  return async function recordDeliveryOutcome(report: DeliveryOutcomeReport): Promise<void> {
    const key: DeliveryKey = {
      id: report.webhookId,
      projectId: report.projectId,
      type: report.webhookType,
      ...currentRun(),
    };
    if (report.status === 'failed') await deliveryLog.gaveUp(key, report.lastError);
    else await deliveryLog.skipped(key, report.lastError);
  };
}

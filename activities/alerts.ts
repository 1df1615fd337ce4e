import { request } from 'undici';
import type { Logger } from '../common/logger';
import { signPayload } from '../common/signature';

/** When and where operator alerts go (ALERT_AFTER_MS, ALERT_WEBHOOK_URL, ALERT_WEBHOOK_SECRET). */
export interface AlertOptions {
  /** An endpoint failing continuously this long raises an alert. */
  alertAfterMs: number;
  webhook?: { url: string; secret: string };
}

export const DEFAULT_ALERT_AFTER_MS = 15 * 60_000;

/** What an operator is told: project, type, counts and ids; never payloads, personal data or secrets. */
export interface OperatorAlert {
  alert: 'delivery-gave-up' | 'endpoint-failing';
  projectId: string;
  webhookType: string;
  /** X-Webhook-Ids of the deliveries concerned. */
  deliveryIds: string[];
  consecutiveFailures: number;
  failingSince: string | null;
  /** Status or error code in words. */
  lastError: string | null;
  raisedAt: string;
}

export type SendAlert = (alert: OperatorAlert) => Promise<void>;

/**
 * An error log line for every alert, and a signed POST (X-Timestamp, X-Signature as for deliveries) to the
 * operator's alert webhook when one is configured. A failed POST is logged, never thrown: the log line stands.
 */
export function createAlertSender(logger: Logger, options: AlertOptions): SendAlert {
  return async (alert) => {
    logger.error({ ...alert }, `operator alert: ${alert.alert} for project ${alert.projectId}`);
    if (!options.webhook) return;
    const body = JSON.stringify(alert);
    const timestamp = String(Date.now());
    try {
      const response = await request(options.webhook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-timestamp': timestamp,
          'x-signature': signPayload(options.webhook.secret, timestamp, body),
        },
        body,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      await response.body.dump();
      if (response.statusCode < 200 || response.statusCode >= 300)
        logger.error({ statusCode: response.statusCode }, 'alert webhook did not acknowledge the alert');
    } catch (error) {
      logger.error({ errorCode: (error as { code?: string }).code ?? 'UNKNOWN' }, 'alert webhook unreachable');
    }
  };
}

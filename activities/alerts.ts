import { request } from 'undici';
import type { Logger } from '../common/telemetry/logger';
import { signPayload } from '../common/crypto/signature';

/** When and where operator alerts go (ALERT_AFTER_MS, ALERT_WEBHOOK_URL, ALERT_WEBHOOK_SECRET). */
export interface AlertOptions {
  /** An endpoint failing continuously this long raises an alert. */
  alertAfterMs: number;
  webhook?: {
    url: string;
    secret: string;
    /** How long the POST may take before it is abandoned and logged as failed: 10 s by default. */
    timeoutMs?: number;
  };
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

/** Resolves once the alert is logged and its POST started: the POST never holds up the caller. */
export type SendAlert = (alert: OperatorAlert) => Promise<void>;

/**
 * An error log line for every alert, and a signed POST (X-Timestamp, X-Signature as for deliveries) to the
 * operator's alert webhook when one is configured. The POST runs on its own, outside the delivery attempt that raised
 * the alert: a slow or dead alert endpoint never delays or fails an attempt. A failed POST is logged; the log line
 * stands.
 */
export function createAlertSender(logger: Logger, options: AlertOptions): SendAlert {
  return (alert) => {
    logger.error({ ...alert }, `operator alert: ${alert.alert} for project ${alert.projectId}`);
    if (options.webhook) void postAlert(logger, options.webhook, alert);
    return Promise.resolve();
  };
}

async function postAlert(
  logger: Logger,
  webhook: NonNullable<AlertOptions['webhook']>,
  alert: OperatorAlert,
): Promise<void> {
  const body = JSON.stringify(alert);
  const timestamp = String(Date.now());
  const timeoutMs = webhook.timeoutMs ?? 10_000;
  try {
    const response = await request(webhook.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-timestamp': timestamp,
        'x-signature': signPayload(webhook.secret, timestamp, body),
      },
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body.dump();
    if (response.statusCode < 200 || response.statusCode >= 300)
      logger.error(
        { alert: alert.alert, statusCode: response.statusCode },
        'alert webhook did not acknowledge the alert',
      );
  } catch (error) {
    const { code, name } = error as { code?: string; name?: string };
    logger.error({ alert: alert.alert, errorCode: code ?? name ?? 'UNKNOWN' }, 'alert webhook unreachable');
  }
}

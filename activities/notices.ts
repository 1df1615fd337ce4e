import { createTransport, type Transporter } from 'nodemailer';
import type { Logger } from '../common/telemetry/logger';
import { registrationSecretAad, type SecretBox } from '../common/crypto/secrets';
import { signPayload } from '../common/crypto/signature';
import { claimNotice, findNotificationContacts, findRegistration, type Db, type NoticeCondition } from '../db';
import type { WebhookHttpClient } from './http/client';

/** What a project is told: the condition, and counts, types and X-Webhook-Ids only (never a payload or a person). */
export interface ProjectNotice {
  condition: NoticeCondition;
  projectId: string;
  facts?: Record<string, string | number | string[]>;
}

/** Tells the project's contacts, on its own: the caller (a delivery attempt) never waits for it or fails with it. */
export type Notify = (notice: ProjectNotice) => void;

/** What each notice says, in one sentence, for the e-mail and the POST's `summary`. */
const SUMMARIES: Record<NoticeCondition, string> = {
  'breaker-open':
    'Deliveries to your webhook keep failing: its circuit breaker opened. Events wait and are retried; none is lost.',
  recovered: 'Your webhook answers again: its circuit breaker closed, and the events that waited are being delivered.',
  'delivery-gave-up': 'A delivery to your webhook was given up at the end of its retry window.',
  'pause-started':
    'Deliveries to your webhook are paused: events are held, not sent, until the pause ends (pausedBy says who, ' +
    'pausedUntil when it ends by itself).',
  'pause-ended': 'The pause of your webhook ended (endedBy says how): the held events are being delivered.',
  'receiver-gone':
    'Your receiver answered 410 Gone: deliveries to your webhook are held, not sent and not failed, until a member ' +
    'resumes them (pausedAt says since when).',
  'certificate-expiring':
    'The client certificate your webhook presents to your receiver expires soon (or has expired): upload its successor.',
};

export interface NotifierOptions {
  db: Db;
  secretBox: SecretBox;
  logger: Logger;
  /** The worker's delivery client: the SSRF guard and the egress proxy hold for notices too. */
  http: WebhookHttpClient;
  /** SMTP_URL and SMTP_FROM; without them no e-mail is sent. */
  smtp?: { url: string; from: string };
}

/**
 * Tells a project's own contacts of a condition, at most once an hour per condition and project (a certificate's end
 * once a day; across workers): a POST to its notification URL, signed like a delivery (X-Timestamp, X-Signature with
 * the webhook's secret), and an e-mail to its addresses through SMTP_URL. Failures are logged, never retried or raised.
 */
export function createNotifier(options: NotifierOptions) {
  const { db, logger } = options;
  const mailer: Transporter | undefined = options.smtp && createTransport(options.smtp.url);

  async function send(notice: ProjectNotice): Promise<boolean> {
    const contacts = await findNotificationContacts(db, notice.projectId);
    if (contacts.url === null && contacts.emails.length === 0) return false;
    if (!(await claimNotice(db, notice.projectId, notice.condition))) return false;
    const message = {
      notice: notice.condition,
      projectId: notice.projectId,
      at: new Date().toISOString(),
      summary: SUMMARIES[notice.condition],
      ...notice.facts,
    };
    const log = logger.child({ projectId: notice.projectId, notice: notice.condition });
    await Promise.all([
      contacts.url !== null && post(contacts.url, message, log),
      contacts.emails.length > 0 && mail(contacts.emails, message, log),
    ]);
    return true;
  }

  async function post(url: string, message: Record<string, unknown>, log: Logger): Promise<void> {
    try {
      const registration = await findRegistration(db, message.projectId as string);
      if (!registration) return log.warn('no webhook to sign a notice with: notification URL not told');
      const secret = options.secretBox.open(registration.secretSealed, registrationSecretAad(registration.id));
      const body = JSON.stringify(message);
      const timestamp = String(Date.now());
      const response = await options.http.post(
        new URL(url),
        {
          'content-type': 'application/json',
          'user-agent': 'webhook-delivery-service',
          'x-timestamp': timestamp,
          'x-signature': signPayload(secret, timestamp, body),
          'x-webhook-notice': String(message.notice),
        },
        body,
      );
      if (response.statusCode < 200 || response.statusCode >= 300)
        log.warn({ statusCode: response.statusCode }, 'notification URL did not acknowledge the notice');
    } catch (error) {
      const { code, name } = error as { code?: string; name?: string };
      log.warn({ errorCode: code ?? name ?? 'UNKNOWN' }, 'notification URL unreachable');
    }
  }

  async function mail(to: string[], message: Record<string, unknown>, log: Logger): Promise<void> {
    if (!mailer) return log.warn('notice e-mail not sent: SMTP_URL is not set');
    try {
      await mailer.sendMail({
        from: options.smtp!.from,
        to,
        subject: `Webhook notice for project ${String(message.projectId)}: ${String(message.notice)}`,
        text: Object.entries(message)
          .map(([key, value]) => `${key}: ${Array.isArray(value) ? value.join(', ') : String(value)}`)
          .join('\n'),
      });
    } catch (error) {
      const { code, name } = error as { code?: string; name?: string };
      log.warn({ errorCode: code ?? name ?? 'UNKNOWN' }, 'notice e-mail could not be sent');
    }
  }

  const notify: Notify = (notice) =>
    void send(notice).catch((error: unknown) =>
      logger.warn({ err: error, projectId: notice.projectId, notice: notice.condition }, 'notice not sent'),
    );
  return { notify, send, close: () => mailer?.close() };
}

export type Notifier = ReturnType<typeof createNotifier>;

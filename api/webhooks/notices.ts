import * as store from '../../db';
import { auditedUrl, recordAudit } from '../http/audited-actions';
import { recheckPortalLink } from '../auth/authenticate';
import { assertMember, type RegistrationDeps } from './registrations';
import { compileBody } from '../http/validation';
import type { WebhookUrlPolicy } from '../../common/registration/webhook-url';

/** At most this many e-mail addresses per project. */
export const MAX_NOTICE_EMAILS = 10;

export const notificationContactsSchema = {
  type: 'object',
  description:
    'Who the service tells when the project’s breaker opens, a delivery is given up, a pause starts or ends, the ' +
    'client certificate nears expiry, and the endpoint recovers: at most once an hour per condition (every pause), ' +
    'with counts, types and X-Webhook-Ids only. Both empty (null, []) remove the contacts.',
  properties: {
    url: {
      type: ['string', 'null'],
      format: 'uri',
      pattern: '^[Hh][Tt][Tt][Pp][Ss]?://',
      maxLength: 2048,
      description: 'Gets each notice as a JSON POST signed like a delivery (X-Timestamp, X-Signature); null: none.',
    },
    emails: {
      type: 'array',
      maxItems: MAX_NOTICE_EMAILS,
      uniqueItems: true,
      items: { type: 'string', maxLength: 254, pattern: '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$' },
      description: `Addresses e-mailed each notice (through the service's SMTP_URL), at most ${MAX_NOTICE_EMAILS}.`,
    },
  },
  required: ['url', 'emails'],
  additionalProperties: false,
} as const;

const validateContacts = compileBody<store.NotificationContacts>(notificationContactsSchema);

/** The project's notification contacts (members and manage links). */
export async function getNotificationContacts(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
): Promise<store.NotificationContacts> {
  await assertMember(deps.db, projectId, userId);
  return store.findNotificationContacts(deps.db, projectId);
}

/** Replaces the project's notification contacts; audited by the URL's origin and the number of addresses. */
export async function setNotificationContacts(
  deps: RegistrationDeps & { webhookUrlPolicy?: WebhookUrlPolicy },
  userId: string,
  projectId: string,
  body: unknown,
  actor: store.AuditActor,
): Promise<store.NotificationContacts> {
  await assertMember(deps.db, projectId, userId);
  const contacts = validateContacts(body, deps.webhookUrlPolicy);
  await recheckPortalLink();
  return deps.db.transaction(async (trx) => {
    const set = await store.setNotificationContacts(trx, projectId, contacts);
    await recordAudit(trx, actor, {
      action: 'notifications.update',
      projectId,
      // No address in the trail: the URL's origin and fingerprint (never its path or query), how many e-mail addresses.
      changes: { url: set.url && auditedUrl(set.url), emails: set.emails.length },
    });
    return set;
  });
}

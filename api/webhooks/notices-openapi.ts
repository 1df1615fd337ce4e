import type { Paths } from '../openapi/parts';
import { notificationContactsSchema } from './notices';
import { json, problem, projectIdParameter, ref } from '../openapi/parts';

// The project's notification contacts' part of the OpenAPI document; ../openapi/document spreads these.

const answers = {
  '401': ref('responses', 'Unauthorized'),
  '403': ref('responses', 'Forbidden'),
  '404': problem('No project with id {id} was found.'),
  '503': ref('responses', 'Unavailable'),
} as const;

export const noticePaths: Paths = {
  '/webhooks/project/{projectId}/notifications': {
    get: {
      operationId: 'getNotificationContacts',
      summary: 'The project’s own notification contacts',
      tags: ['webhooks'],
      parameters: [projectIdParameter],
      responses: {
        '200': {
          description: 'The contacts ({url: null, emails: []} when none).',
          content: json(ref('schemas', 'NotificationContacts')),
        },
        '400': ref('responses', 'InvalidParameter'),
        ...answers,
      },
    },
    put: {
      operationId: 'setNotificationContacts',
      summary: 'Set who the service tells when the project’s endpoint fails or recovers',
      description:
        'Notices: breaker-open, recovered, delivery-gave-up, pause-started, pause-ended, receiver-gone (the ' +
        'receiver answered 410 Gone: deliveries held until a member resumes; every one), certificate-expiring; each ' +
        'at most once an hour per project (certificate-expiring once a day; every pause’s start and end, naming who ' +
        'paused or ended it and until when), never with a payload or a person’s data. The URL gets a JSON POST signed with the ' +
        'webhook’s secret like a delivery (X-Timestamp, X-Signature; X-Webhook-Notice names the condition); the ' +
        'addresses an e-mail through the service’s SMTP_URL.',
      tags: ['webhooks'],
      parameters: [projectIdParameter],
      requestBody: { required: true, content: json(ref('schemas', 'NotificationContacts')) },
      responses: {
        '200': { description: 'Set.', content: json(ref('schemas', 'NotificationContacts')) },
        '400': ref('responses', 'InvalidBody'),
        ...answers,
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
      },
    },
  },
};

export const noticeSchemas = { NotificationContacts: notificationContactsSchema };

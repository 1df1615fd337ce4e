import type { Paths } from '../openapi/parts';
import { pauseBodySchema } from './pause';
import { json, problem, projectIdParameter, ref } from '../openapi/parts';

// The pause's part of the OpenAPI document; ../openapi/document spreads these into its paths and schemas.

const answers = {
  '400': ref('responses', 'InvalidBody'),
  '401': ref('responses', 'Unauthorized'),
  '403': ref('responses', 'Forbidden'),
  '404': problem('No such project, or it has no webhook.'),
  '503': ref('responses', 'Unavailable'),
} as const;

export const pausePaths: Paths = {
  '/webhooks/project/{projectId}/pause': {
    post: {
      operationId: 'pauseWebhook',
      summary: 'Pause the project’s webhook: hold its deliveries, send nothing',
      description:
        'While paused nothing is sent: new and pending deliveries wait, held (the delivery log shows them `held`), ' +
        'with no attempts and no failures, and their give-up window stands still. The pause ends on resume or by ' +
        'itself after `hours` (PAUSE_MAX_HOURS, 72 by default); then the held deliveries go out, falls first and ' +
        'oldest first, at the breaker’s resume rate. A TEST is refused (409) while paused. Pausing a paused webhook ' +
        'changes nothing. The body is optional. The project’s notification contacts are told when a pause starts ' +
        '(pause-started: who paused it, until when) and ends (pause-ended: how). A pause a portal link started ends ' +
        'when the project’s links are revoked. While a receiver’s 410 Gone holds the deliveries (pauseReason gone, no ' +
        'end of its own) pausing changes nothing either.',
      tags: ['webhooks'],
      parameters: [projectIdParameter],
      requestBody: { required: false, content: json(ref('schemas', 'PauseBody')) },
      responses: {
        '200': { description: 'Paused (pausedAt, pausedUntil set).', content: json(ref('schemas', 'Registration')) },
        ...answers,
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
      },
    },
  },
  '/webhooks/project/{projectId}/resume': {
    post: {
      operationId: 'resumeWebhook',
      summary: 'Resume the project’s paused webhook: send the held deliveries',
      description:
        'The held deliveries go out, FALL_DETECTION before VITAL_THRESHOLD and oldest first, at ' +
        'BREAKER_RESUME_RATE_PER_SECOND, each once. This also ends the hold a receiver’s 410 Gone began ' +
        '(pauseReason gone), the delivery that got the 410 included: resume once the receiver is back. Resuming a ' +
        'webhook that is not paused changes nothing. The notification contacts are told (pause-ended, naming who ' +
        'resumed it).',
      tags: ['webhooks'],
      parameters: [projectIdParameter],
      responses: {
        '200': {
          description: 'Not paused (pausedAt, pausedUntil, pauseReason null).',
          content: json(ref('schemas', 'Registration')),
        },
        ...answers,
        '400': ref('responses', 'InvalidParameter'),
      },
    },
  },
};

export const pauseSchemas = { PauseBody: pauseBodySchema };

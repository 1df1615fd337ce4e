import type { Paths } from '../openapi/parts';
import { portalSessionBodySchema } from './links';
import { problem, projectIdParameter, ref } from '../openapi/parts';

// The portal links' part of the OpenAPI document; ../openapi/document spreads these into its paths and schemas.

const portalSessionSchema = {
  type: 'object',
  description: 'A link to the project’s portal page. Anyone holding it can use it until it expires or is revoked.',
  properties: {
    url: {
      type: 'string',
      format: 'uri',
      description:
        'PUBLIC_BASE_URL/portal#token=…: the token is in the fragment, which browsers never send to a server.',
    },
    token: {
      type: 'string',
      description:
        'A bearer token for this project’s registration, delivery, health, test and rotate routes, within its ' +
        'capabilities; its reads of the log and health count against the project’s READ_CALLS_PER_SECOND.',
    },
    expiresAt: { type: 'string', format: 'date-time' },
  },
  required: ['url', 'token', 'expiresAt'],
  additionalProperties: false,
} as const;

const badPath = problem('The projectId in the path is outside the safe alphabet or length.');
const members = {
  '401': ref('responses', 'Unauthorized'),
  '403': problem('The caller is not a member of the project; a portal link’s own token is refused too.'),
  '404': problem('No project with id {id} was found.'),
} as const;

export const portalPaths: Paths = {
  '/webhooks/project/{projectId}/portal-sessions': {
    post: {
      operationId: 'createPortalSession',
      summary: 'Make a link to the project’s portal page',
      description:
        'For members. The link’s token is signed, names the project, its capabilities and its expiry, and acts for ' +
        'the member who made it: it stops working when they leave the project.',
      tags: ['portal'],
      parameters: [projectIdParameter],
      requestBody: {
        required: false,
        content: { 'application/json': { schema: ref('schemas', 'PortalSessionBody') } },
      },
      responses: {
        '201': {
          description: 'The link.',
          content: { 'application/json': { schema: ref('schemas', 'PortalSession') } },
        },
        '400': ref('responses', 'InvalidBody'),
        ...members,
        '409': problem(
          'The project already holds PORTAL_LINKS_PER_PROJECT (default 50) live links (unexpired, not revoked); the ' +
            'detail names the limit. Nothing was made: wait for links to expire, or revoke them all.',
        ),
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
        '503': ref('responses', 'Unavailable'),
      },
    },
    delete: {
      operationId: 'revokePortalSessions',
      summary: 'Revoke every portal link of the project',
      description: 'Every link made so far, by any member, answers 401 from now on; links made afterwards work.',
      tags: ['portal'],
      parameters: [projectIdParameter],
      responses: {
        '204': { description: 'Revoked.' },
        '400': badPath,
        ...members,
        '503': ref('responses', 'Unavailable'),
      },
    },
  },
};

export const portalTag = {
  name: 'portal',
  description: 'Links to a project’s portal page (/portal), where a customer sees and fixes their own deliveries.',
};

export const portalSchemas = { PortalSessionBody: portalSessionBodySchema, PortalSession: portalSessionSchema };

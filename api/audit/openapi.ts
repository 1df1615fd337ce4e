import type { Paths } from '../openapi/parts';
import { DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE } from './audit-log';
import { json, problem, projectIdParameter, ref } from '../openapi/parts';

// The audit trail's part of the OpenAPI document; ../openapi/document spreads these into its paths and schemas.

const query = (name: string, description: string, schema: object) =>
  ({ name, in: 'query', required: false, description, schema }) as const;

/** What the filters accept: 1 to 300 visible ASCII characters (anything else is a 400 naming the filter). */
const visibleAscii = { type: 'string', minLength: 1, maxLength: 300, pattern: '^[\\x21-\\x7e]+$' } as const;

const filters = [
  query('actor', 'Only events of this actor subject (a token’s sub; a portal link’s member).', visibleAscii),
  query('action', 'Only events of this action, e.g. webhook.update.', visibleAscii),
  query('since', 'Only events at or after this time.', { type: 'string', format: 'date-time' }),
  query('until', 'Only events before this time.', { type: 'string', format: 'date-time' }),
  query('limit', 'Page size.', { type: 'integer', minimum: 1, maximum: MAX_AUDIT_PAGE, default: DEFAULT_AUDIT_PAGE }),
  query('cursor', 'The nextCursor of the previous page; any other value is a 400.', {
    type: 'string',
    minLength: 1,
    maxLength: 64,
    pattern: '^[A-Za-z0-9_-]+$',
  }),
];

const actorSchema = {
  type: 'object',
  properties: {
    kind: { enum: ['member', 'portal-link', 'cli', 'system'] },
    subject: { type: 'string' },
    issuer: { type: 'string' },
    portalLinkId: { type: 'string', description: 'The first 32 hex digits of the SHA-256 of the link’s token.' },
    portalCapabilities: { type: 'array', items: { enum: ['read', 'manage'] } },
    requestId: { type: 'string' },
    callerAddress: { type: 'string' },
  },
  required: ['kind'],
  additionalProperties: false,
} as const;

const auditEventSchema = {
  type: 'object',
  description: 'One recorded action. Never a secret, a token, a payload or a field of an event.',
  properties: {
    id: { type: 'string', pattern: '^[1-9][0-9]*$' },
    at: { type: 'string', description: 'Database time, UTC, to the microsecond.' },
    actor: ref('schemas', 'AuditActor'),
    action: {
      type: 'string',
      description:
        'What was done, e.g. `webhook.update`, `portal-link.create`, `access.refused`, `codec.decode`, or the ' +
        "service's own `breaker.open`, `breaker.half-open`, `breaker.close`, `webhook.gone` (the receiver answered " +
        '410: deliveries held until a resume) (docs/operators.md#audit-trail lists them).',
    },
    outcome: { enum: ['ok', 'refused', 'failed'] },
    projectId: { type: 'string' },
    registrationId: { type: 'string' },
    deliveryId: { type: 'string' },
    changes: {
      type: 'object',
      description:
        'What changed (before and after), or what was asked. A receiver URL is kept as {origin, fingerprint}: its ' +
        'origin and `sha256:` with the hex SHA-256 of the whole URL, never its path or query.',
    },
    prevHash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
  },
  required: ['id', 'at', 'actor', 'action', 'outcome', 'prevHash', 'hash'],
  additionalProperties: false,
} as const;

const auditPageSchema = {
  type: 'object',
  properties: {
    items: { type: 'array', items: ref('schemas', 'AuditEvent') },
    nextCursor: { type: 'string', description: 'Absent on the last page.' },
  },
  required: ['items'],
  additionalProperties: false,
} as const;

const page = { description: 'Events, newest first.', content: json(ref('schemas', 'AuditPage')) };
const badQuery = problem('A filter, the limit or the cursor is invalid (each problem named in detail).');

export const auditPaths: Paths = {
  '/audit': {
    get: {
      operationId: 'listAuditEvents',
      summary: 'The whole audit trail, for operators',
      description: 'For subjects in OPERATOR_SUBJECTS or tokens with OPERATOR_ROLE, as the codec endpoint.',
      tags: ['audit'],
      parameters: [query('projectId', 'Only this project’s events.', { type: 'string', maxLength: 300 }), ...filters],
      responses: {
        '200': page,
        '400': badQuery,
        '401': ref('responses', 'Unauthorized'),
        '403': problem('The caller is not an operator.'),
      },
    },
  },
  '/webhooks/project/{projectId}/audit': {
    get: {
      operationId: 'listProjectAuditEvents',
      summary: 'The project’s audit trail, for its members',
      description:
        'Only this project’s events, among them each operator decode that opened its events (`codec.decode`: who, ' +
        'when, `workflowIds`); never a refusal of a caller who is no member. A portal link that may manage reads it too.',
      tags: ['audit'],
      parameters: [projectIdParameter, ...filters],
      responses: {
        '200': page,
        '400': badQuery,
        '401': ref('responses', 'Unauthorized'),
        '403': problem('The caller is not a member of the project, or a read-only portal link.'),
        '404': problem('No project with id {id} was found.'),
      },
    },
  },
};

export const auditTag = {
  name: 'audit',
  description: 'Who did what to which project: one hash-chained row per action (see the operators’ Audit trail).',
};

export const auditSchemas = { AuditEvent: auditEventSchema, AuditActor: actorSchema, AuditPage: auditPageSchema };

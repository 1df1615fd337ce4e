import type { Paths } from '../openapi/parts';
import { bodyOf, json, pathParameter, problem, ref } from '../openapi/parts';
import { PURGE_STATUSES, PURGE_STEPS } from '../../common/purge';
import { purgeRequestSchema } from './schemas';

// The purges' part of the OpenAPI document; ../openapi/document spreads these into its paths and schemas. The request
// body is the very object the route's ajv compiles.

const FOR_OPERATORS =
  'For operators only: a token whose sub is listed in OPERATOR_SUBJECTS, or whose roles (or role) claim holds ' +
  'OPERATOR_ROLE; project members and portal links are not operators.';

const count = (description: string) => ({ type: 'integer', minimum: 0, description }) as const;
const dateTime = { type: 'string', format: 'date-time' } as const;
const hashSchema = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;

const countsSchema = {
  type: 'object',
  properties: {
    executionsDeleted: count(
      'Workflow executions of the project deleted from Temporal by its batch deletion jobs (running ones terminated).',
    ),
    registrationsDeleted: count(
      'Webhook registrations deleted, with their URL, signing secrets, custom headers and client certificate.',
    ),
    portalLinksDeleted: count('Portal links deleted.'),
    contactsDeleted: count('Notification contacts deleted (a URL and e-mail addresses).'),
    noticesDeleted: count('Notices told or queued for the project, deleted.'),
    membersDeleted: count('Project members deleted.'),
    deliveryRowsDeleted: count('Delivery log rows deleted.'),
    attemptsDeleted: count('Their attempts, deleted with them.'),
    dataKeysDestroyed: count('Data keys of the project destroyed (its Temporal payloads were sealed under them).'),
  },
  required: [
    'executionsDeleted',
    'registrationsDeleted',
    'portalLinksDeleted',
    'contactsDeleted',
    'noticesDeleted',
    'membersDeleted',
    'deliveryRowsDeleted',
    'attemptsDeleted',
    'dataKeysDestroyed',
  ],
  additionalProperties: false,
} as const;

const purgeSchema = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    projectId: { type: 'string' },
    status: {
      enum: [...PURGE_STATUSES],
      description:
        '`pending` while it runs; `completed`; `failed` when it stopped on an error (named in `failure`): POST ' +
        '/purges for the project again runs it again from where it stopped.',
    },
    step: {
      enum: [...PURGE_STEPS],
      description:
        'The step reached: `executions` (Temporal), `rows` (PostgreSQL), `data-keys`, `done` once completed.',
    },
    requestedAt: dateTime,
    completedAt: { ...dateTime, description: 'When it completed or failed; absent before.' },
    counts: ref('schemas', 'PurgeCounts'),
    failure: { type: 'string', description: 'Why a failed purge stopped.' },
  },
  required: ['id', 'projectId', 'status', 'step', 'requestedAt', 'counts'],
  additionalProperties: false,
} as const;

const certificateSchema = {
  type: 'object',
  description: 'A certificate of destruction, to export and hand to the customer: what was destroyed, where, when.',
  properties: {
    certificate: { const: 'purge-of-project-data' },
    purgeId: { type: 'string', format: 'uuid' },
    projectId: { type: 'string' },
    requestedBy: {
      type: 'object',
      description: 'Who asked: the token’s subject and issuer, or the operator at the CLI (`cli`).',
      properties: { kind: { type: 'string' }, subject: { type: 'string' }, issuer: { type: 'string' } },
      required: ['kind'],
      additionalProperties: false,
    },
    requestedAt: dateTime,
    completedAt: dateTime,
    counts: ref('schemas', 'PurgeCounts'),
    dataKeysDestroyed: {
      type: 'array',
      items: { type: 'string' },
      description: 'The ids of the project’s data keys destroyed (their tombstones remain).',
    },
    temporalBatchJobs: {
      type: 'array',
      description: 'Temporal’s batch deletion jobs of the purge, with the executions each deleted or failed to.',
      items: {
        type: 'object',
        properties: {
          jobId: { type: 'string' },
          deleted: { type: 'integer', minimum: 0 },
          failed: { type: 'integer', minimum: 0 },
        },
        required: ['jobId', 'deleted', 'failed'],
        additionalProperties: false,
      },
    },
    erased: { type: 'array', items: { type: 'string' }, description: 'What was destroyed, and where.' },
    notErased: { type: 'array', items: { type: 'string' }, description: 'What this purge does not reach.' },
    auditEvents: {
      type: 'array',
      description: 'The audit rows of the request, of any run again, and of the outcome (GET /audit, `audit verify`).',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          at: { type: 'string' },
          action: { type: 'string' },
          outcome: { type: 'string' },
          hash: hashSchema,
        },
        required: ['id', 'at', 'action', 'outcome', 'hash'],
        additionalProperties: false,
      },
    },
  },
  required: [
    'certificate',
    'purgeId',
    'projectId',
    'requestedBy',
    'requestedAt',
    'completedAt',
    'counts',
    'dataKeysDestroyed',
    'temporalBatchJobs',
    'erased',
    'notErased',
    'auditEvents',
  ],
  additionalProperties: false,
} as const;

const idParameter = pathParameter('purgeId', 'The purge’s id, as POST /purges answered it.', {
  type: 'string',
  format: 'uuid',
});
const notOperator = problem('The caller is not an operator (not in OPERATOR_SUBJECTS, no OPERATOR_ROLE).');
const unknown = problem('No purge with id {purgeId} was found (any id that is not one POST /purges answered).');
const location = { Location: { description: '/purges/{purgeId}', schema: { type: 'string' } } };

export const purgePaths: Paths = {
  '/purges': {
    post: {
      operationId: 'requestPurge',
      summary: 'Purge a whole project: a customer whose contract ended',
      description:
        `${FOR_OPERATORS} Records the purge (and its audit row) and starts its job, which runs on the workers: every ` +
        'workflow execution of the project is deleted from Temporal by batch deletion (running deliveries terminated ' +
        'first), then its rows (registration with its secrets, custom headers and client certificate, contacts, ' +
        'notices, portal links, members, delivery log, the project itself), then its data keys are destroyed. While ' +
        'it is not completed, registering or changing the project’s webhook answers 409. The project’s unfinished ' +
        'purge is never doubled: asked again, a pending one is answered as it stands (200), a failed one is run again ' +
        'from where it stopped (202). Poll GET /purges/{purgeId}.',
      tags: ['purges'],
      requestBody: bodyOf('PurgeRequest'),
      responses: {
        '200': {
          description: 'The project’s purge under way already (started again if its workflow had been stopped).',
          headers: location,
          content: json(ref('schemas', 'Purge')),
        },
        '202': {
          description: 'Recorded and started, or a failed purge run again; its status is at the Location given.',
          headers: location,
          content: json(ref('schemas', 'Purge')),
        },
        '400': ref('responses', 'InvalidBody'),
        '401': ref('responses', 'Unauthorized'),
        '403': notOperator,
        '404': problem('No project with that id was found (and none is being purged): nothing was recorded.'),
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
        '503': ref('responses', 'Unavailable'),
      },
    },
  },
  '/purges/{purgeId}': {
    get: {
      operationId: 'getPurge',
      summary: 'Where a purge stands, with its counts',
      description: FOR_OPERATORS,
      tags: ['purges'],
      parameters: [idParameter],
      responses: {
        '200': { description: 'The purge.', content: json(ref('schemas', 'Purge')) },
        '401': ref('responses', 'Unauthorized'),
        '403': notOperator,
        '404': unknown,
      },
    },
  },
  '/purges/{purgeId}/certificate': {
    get: {
      operationId: 'getPurgeCertificate',
      summary: 'The certificate of destruction of a completed purge',
      description: FOR_OPERATORS,
      tags: ['purges'],
      parameters: [idParameter],
      responses: {
        '200': { description: 'The certificate.', content: json(ref('schemas', 'PurgeCertificate')) },
        '401': ref('responses', 'Unauthorized'),
        '403': notOperator,
        '404': unknown,
        '409': problem('The purge has not completed yet (or failed): no certificate.'),
      },
    },
  },
};

export const purgesTag = {
  name: 'purges',
  description: 'The purge of a whole project, for operators (docs/operators.md, "Purging a customer").',
};

export const purgeSchemas = {
  PurgeRequest: purgeRequestSchema,
  Purge: purgeSchema,
  PurgeCounts: countsSchema,
  PurgeCertificate: certificateSchema,
};

import type { Paths } from '../openapi/parts';
import { bodyOf, json, pathParameter, problem, ref } from '../openapi/parts';
import { ERASURE_STATUSES } from '../../common/erasure';
import { erasureRequestSchema } from './schemas';

// The erasures' part of the OpenAPI document; ../openapi/document spreads these into its paths and schemas. The
// request body is the very object the route's ajv compiles.

const FOR_OPERATORS =
  'For operators only: a token whose sub is listed in OPERATOR_SUBJECTS, or whose roles (or role) claim holds ' +
  'OPERATOR_ROLE; project members and portal links are not operators.';

const hashSchema = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;
const count = (description: string) => ({ type: 'integer', minimum: 0, description }) as const;
const dateTime = { type: 'string', format: 'date-time' } as const;

const countsSchema = {
  type: 'object',
  properties: {
    deliveriesFound: count('The person’s delivery runs found: in Temporal, and those the delivery log names.'),
    historiesDeleted: count('Closed workflow executions deleted from Temporal (DeleteWorkflowExecution).'),
    logRowsDeleted: count('Delivery log rows deleted, each with its attempts.'),
    stillOpen: count('Deliveries still being retried at the last look: the erasure waits for them to end.'),
  },
  required: ['deliveriesFound', 'historiesDeleted', 'logRowsDeleted', 'stillOpen'],
  additionalProperties: false,
} as const;

const erasureSchema = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    status: {
      enum: [...ERASURE_STATUSES],
      description:
        '`pending` while it looks and deletes; `waiting-for-open-deliveries` while some of the person’s deliveries ' +
        'are still being retried (never cancelled: each is delivered or given up, then erased); `completed`; ' +
        '`failed` when it stopped on an error (named in `failure`).',
    },
    personHash: { ...hashSchema, description: 'The person: HMAC-SHA256 of the userUUID under PERSON_HASH_KEY.' },
    requestedAt: dateTime,
    completedAt: { ...dateTime, description: 'When it completed or failed; absent before.' },
    counts: ref('schemas', 'ErasureCounts'),
    failure: { type: 'string', description: 'Why a failed erasure stopped.' },
  },
  required: ['id', 'status', 'personHash', 'requestedAt', 'counts'],
  additionalProperties: false,
} as const;

const acceptedSchema = {
  type: 'object',
  properties: { id: { type: 'string', format: 'uuid' }, status: { const: 'pending' } },
  required: ['id', 'status'],
  additionalProperties: false,
} as const;

const certificateSchema = {
  type: 'object',
  description: 'A certificate of destruction, to export and keep: what was erased, where, when, for whom.',
  properties: {
    certificate: { const: 'erasure-of-personal-data' },
    erasureId: { type: 'string', format: 'uuid' },
    person: {
      type: 'object',
      properties: { hash: hashSchema, hashedWith: { type: 'string' } },
      required: ['hash', 'hashedWith'],
      additionalProperties: false,
    },
    requestedBy: {
      type: 'object',
      description: 'Who asked: the token’s subject and issuer, or the operator at the CLI (`cli`).',
      properties: { kind: { type: 'string' }, subject: { type: 'string' }, issuer: { type: 'string' } },
      required: ['kind'],
      additionalProperties: false,
    },
    requestedAt: dateTime,
    completedAt: dateTime,
    counts: ref('schemas', 'ErasureCounts'),
    deletedWorkflows: {
      type: 'array',
      description: 'Every workflow execution deleted from Temporal.',
      items: {
        type: 'object',
        properties: { workflowId: { type: 'string' }, runId: { type: 'string' } },
        required: ['workflowId', 'runId'],
        additionalProperties: false,
      },
    },
    erased: { type: 'array', items: { type: 'string' }, description: 'What was erased, and where.' },
    notErased: { type: 'array', items: { type: 'string' }, description: 'What this erasure does not reach.' },
    auditEvents: {
      type: 'array',
      description: 'The audit rows of the request and of the outcome (GET /audit, `webhooks audit verify`).',
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
    'erasureId',
    'person',
    'requestedBy',
    'requestedAt',
    'completedAt',
    'counts',
    'deletedWorkflows',
    'erased',
    'notErased',
    'auditEvents',
  ],
  additionalProperties: false,
} as const;

const idParameter = pathParameter('id', 'The erasure’s id, as POST /erasures answered it.', {
  type: 'string',
  format: 'uuid',
});
const notOperator = problem('The caller is not an operator (not in OPERATOR_SUBJECTS, no OPERATOR_ROLE).');
const unknown = problem('No erasure with id {id} was found (any id that is not one POST /erasures answered).');

export const erasurePaths: Paths = {
  '/erasures': {
    post: {
      operationId: 'requestErasure',
      summary: 'Erase one person’s deliveries (GDPR art. 17, HIPAA)',
      description:
        `${FOR_OPERATORS} Records the request (and its audit row, the person as their keyed hash) and starts the ` +
        'job, which runs on the workers: every closed workflow execution of the person’s deliveries is deleted from ' +
        'Temporal, and their delivery log rows with their attempts; a delivery still being retried is not cancelled ' +
        'but waited for, then erased. Poll GET /erasures/{id}; other people’s deliveries are untouched. A person with ' +
        'no deliveries completes at once with zero counts.',
      tags: ['erasures'],
      requestBody: bodyOf('ErasureRequest'),
      responses: {
        '202': {
          description: 'Recorded and started; its status is at the Location given.',
          headers: { Location: { description: '/erasures/{id}', schema: { type: 'string' } } },
          content: json(ref('schemas', 'ErasureAccepted')),
        },
        '400': ref('responses', 'InvalidBody'),
        '401': ref('responses', 'Unauthorized'),
        '403': notOperator,
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
        '503': ref('responses', 'Unavailable'),
      },
    },
  },
  '/erasures/{id}': {
    get: {
      operationId: 'getErasure',
      summary: 'Where an erasure stands, with its counts',
      description: FOR_OPERATORS,
      tags: ['erasures'],
      parameters: [idParameter],
      responses: {
        '200': { description: 'The erasure.', content: json(ref('schemas', 'Erasure')) },
        '401': ref('responses', 'Unauthorized'),
        '403': notOperator,
        '404': unknown,
      },
    },
  },
  '/erasures/{id}/certificate': {
    get: {
      operationId: 'getErasureCertificate',
      summary: 'The certificate of destruction of a completed erasure',
      description: FOR_OPERATORS,
      tags: ['erasures'],
      parameters: [idParameter],
      responses: {
        '200': { description: 'The certificate.', content: json(ref('schemas', 'ErasureCertificate')) },
        '401': ref('responses', 'Unauthorized'),
        '403': notOperator,
        '404': unknown,
        '409': problem('The erasure has not completed yet (or failed): no certificate.'),
      },
    },
  },
};

export const erasuresTag = {
  name: 'erasures',
  description: 'Erasure of one person’s deliveries, for operators (docs/operators.md, "Erasure").',
};

export const erasureSchemas = {
  ErasureRequest: erasureRequestSchema,
  ErasureAccepted: acceptedSchema,
  Erasure: erasureSchema,
  ErasureCounts: countsSchema,
  ErasureCertificate: certificateSchema,
};

import { json, problemResponse, publicOperation, ref, type Paths } from '../openapi/parts';

// The probes' part of the OpenAPI document (/healthz, /readyz); ../openapi/document spreads it.

const dependencyStateSchema = { type: 'string', enum: ['up', 'down'] } as const;
const readinessChecksSchema = {
  type: 'object',
  properties: { postgres: dependencyStateSchema, temporal: dependencyStateSchema },
  required: ['postgres', 'temporal'],
  additionalProperties: false,
} as const;

const searchAttributesReportSchema = {
  type: 'object',
  description:
    'Whether the namespace has the ProjectId and WebhookType search attributes (Keyword). Missing ones cost no ' +
    'delivery: deliveries start and run without them, but the Temporal UI cannot list or filter them by project or ' +
    'type. unknown: the namespace would not list them (a hosted one may refuse the operator API), or Temporal did ' +
    'not answer in time.',
  properties: {
    state: { type: 'string', enum: ['registered', 'missing', 'unknown'] },
    missing: {
      type: 'array',
      items: { type: 'string', enum: ['ProjectId', 'WebhookType'] },
      minItems: 1,
      description: 'With state missing: the attributes to register.',
    },
    detail: { type: 'string', description: 'With state missing: what it costs and the commands that register them.' },
  },
  required: ['state'],
  additionalProperties: false,
} as const;

const notReadyProblemSchema = {
  allOf: [
    ref('schemas', 'Problem'),
    { type: 'object', properties: { checks: ref('schemas', 'ReadinessChecks') }, required: ['checks'] },
  ],
} as const;

export const healthPaths: Paths = {
  '/healthz': {
    get: {
      operationId: 'healthz',
      summary: 'Liveness: the process answers',
      ...publicOperation,
      responses: {
        '200': {
          description: 'Alive.',
          content: json({
            type: 'object',
            properties: { status: { const: 'ok' } },
            required: ['status'],
            additionalProperties: false,
          }),
        },
      },
    },
  },
  '/readyz': {
    get: {
      operationId: 'readyz',
      summary: 'Readiness: Postgres and Temporal answer; whether the search attributes are registered',
      ...publicOperation,
      responses: {
        '200': {
          description: 'Ready to serve.',
          content: json({
            type: 'object',
            properties: {
              status: { const: 'ready' },
              checks: ref('schemas', 'ReadinessChecks'),
              searchAttributes: ref('schemas', 'SearchAttributesReport'),
            },
            required: ['status', 'checks'],
            additionalProperties: false,
          }),
        },
        '503': problemResponse(
          'Postgres or Temporal (named in detail and checks) is down.',
          ref('schemas', 'NotReadyProblem'),
        ),
      },
    },
  },
};

export const healthSchemas = {
  ReadinessChecks: readinessChecksSchema,
  SearchAttributesReport: searchAttributesReportSchema,
  NotReadyProblem: notReadyProblemSchema,
};

import { MAX_BODY } from '../http/errors';
import { webhookPaths, webhookSchemas, webhooksTag } from '../webhooks/openapi';
import { pausePaths, pauseSchemas } from '../webhooks/pause-openapi';
import { noticePaths, noticeSchemas } from '../webhooks/notices-openapi';
import { deliveryPaths, deliverySchemas } from '../deliveries/openapi';
import { portalPaths, portalSchemas, portalTag } from '../portal/openapi';
import { auditPaths, auditSchemas, auditTag } from '../audit/openapi';
import { erasurePaths, erasureSchemas, erasuresTag } from '../erasures/openapi';
import { purgePaths, purgeSchemas, purgesTag } from '../purges/openapi';
import { codecDocument } from '../codec/openapi';
import { healthPaths, healthSchemas } from '../health/openapi';
import {
  json,
  problemResponse,
  publicOperation,
  ref,
  type OpenApiDocument,
  type OpenApiOperation,
  type OpenApiOptions,
} from './parts';

// The assembly: every resource's part of the OpenAPI document, and the components they share (problems, responses).

export type { HttpMethod, OpenApiDocument, OpenApiOperation, OpenApiOptions } from './parts';

const problemSchema = {
  type: 'object',
  description: 'RFC 9457 problem details.',
  properties: {
    type: { type: 'string', format: 'uri-reference', description: 'Always about:blank: the status says it all.' },
    title: { type: 'string', description: 'The reason phrase of the status.' },
    status: { type: 'integer', minimum: 400, maximum: 599 },
    detail: { type: 'string', description: 'What went wrong, for a human.' },
  },
  required: ['type', 'title', 'status', 'detail'],
} as const;

const validationProblemSchema = {
  allOf: [
    ref('schemas', 'Problem'),
    {
      type: 'object',
      properties: {
        errors: {
          type: 'array',
          description: 'Every problem of the body; absent when the body is not JSON at all.',
          items: {
            type: 'object',
            properties: {
              pointer: { type: 'string', description: 'JSON Pointer into the request body.' },
              detail: { type: 'string' },
            },
            required: ['pointer', 'detail'],
            additionalProperties: false,
          },
        },
      },
    },
  ],
} as const;

const REFUSALS_LIMITED =
  'The caller was refused (403) more than REFUSED_CALLS_PER_MINUTE times in the last minute: nothing runs until ' +
  'Retry-After.';
const WRITES_LIMITED =
  'The caller (a token’s subject, or a portal link) made more than AUDITED_WRITES_PER_MINUTE (default 120) write ' +
  'calls in the last minute on this API instance: nothing ran and nothing was written; call again after Retry-After.';

const responses = {
  InvalidBody: problemResponse(
    'The body is not JSON, or breaks the schema (each problem listed in errors).',
    ref('schemas', 'ValidationProblem'),
  ),
  Unauthorized: {
    ...problemResponse('No bearer token, or one that is invalid or expired, or lacks sub or exp.'),
    headers: { 'WWW-Authenticate': { description: 'Always Bearer.', schema: { type: 'string', const: 'Bearer' } } },
  },
  Forbidden: problemResponse(
    'The caller is not a member of the project; or a portal link’s token is for another project, is read-only, ' +
      'or does not reach this route.',
  ),
  TooManyRefusals: {
    ...problemResponse(REFUSALS_LIMITED),
    headers: {
      'Retry-After': { description: 'Seconds to wait before calling again.', schema: { type: 'integer', minimum: 1 } },
    },
  },
  TooManyCalls: {
    ...problemResponse(`${REFUSALS_LIMITED} Or: ${WRITES_LIMITED}`),
    headers: {
      'Retry-After': { description: 'Seconds to wait before calling again.', schema: { type: 'integer', minimum: 1 } },
    },
  },
  TooLarge: problemResponse(`The body is larger than ${MAX_BODY}.`),
  UnsupportedMediaType: problemResponse('The body is not application/json.'),
  InvalidParameter: problemResponse(
    'The projectId in the path is outside the safe alphabet or length.',
    ref('schemas', 'ValidationProblem'),
  ),
  Unavailable: {
    ...problemResponse(
      'The database or Temporal does not answer, Temporal refused the call (its gRPC status named in detail), or ' +
        'the audit trail could not record the action (nothing was changed); try again after Retry-After seconds.',
    ),
    headers: { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'string' } } },
  },
} as const;

/** The OpenAPI 3.1 document of the whole API, served at GET /openapi.json: only the routes the app mounts. */
export function buildOpenApiDocument(options: OpenApiOptions): OpenApiDocument {
  return withRefusalLimit(buildDocument(options));
}

/**
 * Every operation that refuses callers (it documents 403) may also answer the refused-calls 429: added where it
 * has none, and named in the description of the 429 it has.
 */
function withRefusalLimit(document: OpenApiDocument): OpenApiDocument {
  const limited = (operation: OpenApiOperation, writes: boolean): OpenApiOperation => {
    const answers = operation.responses;
    if (!answers['403']) return operation;
    const own = answers['429'] as { description?: string } | undefined;
    const limits = writes ? `${REFUSALS_LIMITED} Or: ${WRITES_LIMITED}` : REFUSALS_LIMITED;
    const refusals = own?.description
      ? { ...own, description: `${own.description} Or: ${limits}` }
      : writes
        ? ref('responses', 'TooManyCalls')
        : ref('responses', 'TooManyRefusals');
    return { ...operation, responses: { ...answers, '429': refusals } };
  };
  // Every write call but the codec's (operators only) counts against the caller's AUDITED_WRITES_PER_MINUTE.
  const isWrite = (path: string, method: string) => method !== 'get' && !path.startsWith('/codec/');
  const paths = Object.fromEntries(
    Object.entries(document.paths).map(([path, operations]) => [
      path,
      Object.fromEntries(
        Object.entries(operations).map(([method, operation]) => [method, limited(operation, isWrite(path, method))]),
      ),
    ]),
  );
  return { ...document, paths };
}

function buildDocument(options: OpenApiOptions): OpenApiDocument {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Webhook delivery service',
      version: '0.1.0',
      description:
        'Registers one callback URL per project and delivers health-monitoring events to it, signed with ' +
        'HMAC-SHA256 (X-Timestamp, X-Signature, and Standard Webhooks webhook-id, webhook-timestamp, ' +
        'webhook-signature). Errors are RFC 9457 application/problem+json.',
    },
    tags: [
      webhooksTag,
      { name: 'operations', description: 'Public probes and documentation; no token.' },
      { name: 'deliveries', description: 'A project’s delivery log, redelivery, recovery and endpoint health.' },
      portalTag,
      auditTag,
      erasuresTag,
      purgesTag,
      ...(options.codec ? [codecDocument.tag] : []),
    ],
    security: [{ bearerAuth: [] }],
    paths: {
      ...webhookPaths,
      ...deliveryPaths,
      ...portalPaths,
      ...pausePaths,
      ...noticePaths,
      ...auditPaths,
      ...erasurePaths,
      ...purgePaths,
      ...(options.codec && codecDocument.paths),
      ...healthPaths,
      '/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This OpenAPI document (rendered at /docs)',
          ...publicOperation,
          responses: {
            '200': { description: 'OpenAPI 3.1 document.', content: json({ type: 'object' }) },
          },
        },
      },
    },
    components: {
      schemas: {
        Problem: problemSchema,
        ValidationProblem: validationProblemSchema,
        ...webhookSchemas,
        ...healthSchemas,
        ...deliverySchemas,
        ...portalSchemas,
        ...pauseSchemas,
        ...noticeSchemas,
        ...auditSchemas,
        ...erasureSchemas,
        ...purgeSchemas,
        ...(options.codec && codecDocument.schemas),
      },
      responses,
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'A token of the identity provider (HS256 or JWKS); its sub is the caller, exp is required. Or a portal ' +
            'link’s token, on its project’s registration, delivery, health, test and rotate routes within its capabilities.',
        },
      },
    },
  };
}

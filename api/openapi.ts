import {
  projectIdSchema,
  registerWebhookBodySchema,
  rotateSecretBodySchema,
  updateWebhookBodySchema,
  webhookTypesSchema,
  webhookUrlSchema,
} from './schemas';
import { MAX_BODY } from './errors';
import { deliveryPaths, deliverySchemas } from './openapi-deliveries';
import { json, projectIdParameter, ref } from './openapi-parts';
import { portalPaths, portalSchemas, portalTag } from './openapi-portal';
import { pausePaths, pauseSchemas } from './openapi-pause';
import { noticePaths, noticeSchemas } from './openapi-notices';
import { auditPaths, auditSchemas, auditTag } from './openapi-audit';
import { codecBodySchema } from './routes/codec';

// The request bodies below are the very objects ajv compiles (./schemas, the codec route): they cannot drift apart.

type Json = { readonly [key: string]: unknown };

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security?: Json[];
  parameters?: Json[];
  requestBody?: Json;
  responses: Record<string, Json>;
}

/** What the app serves beyond the routes every instance has: createApp mounts /codec only when given the codec. */
export interface OpenApiOptions {
  /** AppDeps.codec is given: document POST /codec/encode and /codec/decode. */
  codec: boolean;
}

export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';

export interface OpenApiDocument {
  openapi: '3.1.0';
  info: Json;
  tags: Json[];
  security: Json[];
  paths: Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;
  components: { schemas: Record<string, Json>; responses: Record<string, Json>; securitySchemes: Record<string, Json> };
}

const problemJson = (schema: Json) => ({ 'application/problem+json': { schema } });

const timestampSchema = { type: 'string', format: 'date-time' } as const;

const registrationProperties = {
  _id: { type: 'string', format: 'uuid', description: 'Identifier of the registration, assigned by the service.' },
  projectId: projectIdSchema,
  url: webhookUrlSchema,
  types: webhookTypesSchema,
  headerNames: {
    type: 'array',
    maxItems: 10,
    items: { type: 'string' },
    description: 'Names of the custom headers sent with every delivery, as set; their values are never shown.',
  },
  pausedAt: {
    type: ['string', 'null'],
    format: 'date-time',
    description: 'When the pause holding the deliveries began; null when the webhook is not paused.',
  },
  pausedUntil: {
    type: ['string', 'null'],
    format: 'date-time',
    description: 'When that pause ends by itself (PAUSE_MAX_HOURS at most); null when the webhook is not paused.',
  },
  clientCertificate: {
    type: ['object', 'null'],
    description:
      'The client certificate presented to the receiver in every TLS handshake (mutual TLS); null without one. ' +
      'Its private key is never shown.',
    properties: {
      subject: { type: 'string', description: 'The certificate’s subject, e.g. CN=hospital-client, O=Example.' },
      notAfter: { type: 'string', format: 'date-time', description: 'When it expires.' },
      fingerprint: { type: 'string', description: 'SHA-256 of the certificate, colon-separated hex.' },
    },
    required: ['subject', 'notAfter', 'fingerprint'],
    additionalProperties: false,
  },
  createdAt: timestampSchema,
  updatedAt: timestampSchema,
} as const;

const registrationSchema = {
  type: 'object',
  description:
    'A webhook registration as the API shows it; the signing secret is never shown again. To a read-only portal ' +
    'link the url is its origin only (scheme, host, port): paths and queries often carry a capability.',
  properties: registrationProperties,
  required: Object.keys(registrationProperties),
  additionalProperties: false,
} as const;

const registrationWithSecretSchema = {
  type: 'object',
  description: 'The registration just created, with its signing secret: shown in this response only.',
  properties: {
    ...registrationProperties,
    secret: {
      type: 'string',
      pattern: '^whsec_',
      description:
        'Key of the HMAC-SHA256 X-Signature and webhook-signature of every delivery. Store it now: it is not shown again.',
    },
  },
  required: [...Object.keys(registrationProperties), 'secret'],
  additionalProperties: false,
} as const;

const rotatedSecretSchema = {
  type: 'object',
  description: 'The new signing secret, shown in this response only, and the end of the overlap.',
  properties: {
    secret: {
      type: 'string',
      pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$',
      description: 'The new secret: signs X-Signature from now on, and webhook-signature beside the replaced one.',
    },
    previousSecretExpiresAt: {
      type: 'string',
      format: 'date-time',
      description: 'When deliveries stop carrying a signature with the replaced secret (now when overlapSeconds is 0).',
    },
  },
  required: ['secret', 'previousSecretExpiresAt'],
  additionalProperties: false,
} as const;

const testDeliverySchema = {
  type: 'object',
  description: 'The receiver acknowledged the signed TEST event with a 2xx status.',
  properties: {
    delivered: { const: true },
    statusCode: { type: 'integer', minimum: 200, maximum: 299, description: 'Status the receiver answered.' },
    durationMs: { type: 'number', minimum: 0, description: 'Duration of the acknowledged attempt.' },
    workflowId: { type: 'string', description: 'Temporal workflow id of the delivery, to find it in the Temporal UI.' },
  },
  required: ['delivered', 'statusCode', 'durationMs', 'workflowId'],
  additionalProperties: false,
} as const;

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

const testDeliveryProblemSchema = {
  allOf: [
    ref('schemas', 'Problem'),
    {
      type: 'object',
      properties: {
        workflowId: { type: 'string', description: 'Temporal workflow id of the failed delivery.' },
        statusCode: { type: 'integer', description: 'Status the receiver answered, when it answered.' },
        category: {
          type: 'string',
          enum: ['timeout', 'refused', 'tls', 'forbidden-target', 'http-status', 'unreachable', 'no-outcome'],
          description:
            'Why the TEST event was not acknowledged; the detail says it in words, without internal addresses.',
        },
      },
      required: ['workflowId'],
    },
  ],
} as const;

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

const problemResponse = (description: string, schema: Json = ref('schemas', 'Problem')) => ({
  description,
  content: problemJson(schema),
});

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

const bodyOf = (name: string) => ({ required: true, content: json(ref('schemas', name)) });

const codecPayloadsSchema = {
  type: 'object',
  description: 'The payloads transformed, in the order given.',
  properties: {
    payloads: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          metadata: { type: 'object', additionalProperties: { type: 'string', contentEncoding: 'base64' } },
          data: { type: 'string', contentEncoding: 'base64' },
        },
        required: ['metadata', 'data'],
        additionalProperties: false,
      },
    },
  },
  required: ['payloads'],
  additionalProperties: false,
} as const;

const codecOperation = (direction: 'encode' | 'decode', summary: string, invalid: Json): OpenApiOperation => ({
  operationId: `${direction}Payloads`,
  summary,
  description:
    'Temporal’s remote payload codec, which the Temporal UI and CLI call as their codec endpoint (…/codec). For ' +
    'operators only: a token whose sub is listed in OPERATOR_SUBJECTS, or whose roles (or role) claim holds ' +
    'OPERATOR_ROLE; project members are not operators. Served only by an API given the payload codec ' +
    '(PAYLOAD_ENCRYPTION_KEYS, or the development key outside production); one without it neither serves nor lists ' +
    '/codec. Browser calls from CODEC_CORS_ORIGINS get CORS headers, and their OPTIONS preflight is answered 204 ' +
    'before authentication.',
  tags: ['codec'],
  requestBody: bodyOf('CodecBody'),
  responses: {
    '200': { description: 'The payloads, one for each given.', content: json(ref('schemas', 'CodecPayloads')) },
    '400': invalid,
    '401': ref('responses', 'Unauthorized'),
    '403': problemResponse('The caller is not an operator (not in OPERATOR_SUBJECTS, no OPERATOR_ROLE).'),
    '413': ref('responses', 'TooLarge'),
    '415': ref('responses', 'UnsupportedMediaType'),
    '503': ref('responses', 'Unavailable'),
  },
});

/** The operators' part: listed only when the app mounts the codec router. */
const codecDocument = {
  tag: {
    name: 'codec',
    description: 'Temporal’s remote payload codec, for operators; served only when payload encryption is set up.',
  },
  paths: {
    '/codec/encode': {
      post: codecOperation(
        'encode',
        'Encrypt Temporal payloads with the first key of PAYLOAD_ENCRYPTION_KEYS',
        ref('responses', 'InvalidBody'),
      ),
    },
    '/codec/decode': {
      post: codecOperation(
        'decode',
        'Decrypt Temporal payloads with the key that sealed each; payloads not encrypted come back unchanged',
        problemResponse(
          'The body is not JSON, or breaks the schema (each problem listed in errors); or a payload cannot be ' +
            'decrypted: sealed with a key not in PAYLOAD_ENCRYPTION_KEYS, truncated or altered (detail names the ' +
            'key id, never content).',
          ref('schemas', 'ValidationProblem'),
        ),
      ),
    },
  },
  schemas: { CodecBody: codecBodySchema, CodecPayloads: codecPayloadsSchema },
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
  const publicOperation = { tags: ['operations'], security: [] };
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
      { name: 'webhooks', description: 'Project webhook registration, management and test.' },
      { name: 'operations', description: 'Public probes and documentation; no token.' },
      { name: 'deliveries', description: 'A project’s delivery log, redelivery, recovery and endpoint health.' },
      portalTag,
      auditTag,
      ...(options.codec ? [codecDocument.tag] : []),
    ],
    security: [{ bearerAuth: [] }],
    paths: {
      '/webhooks/register': {
        post: {
          operationId: 'registerWebhook',
          summary: 'Register the webhook of a project',
          description: 'A project has at most one webhook. The response carries the signing secret, once.',
          tags: ['webhooks'],
          requestBody: bodyOf('RegisterWebhookBody'),
          responses: {
            '201': { description: 'Registered.', content: json(ref('schemas', 'RegistrationWithSecret')) },
            '400': ref('responses', 'InvalidBody'),
            '401': ref('responses', 'Unauthorized'),
            '403': ref('responses', 'Forbidden'),
            '404': problemResponse('No project with id {id} was found.'),
            '409': problemResponse('Webhook has already been registered previously.'),
            '413': ref('responses', 'TooLarge'),
            '415': ref('responses', 'UnsupportedMediaType'),
            '503': ref('responses', 'Unavailable'),
          },
        },
      },
      '/webhooks': {
        patch: {
          operationId: 'updateWebhook',
          summary: 'Change the URL, the event types and/or the custom headers of a project’s webhook',
          description:
            'The project is named in the body; the secret stays the same. `headers`, when given, replaces the whole ' +
            'set of custom headers (`{}` removes them all); omitted, the headers stay as they are. Custom headers and ' +
            'the client certificate belong to the URL’s origin (scheme, host, port): a `url` on another origin must ' +
            'come with `headers` and `clientCertificate` again (or `{}` and null to remove them) when the webhook has ' +
            'them, else 400; a `url` on the same origin keeps them. A body that changes nothing (the same url, types, ' +
            'certificate) writes nothing (no audit row, `updatedAt` unchanged) and answers 200 with the registration; ' +
            '`headers` given are always written anew (comparing sealed values would disclose them).',
          tags: ['webhooks'],
          requestBody: bodyOf('UpdateWebhookBody'),
          responses: {
            '200': { description: 'Updated (or already so).', content: json(ref('schemas', 'Registration')) },
            '400': problemResponse(
              'The body is not JSON, or breaks the schema; or `url` moves the webhook to another origin without ' +
                'restating its custom headers (`/headers`) or client certificate (`/clientCertificate`). Each ' +
                'problem listed in errors; nothing is stored.',
              ref('schemas', 'ValidationProblem'),
            ),
            '401': ref('responses', 'Unauthorized'),
            '403': ref('responses', 'Forbidden'),
            '404': problemResponse('No such project, or: Must register webhook before updating it.'),
            '413': ref('responses', 'TooLarge'),
            '415': ref('responses', 'UnsupportedMediaType'),
            '503': ref('responses', 'Unavailable'),
          },
        },
      },
      '/webhooks/project/{projectId}': {
        get: {
          operationId: 'getWebhook',
          summary: 'Get the webhook of a project',
          tags: ['webhooks'],
          parameters: [projectIdParameter],
          responses: {
            '400': ref('responses', 'InvalidParameter'),
            '503': ref('responses', 'Unavailable'),
            '200': {
              description: 'The registration, without its secret or its custom headers’ values.',
              content: json(ref('schemas', 'Registration')),
            },
            '401': ref('responses', 'Unauthorized'),
            '403': ref('responses', 'Forbidden'),
            '404': problemResponse('No such project, or it has no webhook.'),
          },
        },
        delete: {
          operationId: 'deleteWebhook',
          summary: 'Delete the webhook of a project',
          description: 'Events are not delivered until a webhook is registered again, with a new secret.',
          tags: ['webhooks'],
          parameters: [projectIdParameter],
          responses: {
            '400': ref('responses', 'InvalidParameter'),
            '503': ref('responses', 'Unavailable'),
            '204': { description: 'Deleted.' },
            '401': ref('responses', 'Unauthorized'),
            '403': ref('responses', 'Forbidden'),
            '404': problemResponse('No such project, or it has no webhook.'),
          },
        },
      },
      '/webhooks/project/{projectId}/secret/rotate': {
        post: {
          operationId: 'rotateWebhookSecret',
          summary: 'Replace the signing secret of a project’s webhook, with an overlap',
          description:
            'The new secret signs every delivery from now on. During the overlap webhook-signature carries a ' +
            'signature with the new and one with the replaced secret, and X-Signature uses the new one; afterwards ' +
            'only the new secret signs and the replaced one is erased. The body is optional.',
          tags: ['webhooks'],
          parameters: [projectIdParameter],
          requestBody: { required: false, content: json(ref('schemas', 'RotateSecretBody')) },
          responses: {
            '200': { description: 'Rotated.', content: json(ref('schemas', 'RotatedSecret')) },
            '400': ref('responses', 'InvalidBody'),
            '401': ref('responses', 'Unauthorized'),
            '403': ref('responses', 'Forbidden'),
            '404': problemResponse('No such project, or it has no webhook.'),
            '413': ref('responses', 'TooLarge'),
            '415': ref('responses', 'UnsupportedMediaType'),
            '503': ref('responses', 'Unavailable'),
          },
        },
      },
      '/webhooks/test/project/{projectId}': {
        post: {
          operationId: 'testWebhook',
          summary: 'Send a signed TEST event to the project’s webhook and wait for the receiver’s answer',
          description: 'The body delivered is {"test": string}; it is sent whatever types the webhook subscribes to.',
          tags: ['webhooks'],
          parameters: [projectIdParameter],
          responses: {
            '400': ref('responses', 'InvalidParameter'),
            '503': ref('responses', 'Unavailable'),
            '200': { description: 'The receiver acknowledged.', content: json(ref('schemas', 'TestDelivery')) },
            '401': ref('responses', 'Unauthorized'),
            '403': ref('responses', 'Forbidden'),
            '404': problemResponse('No such project, or it has no webhook.'),
            '409': problemResponse('The webhook is paused: resume it to send a test event.'),
            '429': {
              ...problemResponse(
                'A test event of this project is still in flight, or it sent TEST_EVENTS_PER_MINUTE (default 10) in the last minute.',
              ),
              headers: {
                'Retry-After': {
                  description: 'Seconds to wait before testing again.',
                  schema: { type: 'integer', minimum: 1 },
                },
              },
            },
            '502': problemResponse(
              'The receiver did not acknowledge: a non-2xx status, or unreachable.',
              ref('schemas', 'TestDeliveryProblem'),
            ),
          },
        },
      },
      ...deliveryPaths,
      ...portalPaths,
      ...pausePaths,
      ...noticePaths,
      ...auditPaths,
      ...(options.codec && codecDocument.paths),
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
        RegisterWebhookBody: registerWebhookBodySchema,
        UpdateWebhookBody: updateWebhookBodySchema,
        RotateSecretBody: rotateSecretBodySchema,
        RotatedSecret: rotatedSecretSchema,
        Registration: registrationSchema,
        RegistrationWithSecret: registrationWithSecretSchema,
        TestDelivery: testDeliverySchema,
        Problem: problemSchema,
        ValidationProblem: validationProblemSchema,
        TestDeliveryProblem: testDeliveryProblemSchema,
        ReadinessChecks: readinessChecksSchema,
        SearchAttributesReport: searchAttributesReportSchema,
        NotReadyProblem: notReadyProblemSchema,
        ...deliverySchemas,
        ...portalSchemas,
        ...pauseSchemas,
        ...noticeSchemas,
        ...auditSchemas,
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

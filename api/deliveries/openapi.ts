import { WEBHOOK_ID_PATTERN, WEBHOOK_TYPES } from '../../common/contract';
import { DELIVERY_STATUSES } from '../../db/deliveries';
import { DEFAULT_PAGE_SIZE, DETAIL_ATTEMPTS, MAX_CURSOR_LENGTH, MAX_PAGE_SIZE } from './deliveries';
import { recoverBodySchema } from './schemas';
import type { Paths } from '../openapi/parts';
import { json, pathParameter as path, problem, projectIdParameter as projectId, ref } from '../openapi/parts';

// The delivery log's part of the OpenAPI document; ../openapi/document spreads these into its paths and schemas.

/** A path parameter outside its alphabet never reaches the database. */
const badPath = problem(
  'A path parameter is invalid: a projectId outside the safe alphabet, or an id that cannot be an X-Webhook-Id.',
);

const timestamp = { type: 'string', format: 'date-time' } as const;
const nullable = (type: string) => ({ type: [type, 'null'] }) as const;

const deliveryProperties = {
  id: { type: 'string', description: 'The event’s X-Webhook-Id; a redelivery keeps it.' },
  type: { type: 'string', enum: [...WEBHOOK_TYPES] },
  status: { type: 'string', enum: [...DELIVERY_STATUSES] },
  attempts: { type: 'integer', minimum: 0, description: 'POSTs made, redeliveries included.' },
  lastStatusCode: { ...nullable('integer'), description: 'Status of the last answer, null when none.' },
  lastError: { ...nullable('string'), description: 'Last error in words (status or error code); never a body.' },
  lastAttemptAt: {
    ...nullable('string'),
    format: 'date-time',
    description: 'When the last attempt was made (the attempt log’s last `at`); null before the first.',
  },
  createdAt: timestamp,
  updatedAt: timestamp,
} as const;

const deliverySchema = {
  type: 'object',
  description: 'One event’s delivery: status, counts, codes and times; never the payload or a response body.',
  properties: deliveryProperties,
  required: Object.keys(deliveryProperties),
  additionalProperties: false,
} as const;

const attemptSchema = {
  type: 'object',
  properties: {
    attempt: { type: 'integer', minimum: 1 },
    at: timestamp,
    statusCode: { type: 'integer', description: 'The receiver’s status, when it answered.' },
    errorCode: { type: 'string', description: 'Why there was no answer: TIMEOUT, ECONNREFUSED, …' },
    durationMs: { type: 'integer', minimum: 0 },
  },
  required: ['attempt', 'at', 'durationMs'],
  additionalProperties: false,
} as const;

const deliveryDetailSchema = {
  type: 'object',
  properties: {
    ...deliveryProperties,
    attemptLog: {
      type: 'array',
      maxItems: DETAIL_ATTEMPTS,
      items: ref('schemas', 'DeliveryAttempt'),
      description: `The first ${DETAIL_ATTEMPTS} attempts, oldest first: every one, for a delivery that has no more.`,
    },
    nextAttemptsCursor: {
      ...nullable('string'),
      description: 'Pass as cursor to …/attempts for the attempts after attemptLog; null when it holds them all.',
    },
  },
  required: [...Object.keys(deliveryProperties), 'attemptLog', 'nextAttemptsCursor'],
  additionalProperties: false,
} as const;

const attemptPageSchema = {
  type: 'object',
  properties: {
    items: { type: 'array', items: ref('schemas', 'DeliveryAttempt') },
    nextCursor: { ...nullable('string'), description: 'Pass as cursor for the next page; null on the last.' },
  },
  required: ['items', 'nextCursor'],
  additionalProperties: false,
} as const;

const deliveryPageSchema = {
  type: 'object',
  properties: {
    items: { type: 'array', items: ref('schemas', 'Delivery') },
    nextCursor: { ...nullable('string'), description: 'Pass as cursor for the next page; null on the last.' },
  },
  required: ['items', 'nextCursor'],
  additionalProperties: false,
} as const;

const redeliverySchema = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'Temporal workflow id of this redelivery.' },
    redeliveryOf: { type: 'string', description: 'The delivery (X-Webhook-Id) sent again.' },
  },
  required: ['id', 'redeliveryOf'],
  additionalProperties: false,
} as const;

const endpointHealthSchema = {
  type: 'object',
  properties: {
    state: { type: 'string', enum: ['unknown', 'healthy', 'failing'], description: 'unknown: no attempt yet.' },
    consecutiveFailures: { type: 'integer', minimum: 0 },
    lastSuccessAt: nullable('string'),
    lastFailureAt: nullable('string'),
    lastError: nullable('string'),
    breaker: {
      type: 'object',
      description:
        'The registration’s circuit breaker: closed (attempts go), open (none go until openUntil), or half-open ' +
        '(the open period is over: the next attempt probes, and its outcome closes or reopens it).',
      properties: {
        state: { type: 'string', enum: ['closed', 'open', 'half-open'] },
        openUntil: {
          type: ['string', 'null'],
          format: 'date-time',
          description: 'While open: when the open period ends and a probe may go; null otherwise.',
        },
      },
      required: ['state', 'openUntil'],
      additionalProperties: false,
    },
    clientCertificate: {
      type: ['object', 'null'],
      description:
        'The client certificate’s expiry (null without one): expiring from 14 days before notAfter, with a warning.',
      properties: {
        state: { type: 'string', enum: ['valid', 'expiring', 'expired'] },
        notAfter: { type: 'string', format: 'date-time' },
        daysLeft: { type: 'integer', minimum: 0, description: 'Whole days until notAfter.' },
        warning: { ...nullable('string'), description: 'What to do, while expiring or expired; null otherwise.' },
      },
      required: ['state', 'notAfter', 'daysLeft', 'warning'],
      additionalProperties: false,
    },
    held: {
      type: ['object', 'null'],
      description:
        'Why deliveries are held, while they are (null otherwise): member (a pause, until `until`) or gone (the ' +
        'receiver answered 410 Gone at `since`: held until a member resumes, `until` null).',
      properties: {
        reason: { type: 'string', enum: ['member', 'gone'] },
        since: { type: 'string', format: 'date-time' },
        until: { type: ['string', 'null'], format: 'date-time' },
        summary: { type: 'string', description: 'In words: "held: the receiver answered 410 Gone at …".' },
      },
      required: ['reason', 'since', 'until', 'summary'],
      additionalProperties: false,
    },
    slowedUntil: {
      type: ['string', 'null'],
      format: 'date-time',
      description:
        'The receiver answered 429, 502, 503 or 504: no delivery is attempted before this time; null otherwise.',
    },
    rateLimit: {
      type: ['object', 'null'],
      description:
        'The receiver’s rate limit (null: unlimited) and how many deliveries wait for it: listed, due, and not yet ' +
        'woken while the breaker is closed and no pause holds them. They go out as the rate allows, falls first.',
      properties: {
        perSecond: { type: 'integer', minimum: 1, description: 'The most deliveries sent in any one second.' },
        waiting: { type: 'integer', minimum: 0, description: 'Deliveries queued for the rate now.' },
      },
      required: ['perSecond', 'waiting'],
      additionalProperties: false,
    },
  },
  required: [
    'state',
    'consecutiveFailures',
    'lastSuccessAt',
    'lastFailureAt',
    'lastError',
    'breaker',
    'clientCertificate',
    'held',
    'slowedUntil',
    'rateLimit',
  ],
  additionalProperties: false,
} as const;

const query = (name: string, description: string, schema: object) =>
  ({ name, in: 'query', required: false, description, schema }) as const;

const deliveryId = path('id', 'The delivery’s id (its X-Webhook-Id): 1 to 300 visible ASCII characters.', {
  type: 'string',
  minLength: 1,
  maxLength: 300,
  pattern: WEBHOOK_ID_PATTERN.source,
});
const common = {
  '401': ref('responses', 'Unauthorized'),
  '403': ref('responses', 'Forbidden'),
} as const;
const notFound = problem('No such project, or no delivery with this id in it.');
const unavailable = problem(
  'This API instance has no Temporal connection to start redeliveries, or Temporal refused the start (its gRPC ' +
    'status named in detail).',
);
const rateLimited = (description: string) => ({
  ...problem(description),
  headers: {
    'Retry-After': { description: 'Seconds to wait before calling again.', schema: { type: 'integer', minimum: 1 } },
  },
});
const readsLimited = rateLimited(
  'The project’s reads of its log and health (its members’ and portal links’ together) went past ' +
    'READ_CALLS_PER_SECOND (default 10) a second on this API instance.',
);
const limitParameter = query('limit', 'Page size.', {
  type: 'integer',
  minimum: 1,
  maximum: MAX_PAGE_SIZE,
  default: DEFAULT_PAGE_SIZE,
});
const cursorParameter = (previous: string) =>
  query('cursor', `${previous}; any other value is a 400.`, {
    type: 'string',
    minLength: 1,
    maxLength: MAX_CURSOR_LENGTH,
    pattern: '^[A-Za-z0-9_-]+$',
  });

export const deliverySchemas = {
  Delivery: deliverySchema,
  DeliveryAttempt: attemptSchema,
  DeliveryDetail: deliveryDetailSchema,
  DeliveryAttemptPage: attemptPageSchema,
  DeliveryPage: deliveryPageSchema,
  Redelivery: redeliverySchema,
  RecoverBody: recoverBodySchema,
  EndpointHealth: endpointHealthSchema,
} as const;

export const deliveryPaths: Paths = {
  '/webhooks/project/{projectId}/deliveries': {
    get: {
      operationId: 'listDeliveries',
      summary: 'List the project’s deliveries, newest first',
      tags: ['deliveries'],
      parameters: [
        projectId,
        query('status', 'Only deliveries in this status.', { type: 'string', enum: [...DELIVERY_STATUSES] }),
        query('type', 'Only events of this type.', { type: 'string', enum: [...WEBHOOK_TYPES] }),
        query('since', 'Created at or after.', timestamp),
        query('until', 'Created before.', timestamp),
        limitParameter,
        cursorParameter('nextCursor of the previous page'),
      ],
      responses: {
        '200': { description: 'A page of deliveries.', content: json(ref('schemas', 'DeliveryPage')) },
        '400': problem('A query parameter is invalid (each problem named in detail).'),
        ...common,
        '404': problem('No such project.'),
        '429': readsLimited,
      },
    },
  },
  '/webhooks/project/{projectId}/deliveries/{id}': {
    get: {
      operationId: 'getDelivery',
      summary: 'One delivery with the first page of its attempt log',
      tags: ['deliveries'],
      parameters: [projectId, deliveryId],
      responses: {
        '200': {
          description: `The delivery and its first ${DETAIL_ATTEMPTS} attempts (nextAttemptsCursor reads on).`,
          content: json(ref('schemas', 'DeliveryDetail')),
        },
        '400': badPath,
        ...common,
        '404': notFound,
        '429': readsLimited,
      },
    },
  },
  '/webhooks/project/{projectId}/deliveries/{id}/attempts': {
    get: {
      operationId: 'listDeliveryAttempts',
      summary: 'A page of a delivery’s attempts, oldest first, numbered across its redeliveries',
      tags: ['deliveries'],
      parameters: [
        projectId,
        deliveryId,
        limitParameter,
        cursorParameter('nextAttemptsCursor of the delivery, or nextCursor of the previous page'),
      ],
      responses: {
        '200': { description: 'A page of attempts.', content: json(ref('schemas', 'DeliveryAttemptPage')) },
        '400': problem('A path or query parameter is invalid (each query problem named in detail).'),
        ...common,
        '404': notFound,
        '429': readsLimited,
      },
    },
  },
  '/webhooks/project/{projectId}/deliveries/{id}/redeliver': {
    post: {
      operationId: 'redeliver',
      summary: 'Send a delivered or failed event again, with the same X-Webhook-Id, signed afresh',
      description: 'It goes to the current registration; receivers deduplicate on X-Webhook-Id.',
      tags: ['deliveries'],
      parameters: [projectId, deliveryId],
      responses: {
        '202': { description: 'The redelivery started.', content: json(ref('schemas', 'Redelivery')) },
        '400': badPath,
        ...common,
        '404': notFound,
        '409': problem(
          'The delivery is pending (or was skipped): nothing to redeliver now; or its event in Temporal is not the ' +
            'logged one (not encrypted with the payload key, or of another project, type or workflow): nothing is sent.',
        ),
        '410': problem('The event is past Temporal’s retention: its payload is gone.'),
        '429': rateLimited(
          'The project made REDELIVER_CALLS_PER_MINUTE (default 60) redeliver calls in the last minute; a TEST event ' +
            'counts against the test endpoint’s limits instead (one in flight, TEST_EVENTS_PER_MINUTE, default 10).',
        ),
        '503': unavailable,
      },
    },
  },
  '/webhooks/project/{projectId}/deliveries/recover': {
    post: {
      operationId: 'recoverDeliveries',
      summary: 'Redeliver every failed delivery created in a window, at a bounded rate',
      description:
        'At most 500 per call, spaced to RECOVER_RATE_PER_SECOND; call again for the rest. TEST deliveries are left out.',
      tags: ['deliveries'],
      parameters: [projectId],
      requestBody: { required: true, content: json(ref('schemas', 'RecoverBody')) },
      responses: {
        '202': {
          description: 'How many redeliveries started.',
          content: json({
            type: 'object',
            properties: { count: { type: 'integer', minimum: 0 } },
            required: ['count'],
            additionalProperties: false,
          }),
        },
        '400': ref('responses', 'InvalidBody'),
        ...common,
        '404': problem('No such project.'),
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
        '429': rateLimited(
          'A recovery of this project is still starting its redeliveries (one at a time), or it made ' +
            'RECOVER_CALLS_PER_MINUTE (default 5) recover calls in the last minute.',
        ),
        '503': {
          ...problem(
            'This API instance has no Temporal connection, Temporal refused a start (its gRPC status named in ' +
              'detail), or Temporal stopped answering part-way: then `count` says how many redeliveries were started ' +
              '(they stand; the others stay failed for the next call).',
          ),
          headers: {
            'Retry-After': { description: 'Seconds to wait before calling again.', schema: { type: 'string' } },
          },
        },
      },
    },
  },
  '/webhooks/project/{projectId}/health': {
    get: {
      operationId: 'getEndpointHealth',
      summary: 'Health of the project’s endpoint as deliveries saw it',
      tags: ['deliveries'],
      parameters: [projectId],
      responses: {
        '200': { description: 'The endpoint’s health.', content: json(ref('schemas', 'EndpointHealth')) },
        '400': badPath,
        ...common,
        '404': problem('No such project.'),
        '429': readsLimited,
      },
    },
  },
  '/metrics': {
    get: {
      operationId: 'metrics',
      summary: 'Prometheus metrics: requests by route and status, and delivery counters when the worker runs here',
      tags: ['operations'],
      security: [],
      responses: {
        '200': { description: 'Prometheus text format.', content: { 'text/plain': { schema: { type: 'string' } } } },
        '401': problem('METRICS_TOKEN is set and the bearer token differs.'),
      },
    },
  },
};

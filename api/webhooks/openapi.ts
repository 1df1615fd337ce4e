import { projectIdSchema } from '../http/validation';
import { OAUTH_CLIENT_AUTHENTICATIONS } from '../../common/registration/oauth-client';
import {
  rateLimitSchema,
  registerWebhookBodySchema,
  rotateSecretBodySchema,
  signatureSchemeSchema,
  updateWebhookBodySchema,
  webhookTypesSchema,
  webhookUrlSchema,
} from './schemas';
import { bodyOf, json, problemResponse, projectIdParameter, ref, type Paths } from '../openapi/parts';

// The registration's part of the OpenAPI document (register, read, change, delete, rotate, test); ../openapi/document
// spreads it. The request bodies are the very objects ajv compiles: they cannot drift apart.

export const webhooksTag = { name: 'webhooks', description: 'Project webhook registration, management and test.' };

const timestampSchema = { type: 'string', format: 'date-time' } as const;

/** Standard Webhooks' form of an Ed25519 public key: `whpk_` and base64 of its raw 32 bytes. */
const publicKeySchema = {
  type: 'string',
  pattern: '^whpk_[A-Za-z0-9+/]{43}=$',
  description:
    'Ed25519 public key (Standard Webhooks: `whpk_` and base64 of the raw 32-byte key): verifies the `v1a` entries ' +
    'of webhook-signature, over `{webhook-id}.{webhook-timestamp}.{body}`. Not a secret; its private key is never shown.',
} as const;

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
    description:
      'When the pause holding the deliveries began (for a hold the receiver’s 410 began: when the 410 came); null ' +
      'when the webhook is not paused.',
  },
  pausedUntil: {
    type: ['string', 'null'],
    format: 'date-time',
    description:
      'When that pause ends by itself (PAUSE_MAX_HOURS at most); null when the webhook is not paused, and for a hold ' +
      'the receiver’s 410 began, which has no end of its own: it lasts until a member resumes.',
  },
  pauseReason: {
    type: ['string', 'null'],
    enum: ['member', 'gone', null],
    description:
      'Why the deliveries are held: member (a member or a manage link paused the webhook), gone (the receiver ' +
      'answered 410 Gone at pausedAt: held until a member resumes); null when the webhook is not paused.',
  },
  slowedUntil: {
    type: ['string', 'null'],
    format: 'date-time',
    description:
      'The receiver answered 429, 502, 503 or 504: no delivery is attempted before this time (its Retry-After, or ' +
      'the retry schedule’s next interval when longer); the waiting ones then go out paced, falls first. Null otherwise.',
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
  signatureScheme: signatureSchemeSchema,
  publicKey: {
    ...publicKeySchema,
    type: ['string', 'null'],
    description: `Under v1a: ${publicKeySchema.description} null under v1.`,
  },
  previousPublicKey: {
    ...publicKeySchema,
    type: ['string', 'null'],
    description:
      'The public key a rotation of the key pair replaced, while it still signs beside the new one; else null.',
  },
  previousPublicKeyExpiresAt: {
    type: ['string', 'null'],
    format: 'date-time',
    description: 'When the replaced key pair stops signing (and is erased); null when there is none.',
  },
  oauth: {
    type: ['object', 'null'],
    description:
      'The OAuth 2.0 client whose bearer token (client credentials grant) every delivery carries as ' +
      '`Authorization: Bearer`; null without one. Its client secret or private key is never shown.',
    properties: {
      tokenUrl: { type: 'string', description: 'The token endpoint.' },
      clientId: { type: 'string', description: 'The client_id.' },
      clientAuthentication: {
        type: 'string',
        enum: [...OAUTH_CLIENT_AUTHENTICATIONS],
        description: 'How the client authenticates to the token endpoint.',
      },
      scope: { type: ['string', 'null'], description: 'The scopes asked for, space-separated; null for none.' },
      keyId: { type: ['string', 'null'], description: 'The client assertion’s kid (private_key_jwt); null for none.' },
    },
    required: ['tokenUrl', 'clientId', 'clientAuthentication', 'scope', 'keyId'],
    additionalProperties: false,
  },
  rateLimit: {
    ...rateLimitSchema,
    description: 'The most deliveries the receiver is sent in any one second, across all workers; null: unlimited.',
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

const rotatedSigningKeySchema = {
  type: 'object',
  description: 'The new Ed25519 public key, and the replaced one while it keeps signing.',
  properties: {
    publicKey: {
      ...publicKeySchema,
      description: 'The new public key: signs a v1a entry of every delivery from now on.',
    },
    previousPublicKey: {
      ...publicKeySchema,
      type: ['string', 'null'],
      description:
        'The replaced public key, signing a second v1a entry until previousPublicKeyExpiresAt; null without overlap.',
    },
    previousPublicKeyExpiresAt: {
      type: 'string',
      format: 'date-time',
      description:
        'When deliveries stop carrying a signature with the replaced key pair (now when overlapSeconds is 0).',
    },
  },
  required: ['publicKey', 'previousPublicKey', 'previousPublicKeyExpiresAt'],
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

export const webhookPaths: Paths = {
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
        '409': problemResponse(
          'Webhook has already been registered previously; or the project is being purged (its `purgeId` named): ' +
            'nothing is stored.',
        ),
        '413': ref('responses', 'TooLarge'),
        '415': ref('responses', 'UnsupportedMediaType'),
        '503': ref('responses', 'Unavailable'),
      },
    },
  },
  '/webhooks': {
    patch: {
      operationId: 'updateWebhook',
      summary:
        'Change the URL, the event types, the custom headers, the client certificate, the signature scheme, the OAuth client or the rate limit of a project’s webhook',
      description:
        'The project is named in the body; the secret stays the same. `headers`, when given, replaces the whole ' +
        'set of custom headers (`{}` removes them all); omitted, the headers stay as they are. Custom headers and ' +
        'the client certificate and the OAuth client belong to the URL’s origin (scheme, host, port): a `url` on ' +
        'another origin must come with `headers`, `clientCertificate` and `oauth` again (or `{}` and null to remove ' +
        'them) when the webhook has them, else 400; a `url` on the same origin keeps them. `oauth`, when given, ' +
        'replaces the whole client, secret or key included (null removes it). A body that changes nothing (the ' +
        'same url, types, certificate) writes nothing (no audit row, `updatedAt` unchanged) and answers 200 with ' +
        'the registration; `headers` and `oauth` given are always written anew (comparing sealed values would ' +
        'disclose them). `signatureScheme` `v1a` on a v1 webhook makes a new Ed25519 key pair (its public key in ' +
        'the answer), `v1` erases the pair. `rateLimit` (`{"perSecond": 5}`) sets the receiver’s rate, null removes ' +
        'it; omitted, it stays.',
      tags: ['webhooks'],
      requestBody: bodyOf('UpdateWebhookBody'),
      responses: {
        '200': { description: 'Updated (or already so).', content: json(ref('schemas', 'Registration')) },
        '400': problemResponse(
          'The body is not JSON, or breaks the schema; or `url` moves the webhook to another origin without ' +
            'restating its custom headers (`/headers`), client certificate (`/clientCertificate`) or OAuth ' +
            'client (`/oauth`); or `oauth` with a token URL, secret or key that cannot be used (`/oauth/…`). Each ' +
            'problem listed in errors; nothing is stored.',
          ref('schemas', 'ValidationProblem'),
        ),
        '401': ref('responses', 'Unauthorized'),
        '403': ref('responses', 'Forbidden'),
        '404': problemResponse('No such project, or: Must register webhook before updating it.'),
        '409': problemResponse('The project is being purged (its `purgeId` named): nothing is changed.'),
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
  '/webhooks/project/{projectId}/signing-key/rotate': {
    post: {
      operationId: 'rotateWebhookSigningKey',
      summary: 'Replace the Ed25519 key pair of a v1a webhook, with an overlap',
      description:
        'A new key pair signs every delivery from now on. During the overlap webhook-signature carries a `v1a` ' +
        'entry with the new and one with the replaced key pair (the registration shows both public keys); ' +
        'afterwards only the new one signs and the replaced private key is erased. The secret, X-Signature and the ' +
        '`v1` entries are unchanged. The body is optional.',
      tags: ['webhooks'],
      parameters: [projectIdParameter],
      requestBody: { required: false, content: json(ref('schemas', 'RotateSecretBody')) },
      responses: {
        '200': { description: 'Rotated.', content: json(ref('schemas', 'RotatedSigningKey')) },
        '400': ref('responses', 'InvalidBody'),
        '401': ref('responses', 'Unauthorized'),
        '403': ref('responses', 'Forbidden'),
        '404': problemResponse('No such project, or it has no webhook.'),
        '409': problemResponse('The webhook signs with v1 (HMAC) only: it has no key pair to rotate.'),
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
};

export const webhookSchemas = {
  RegisterWebhookBody: registerWebhookBodySchema,
  UpdateWebhookBody: updateWebhookBodySchema,
  RotateSecretBody: rotateSecretBodySchema,
  RotatedSecret: rotatedSecretSchema,
  RotatedSigningKey: rotatedSigningKeySchema,
  Registration: registrationSchema,
  RegistrationWithSecret: registrationWithSecretSchema,
  TestDelivery: testDeliverySchema,
  TestDeliveryProblem: testDeliveryProblemSchema,
};

import { SUBSCRIBABLE_TYPES, type SubscribableType } from '../../common/contract';
import {
  CUSTOM_HEADER_NAME_PATTERN,
  CUSTOM_HEADER_VALUE_PATTERN,
  MAX_CUSTOM_HEADERS,
  MAX_CUSTOM_HEADER_VALUE_LENGTH,
  RESERVED_HEADER_NAMES,
  RESERVED_HEADER_PATTERN,
  type CustomHeaders,
} from '../../common/registration/custom-headers';
import { MAX_WEBHOOK_URL_LENGTH } from '../../common/registration/webhook-url';
import {
  MAX_CLIENT_CERTIFICATE_PEM_LENGTH,
  type ClientCertificateUpload,
} from '../../common/registration/client-certificate';
import {
  MAX_OAUTH_CLIENT_ID_LENGTH,
  MAX_OAUTH_CLIENT_SECRET_LENGTH,
  MAX_OAUTH_KEY_ID_LENGTH,
  MAX_OAUTH_PRIVATE_KEY_LENGTH,
  MAX_OAUTH_SCOPE_LENGTH,
  OAUTH_CLIENT_AUTHENTICATIONS,
  OAUTH_SCOPE_PATTERN,
  OAUTH_VISIBLE_ASCII_PATTERN,
  type OAuthClientUpload,
} from '../../common/registration/oauth-client';
import { MAX_RATE_PER_SECOND } from '../../db/endpoints/rate-limits';
import { compileBody, projectIdSchema } from '../http/validation';
import { SIGNATURE_SCHEMES, type SignatureScheme } from '../../common/crypto/signature';

// The registration's request bodies: plain JSON Schema objects (2020-12 compatible), exported as is so the OpenAPI
// document shows the very objects ajv compiles.

export const webhookUrlSchema = {
  type: 'string',
  format: 'uri',
  pattern: '^[Hh][Tt][Tt][Pp][Ss]?://',
  maxLength: MAX_WEBHOOK_URL_LENGTH,
  description: 'Absolute http: or https: URL of the receiver; https is recommended.',
} as const;

export const webhookTypesSchema = {
  type: 'array',
  minItems: 1,
  uniqueItems: true,
  items: { type: 'string', enum: [...SUBSCRIBABLE_TYPES] },
} as const;

export const customHeadersSchema = {
  type: 'object',
  maxProperties: MAX_CUSTOM_HEADERS,
  propertyNames: { type: 'string', pattern: CUSTOM_HEADER_NAME_PATTERN, not: { pattern: RESERVED_HEADER_PATTERN } },
  additionalProperties: {
    type: 'string',
    maxLength: MAX_CUSTOM_HEADER_VALUE_LENGTH,
    pattern: CUSTOM_HEADER_VALUE_PATTERN,
  },
  description:
    `Headers sent on every delivery (not signed), e.g. {"X-Api-Key": "…"}: at most ${MAX_CUSTOM_HEADERS}, names HTTP ` +
    `tokens (case-insensitive: a name once), values visible ASCII with inner spaces, at most ` +
    `${MAX_CUSTOM_HEADER_VALUE_LENGTH} characters. Reserved, refused: ${RESERVED_HEADER_NAMES.join(', ')}. ` +
    'Values are sealed at rest and never shown again; on PATCH the object replaces the whole set ({} removes all).',
} as const;

export const clientCertificateSchema = {
  type: 'object',
  properties: {
    certificate: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_CLIENT_CERTIFICATE_PEM_LENGTH,
      description: 'PEM X.509 certificate (-----BEGIN CERTIFICATE-----), intermediates after it; valid now.',
    },
    privateKey: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_CLIENT_CERTIFICATE_PEM_LENGTH,
      description: 'Its PEM private key, not encrypted. Sealed at rest and never shown again.',
    },
  },
  required: ['certificate', 'privateKey'],
  additionalProperties: false,
  description:
    'A client certificate presented in the TLS handshake of every delivery, for receivers that require mutual TLS. ' +
    'The key is sealed at rest and never shown again; the registration shows the subject, notAfter and fingerprint.',
} as const;

export const signatureSchemeSchema = {
  type: 'string',
  enum: [...SIGNATURE_SCHEMES],
  description:
    'How webhook-signature is signed. `v1` (the default): HMAC-SHA256 with the secret. `v1a`: Standard Webhooks’ ' +
    'asymmetric signatures too: the service makes an Ed25519 key pair, keeps the private key sealed and shows the ' +
    'public key (`publicKey`, whpk_…); each delivery then carries `v1a,<base64 Ed25519>` entries before the `v1` ones, ' +
    'so a receiver holding only the public key verifies. X-Signature stays HMAC with the secret either way. On PATCH, ' +
    'v1a on a v1 webhook makes a new key pair, v1 erases the pair.',
} as const;

export const oauthClientSchema = {
  type: 'object',
  properties: {
    tokenUrl: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_WEBHOOK_URL_LENGTH,
      description:
        'The token endpoint: an absolute https URL (http only where http receivers are allowed), without ' +
        'credentials or fragment. Reached like the receiver: the same address checks and egress proxy.',
    },
    clientId: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_OAUTH_CLIENT_ID_LENGTH,
      pattern: OAUTH_VISIBLE_ASCII_PATTERN,
      description: 'The client_id the token endpoint knows this service by.',
    },
    clientAuthentication: {
      type: 'string',
      enum: [...OAUTH_CLIENT_AUTHENTICATIONS],
      description:
        'How the client authenticates to the token endpoint: client_secret_basic (HTTP Basic, the default with a ' +
        'clientSecret), client_secret_post (in the form), or private_key_jwt (a signed JWT assertion, RFC 7523, as ' +
        'SMART Backend Services use; the default with a privateKey).',
    },
    clientSecret: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_OAUTH_CLIENT_SECRET_LENGTH,
      pattern: OAUTH_VISIBLE_ASCII_PATTERN,
      description: 'The client secret (client_secret_basic, client_secret_post). Sealed at rest, never shown again.',
    },
    privateKey: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_OAUTH_PRIVATE_KEY_LENGTH,
      description:
        'PEM private key, not encrypted, signing the client assertion (private_key_jwt): RSA of at least 2048 bits ' +
        '(RS384), or EC P-384 (ES384) or P-256 (ES256). The assertion has iss and sub the clientId, aud the ' +
        'tokenUrl, a unique jti and exp five minutes on. Sealed at rest, never shown again.',
    },
    keyId: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_OAUTH_KEY_ID_LENGTH,
      pattern: OAUTH_VISIBLE_ASCII_PATTERN,
      description: 'The kid of the client assertion’s header: the key’s id in the JWKS the token endpoint holds.',
    },
    scope: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_OAUTH_SCOPE_LENGTH,
      pattern: OAUTH_SCOPE_PATTERN,
      description: 'Space-separated scopes asked for with every token, e.g. "system/Observation.write".',
    },
  },
  required: ['tokenUrl', 'clientId'],
  additionalProperties: false,
  description:
    'An OAuth 2.0 client (client credentials grant) for receivers that want a bearer token: before delivering, the ' +
    'worker obtains a token from tokenUrl (a form POST of grant_type=client_credentials) and sends it as ' +
    '`Authorization: Bearer <token>`, kept until shortly before it expires; a 401 has it fetched afresh and the ' +
    'delivery sent once more. Give a clientSecret or a privateKey; they are sealed at rest and never shown again; ' +
    'the registration shows the tokenUrl, clientId, method, scope and keyId.',
} as const;

export const rateLimitSchema = {
  type: ['object', 'null'],
  properties: {
    perSecond: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_RATE_PER_SECOND,
      description: 'The most deliveries the receiver is sent in any one second, across all workers.',
    },
  },
  required: ['perSecond'],
  additionalProperties: false,
  description:
    'The receiver’s rate limit, e.g. {"perSecond": 5}; null or absent: unlimited. Deliveries beyond it wait, ' +
    'listed, and go out as the rate allows, falls first: none is dropped or failed for it, and the waits do not ' +
    'count against the endpoint’s health or its give-up window. On PATCH null removes it.',
} as const;

/** The fields register and update share. */
const registrationFields = {
  projectId: projectIdSchema,
  url: webhookUrlSchema,
  types: webhookTypesSchema,
  headers: customHeadersSchema,
  signatureScheme: signatureSchemeSchema,
  rateLimit: rateLimitSchema,
} as const;

export const registerWebhookBodySchema = {
  type: 'object',
  properties: { ...registrationFields, clientCertificate: clientCertificateSchema, oauth: oauthClientSchema },
  required: ['projectId', 'url', 'types'],
  additionalProperties: false,
} as const;

export const updateWebhookBodySchema = {
  type: 'object',
  properties: {
    ...registrationFields,
    clientCertificate: {
      ...clientCertificateSchema,
      type: ['object', 'null'],
      description: `${clientCertificateSchema.description} null removes it.`,
    },
    oauth: {
      ...oauthClientSchema,
      type: ['object', 'null'],
      description: `${oauthClientSchema.description} On PATCH the object replaces the whole client, secret or key included; null removes it.`,
    },
  },
  required: ['projectId'],
  anyOf: [
    { required: ['url'] },
    { required: ['types'] },
    { required: ['headers'] },
    { required: ['clientCertificate'] },
    { required: ['signatureScheme'] },
    { required: ['oauth'] },
    { required: ['rateLimit'] },
  ],
  additionalProperties: false,
} as const;

/** How long the replaced secret keeps signing deliveries after a rotation: at most a week, a day by default. */
export const MAX_OVERLAP_SECONDS = 604_800;
export const DEFAULT_OVERLAP_SECONDS = 86_400;

export const rotateSecretBodySchema = {
  type: 'object',
  properties: {
    overlapSeconds: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_OVERLAP_SECONDS,
      default: DEFAULT_OVERLAP_SECONDS,
      description: 'Seconds during which deliveries are also signed with the replaced secret (0: stop at once).',
    },
  },
  additionalProperties: false,
} as const;

export interface RotateSecretBody {
  overlapSeconds?: number;
}

/** A receiver's rate limit as the API takes and shows it; null: unlimited. */
export interface RateLimit {
  perSecond: number;
}

export interface RegisterWebhookBody {
  projectId: string;
  url: string;
  types: SubscribableType[];
  rateLimit?: RateLimit | null;
  headers?: CustomHeaders;
  clientCertificate?: ClientCertificateUpload;
  signatureScheme?: SignatureScheme;
  oauth?: OAuthClientUpload;
}

export interface UpdateWebhookBody {
  projectId: string;
  url?: string;
  types?: SubscribableType[];
  rateLimit?: RateLimit | null;
  headers?: CustomHeaders;
  clientCertificate?: ClientCertificateUpload | null;
  signatureScheme?: SignatureScheme;
  oauth?: OAuthClientUpload | null;
}

export const validateRegisterBody = compileBody<RegisterWebhookBody>(registerWebhookBodySchema);
export const validateUpdateBody = compileBody<UpdateWebhookBody>(updateWebhookBodySchema);
export const validateRotateSecretBody = compileBody<RotateSecretBody>(rotateSecretBodySchema);

import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import {
  MAX_PROJECT_ID_LENGTH,
  SAFE_ID_PATTERN,
  SAFE_ID_RULE,
  SUBSCRIBABLE_TYPES,
  isSafeId,
  type SubscribableType,
} from '../common/contract';
import {
  CUSTOM_HEADER_NAME_PATTERN,
  CUSTOM_HEADER_VALUE_PATTERN,
  MAX_CUSTOM_HEADERS,
  MAX_CUSTOM_HEADER_VALUE_LENGTH,
  RESERVED_HEADER_NAMES,
  RESERVED_HEADER_PATTERN,
  customHeaderProblems,
  type CustomHeaders,
} from '../common/custom-headers';
import {
  HTTPS_REQUIRED,
  MAX_WEBHOOK_URL_LENGTH,
  parseWebhookUrl,
  refusedScheme,
  type WebhookUrlPolicy,
} from '../common/webhook-url';
import {
  MAX_CLIENT_CERTIFICATE_PEM_LENGTH,
  inspectClientCertificate,
  type ClientCertificateInfo,
  type ClientCertificateUpload,
} from '../common/client-certificate';
import { InvalidParameterError, InvalidRequestError, type FieldError } from './errors';

// Plain JSON Schema objects (2020-12 compatible), exported as is so the OpenAPI document can reuse them.

export const projectIdSchema = {
  type: 'string',
  minLength: 1,
  maxLength: MAX_PROJECT_ID_LENGTH,
  pattern: SAFE_ID_PATTERN,
  description: `Project id: ${SAFE_ID_RULE}.`,
} as const;

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

export const registerWebhookBodySchema = {
  type: 'object',
  properties: {
    projectId: projectIdSchema,
    url: webhookUrlSchema,
    types: webhookTypesSchema,
    headers: customHeadersSchema,
    clientCertificate: clientCertificateSchema,
  },
  required: ['projectId', 'url', 'types'],
  additionalProperties: false,
} as const;

export const updateWebhookBodySchema = {
  type: 'object',
  properties: {
    projectId: projectIdSchema,
    url: webhookUrlSchema,
    types: webhookTypesSchema,
    headers: customHeadersSchema,
    clientCertificate: {
      ...clientCertificateSchema,
      type: ['object', 'null'],
      description: `${clientCertificateSchema.description} null removes it.`,
    },
  },
  required: ['projectId'],
  anyOf: [
    { required: ['url'] },
    { required: ['types'] },
    { required: ['headers'] },
    { required: ['clientCertificate'] },
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

export interface RegisterWebhookBody {
  projectId: string;
  url: string;
  types: SubscribableType[];
  headers?: CustomHeaders;
  clientCertificate?: ClientCertificateUpload;
}

export interface UpdateWebhookBody {
  projectId: string;
  url?: string;
  types?: SubscribableType[];
  headers?: CustomHeaders;
  clientCertificate?: ClientCertificateUpload | null;
}

// Union types: a PATCH's clientCertificate is an object, or null to remove it.
const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
addFormats(ajv, ['uri']);

/** A request body check: returns the typed body or throws InvalidRequestError listing every problem. */
export type BodyValidator<T> = (body: unknown, urlPolicy?: WebhookUrlPolicy) => T;

function fieldErrors(errors: ErrorObject[]): FieldError[] {
  const result: FieldError[] = [];
  for (const error of errors) {
    // "url, types or headers" is one rule; ajv reports it as each branch's miss plus the anyOf itself.
    if (error.schemaPath.startsWith('#/anyOf/')) continue;
    // A conditional rule's branch names the field it refuses; the `if` itself adds nothing.
    if (error.keyword === 'if') continue;
    const pointer = error.instancePath || '/';
    if (error.keyword === 'anyOf')
      result.push({ pointer, detail: 'must have at least one of url, types, headers and clientCertificate' });
    else if (error.keyword === 'pattern' && pointer === '/projectId')
      result.push({ pointer, detail: `must be ${SAFE_ID_RULE}` });
    else if (error.keyword === 'additionalProperties')
      result.push({ pointer, detail: `must NOT have additional property ${String(error.params.additionalProperty)}` });
    else result.push({ pointer, detail: error.message ?? 'is invalid' });
  }
  return result;
}

/** The facts of each certificate a validated body carried, found while validating (read them with certificateInfo). */
const certificates = new WeakMap<object, ClientCertificateInfo>();

/** The subject, expiry and fingerprint of a validated body's certificate upload. */
export function certificateInfo(upload: ClientCertificateUpload): ClientCertificateInfo {
  const info = certificates.get(upload);
  if (!info) throw new Error('the client certificate was not validated');
  return info;
}

export function compileBody<T extends object>(schema: object): BodyValidator<T> {
  const validate: ValidateFunction = ajv.compile(schema);
  const checksHeaders = 'headers' in ((schema as { properties?: object }).properties ?? {});
  const checksCertificate = 'clientCertificate' in ((schema as { properties?: object }).properties ?? {});
  return (body, urlPolicy = { httpsOnly: false }) => {
    let errors = validate(body) ? [] : fieldErrors(validate.errors ?? []);
    // The headers' rules, each problem naming the header, instead of the schema's patterns.
    const headers = (body as { headers?: unknown } | null)?.headers;
    if (checksHeaders && headers !== undefined && (errors.length > 0 || customHeaderProblems(headers).length > 0))
      errors = [...errors.filter((e) => !e.pointer.startsWith('/headers')), ...customHeaderProblems(headers)];
    const url = (body as { url?: unknown } | null)?.url;
    const urlFailed = errors.some((e) => e.pointer === '/url');
    const parsed = !urlFailed && typeof url === 'string' ? parseWebhookUrl(url) : undefined;
    if (!urlFailed && typeof url === 'string' && !parsed)
      errors.push({ pointer: '/url', detail: 'must be an absolute http or https URL without credentials' });
    if (parsed && refusedScheme(parsed, urlPolicy)) errors.push({ pointer: '/url', detail: HTTPS_REQUIRED });
    // A certificate the schema let through is checked for what a schema cannot see: PEM, validity, the key's match.
    const certificate = (body as { clientCertificate?: unknown } | null)?.clientCertificate;
    if (checksCertificate && certificate && !errors.some((e) => e.pointer.startsWith('/clientCertificate'))) {
      const inspected = inspectClientCertificate(certificate as ClientCertificateUpload);
      if ('problems' in inspected) errors.push(...inspected.problems);
      else certificates.set(certificate, inspected.info);
    }
    if (errors.length > 0) throw new InvalidRequestError(errors);
    return body as T;
  };
}

export const validateRegisterBody = compileBody<RegisterWebhookBody>(registerWebhookBodySchema);
export const validateUpdateBody = compileBody<UpdateWebhookBody>(updateWebhookBodySchema);
export const validateRotateSecretBody = compileBody<RotateSecretBody>(rotateSecretBodySchema);

/** A project id from the path: in the safe alphabet, else a 400 naming the parameter (it never reaches the database). */
export function projectIdParam(value: string | undefined): string {
  if (!isSafeId(value)) throw new InvalidParameterError('projectId', SAFE_ID_RULE);
  return value;
}

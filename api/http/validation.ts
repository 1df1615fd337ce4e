import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { MAX_PROJECT_ID_LENGTH, SAFE_ID_PATTERN, SAFE_ID_RULE, isSafeId } from '../../common/contract';
import { customHeaderProblems } from '../../common/registration/custom-headers';
import {
  HTTPS_REQUIRED,
  parseWebhookUrl,
  refusedScheme,
  type WebhookUrlPolicy,
} from '../../common/registration/webhook-url';
import {
  inspectClientCertificate,
  type ClientCertificateInfo,
  type ClientCertificateUpload,
} from '../../common/registration/client-certificate';
import { inspectOAuthClient, type OAuthClientUpload } from '../../common/registration/oauth-client';
import type { OAuthClientChange } from '../../db';
import { InvalidParameterError, InvalidRequestError, type FieldError } from './errors';

// Request bodies and path parameters checked the same way on every route: ajv with every problem listed, the field
// rules a schema cannot express (custom headers, URL policy, certificate contents), the project id of a path.

export const projectIdSchema = {
  type: 'string',
  minLength: 1,
  maxLength: MAX_PROJECT_ID_LENGTH,
  pattern: SAFE_ID_PATTERN,
  description: `Project id: ${SAFE_ID_RULE}.`,
} as const;

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
      result.push({
        pointer,
        detail: 'must have at least one of url, types, headers, clientCertificate, signatureScheme and oauth',
      });
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

/** The facts and credential of each OAuth client a validated body carried (read them with oauthClient). */
const oauthClients = new WeakMap<object, OAuthClientChange>();

/** A validated body's OAuth client, as stored: its facts and its secret or key. */
export function oauthClient(upload: OAuthClientUpload): OAuthClientChange {
  const change = oauthClients.get(upload);
  if (!change) throw new Error('the OAuth client was not validated');
  return change;
}

export function compileBody<T extends object>(schema: object): BodyValidator<T> {
  const validate: ValidateFunction = ajv.compile(schema);
  const checksHeaders = 'headers' in ((schema as { properties?: object }).properties ?? {});
  const checksCertificate = 'clientCertificate' in ((schema as { properties?: object }).properties ?? {});
  const checksOAuth = 'oauth' in ((schema as { properties?: object }).properties ?? {});
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
    // An OAuth client the schema let through: its token URL under the URL policy, its credential for its method.
    const oauth = (body as { oauth?: unknown } | null)?.oauth;
    if (checksOAuth && oauth && !errors.some((e) => e.pointer.startsWith('/oauth'))) {
      const inspected = inspectOAuthClient(oauth as OAuthClientUpload, urlPolicy);
      if ('problems' in inspected) errors.push(...inspected.problems);
      else oauthClients.set(oauth, inspected);
    }
    if (errors.length > 0) throw new InvalidRequestError(errors);
    return body as T;
  };
}

/** A project id from the path: in the safe alphabet, else a 400 naming the parameter (it never reaches the database). */
export function projectIdParam(value: string | undefined): string {
  if (!isSafeId(value)) throw new InvalidParameterError('projectId', SAFE_ID_RULE);
  return value;
}

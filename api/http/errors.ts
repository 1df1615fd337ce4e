import { STATUS_CODES } from 'node:http';
import type { Middleware } from 'koa';
import type { Logger } from '../../common/telemetry/logger';
import {
  UNAVAILABLE_RETRY_AFTER_S,
  loggableError,
  refusedDetail,
  temporalRefusal,
  unavailableDependency,
  unavailableDetail,
  type Dependency,
} from './dependency-errors';

/** The largest request body the API parses (a larger one is a 413). */
export const MAX_BODY = '100kb';

/** One field-level problem of an invalid request body: a JSON Pointer into the body and what is wrong there. */
export interface FieldError {
  pointer: string;
  detail: string;
}

/** An error the API answers with a known status; `detail` is shown to the caller as is. */
export class ApiError extends Error {
  /** Response headers that go with the problem (Retry-After of a 429). */
  headers: Record<string, string> = {};
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly extensions: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = new.target.name;
  }
}

export class InvalidRequestError extends ApiError {
  constructor(readonly errors: FieldError[]) {
    super(400, `The request body is invalid: ${errors.map((e) => `${e.pointer} ${e.detail}`).join('; ')}`, { errors });
  }
}

/** A path parameter outside its alphabet or length. */
export class InvalidParameterError extends ApiError {
  constructor(name: string, rule: string) {
    super(400, `The path parameter ${name} must be ${rule}`, {
      errors: [{ pointer: `/${name}`, detail: `must be ${rule}` }],
    });
  }
}

export class UnauthorizedError extends ApiError {
  constructor(detail = 'A valid bearer token is required') {
    super(401, detail);
  }
}

export class NotMemberError extends ApiError {
  constructor() {
    super(403, 'The caller is not a member of this project');
  }
}

export class ProjectNotFoundError extends ApiError {
  constructor(projectId: string) {
    super(404, `No project with id ${projectId} was found`);
  }
}

export class RegistrationNotFoundError extends ApiError {
  constructor(detail: string) {
    super(404, detail);
  }
}

/** A TEST event is not sent while the webhook is paused (other events are held until it resumes). */
export class WebhookPausedError extends ApiError {
  constructor() {
    super(409, 'The webhook is paused: resume it to send a test event');
  }
}

/** A key pair rotation asked of a webhook that signs with the secret only. */
export class SignatureSchemeConflictError extends ApiError {
  constructor() {
    super(409, 'The webhook signs with v1 (HMAC) only: choose signatureScheme v1a before rotating its signing key');
  }
}

export class RegistrationExistsError extends ApiError {
  constructor() {
    super(409, 'Webhook has already been registered previously');
  }
}

/** A project whose purge has not completed takes no new or changed registration: its customer's data is being removed. */
export class ProjectPurgingError extends ApiError {
  constructor(projectId: string, purgeId: string) {
    super(409, `Project ${projectId} is being purged (purge ${purgeId}): its webhook cannot be registered or changed`, {
      purgeId,
    });
  }
}

/** The receiver did not acknowledge the TEST event; `detail` names its status or error. */
export class TestDeliveryFailedError extends ApiError {
  constructor(detail: string, extensions: Record<string, unknown>) {
    super(502, detail, extensions);
  }
}

/** The database or Temporal does not answer: 503 with Retry-After, never a 500 or a hang. */
export class DependencyUnavailableError extends ApiError {
  constructor(readonly dependency: Dependency) {
    super(503, unavailableDetail(dependency));
  }
}

/** RFC 9457 problem details. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const problem = (status: number, detail: string, extensions: Record<string, unknown> = {}): Problem => ({
  type: 'about:blank',
  title: STATUS_CODES[status] ?? 'Error',
  status,
  detail,
  ...extensions,
});

/** What Koa, koa-jwt, co-body and the router throw: http-errors with a status. */
interface HttpLikeError {
  status?: number;
  statusCode?: number;
  expose?: boolean;
  type?: string;
  headers?: Record<string, string>;
  originalError?: Error;
}

/** Problem details for an error thrown by a library below us (never leaks an internal message). */
function fromHttpError(err: HttpLikeError): Problem | undefined {
  const status = err.status ?? err.statusCode;
  if (typeof status !== 'number' || status < 400 || status > 599) return undefined;
  switch (status) {
    case 400:
      // co-body's parser (bourne) refuses a __proto__ key at any depth: valid JSON, refused against prototype poisoning.
      return (err as Error).message === 'Object contains forbidden prototype property'
        ? problem(400, 'The request body holds a "__proto__" key, which the API refuses in any object of a body')
        : problem(400, 'The request body is not valid JSON');
    case 401:
      return problem(401, 'A valid bearer token is required');
    case 413:
      return problem(413, `The request body is larger than the limit of ${MAX_BODY}`);
    case 415:
      return problem(415, 'Request bodies must be JSON (Content-Type: application/json)');
    case 404:
      return problem(404, 'No such resource');
    case 405:
    case 501:
      return problem(status, 'This method is not allowed on this resource');
    default:
      return status < 500 ? problem(status, STATUS_CODES[status] ?? 'Request failed') : undefined;
  }
}

/**
 * First middleware below the request logger: turns every error into application/problem+json and logs it here,
 * since a caught error never reaches app.on('error').
 */
export function problemDetails(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      // Statuses set without a body (unknown route, 405 from the router) get a problem body too.
      if (ctx.status >= 400 && ctx.body == null) throw Object.assign(new Error(ctx.message), { status: ctx.status });
    } catch (caught) {
      const log = (ctx.state.log as Logger | undefined) ?? logger;
      let body: Problem;
      if (caught instanceof ApiError) {
        body = problem(caught.status, caught.detail, caught.extensions);
        if (caught.status === 503) ctx.set('Retry-After', String(UNAVAILABLE_RETRY_AFTER_S));
        for (const [name, value] of Object.entries(caught.headers)) ctx.set(name, value);
        log.info({ status: body.status, detail: body.detail }, 'request refused');
      } else {
        const err = caught as HttpLikeError;
        const known = fromHttpError(err);
        if (known) {
          body = known;
          // Why a token failed (expired, bad signature, wrong algorithm) helps operators; the token never logs. Other
          // library messages are not logged: a JSON parse error quotes the body, which may carry personal data.
          log.info({ status: body.status, authError: err.originalError?.message }, 'request refused');
          for (const [name, value] of Object.entries(err.headers ?? {})) ctx.set(name, value);
        } else if (unavailableDependency(caught)) {
          const dependency = unavailableDependency(caught)!;
          body = problem(503, unavailableDetail(dependency));
          ctx.set('Retry-After', String(UNAVAILABLE_RETRY_AFTER_S));
          log.warn({ dependency, err: loggableError(caught) }, 'dependency unavailable');
        } else if (temporalRefusal(caught)) {
          // Temporal answered, refusing (a namespace or task queue it does not take, a limit): the service's own
          // dependency, named, not an unexpected error.
          const refusal = temporalRefusal(caught)!;
          body = problem(503, refusedDetail(refusal));
          ctx.set('Retry-After', String(UNAVAILABLE_RETRY_AFTER_S));
          log.warn(
            {
              dependency: 'Temporal',
              grpcStatus: refusal.status,
              grpcCode: refusal.code,
              grpcDetails: refusal.details,
              err: loggableError(caught),
            },
            'Temporal refused the request',
          );
        } else {
          body = problem(500, 'An unexpected error occurred');
          log.error({ err: loggableError(caught) }, 'request failed');
        }
      }
      if (body.status === 401) ctx.set('WWW-Authenticate', 'Bearer');
      ctx.status = body.status;
      ctx.type = PROBLEM_CONTENT_TYPE;
      ctx.body = body;
    }
  };
}

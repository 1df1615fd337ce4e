import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/activity';
import { FailureType, type AttemptFailureDetails } from '../../common/contract';
import {
  signClientAssertion,
  tokenRequestTimeoutMs,
  tokenTimeoutMessage,
} from '../../common/registration/oauth-client';
import {
  HTTPS_REQUIRED,
  parseWebhookUrl,
  refusedScheme,
  webhookUrlPolicy,
} from '../../common/registration/webhook-url';
import { openOAuthCredential, type StoredOAuthClient } from '../../db';
import {
  ProxyUnavailableError,
  ReceiverTimeoutError,
  egressProxy,
  egressRouteTo,
  type WebhookHttpClient,
} from '../http/client';
import { ForbiddenTargetError } from '../http/ssrf';
import type { DeliveryOption } from './option';

/**
 * The registration's OAuth 2.0 client (client credentials grant, RFC 6749 section 4.4): a token from its token
 * endpoint, kept in this worker per registration and configuration until shortly before it expires, goes to the
 * receiver as `Authorization: Bearer`. A 401 drops it and the attempt sends once more with a fresh one. A token
 * endpoint that gives none fails the attempt as the endpoint's failure, naming the token endpoint's problem. The token
 * request goes through the worker's HTTP client: the SSRF guard and the egress proxy as for receivers, with a timeout
 * of its own (OAUTH_TOKEN_TIMEOUT_MS, less when the attempt's deadline is nearer).
 */
export const oauthClientCredentials: DeliveryOption = {
  name: 'oauth-client-credentials',
  setUp: ({ config, secretBox, http }) => {
    const routeTo = egressRouteTo(egressProxy(config));
    const policy = webhookUrlPolicy(config);
    const tokens = createTokenCache();
    return (registration, { log, attempt, deadlineMs }) => {
      const client = registration.oauth;
      if (!client) return undefined;
      const tokenUrl = parseWebhookUrl(client.tokenUrl);
      if (!tokenUrl || refusedScheme(tokenUrl, policy))
        throw ApplicationFailure.create({
          type: FailureType.InvalidUrl,
          message: `The registered OAuth token URL ${tokenUrl ? HTTPS_REQUIRED : 'is not an http(s) URL without credentials'}`,
          nonRetryable: true,
        });
      let credential: string;
      try {
        credential = openOAuthCredential(secretBox, { id: registration.id, oauth: client });
      } catch {
        log.error('cannot open the OAuth client credential: is WEBHOOK_SECRET_KEY the one it was sealed with?');
        throw ApplicationFailure.create({
          type: FailureType.SecretUnavailable,
          message: 'The webhook OAuth client secret or key could not be opened with this worker’s WEBHOOK_SECRET_KEY',
        });
      }
      // A PATCH changes the configuration, and so the token kept: never the secret itself, only its digest.
      const fingerprint = createHash('sha256')
        .update(JSON.stringify([client.tokenUrl, client.clientId, client.clientAuthentication, client.scope]))
        .update(JSON.stringify([client.keyId, credential]))
        .digest('hex');
      const fetchToken = async () => {
        const started = Date.now();
        // Its own timeout: at most OAUTH_TOKEN_TIMEOUT_MS, and never past the attempt's deadline.
        const timeoutMs = tokenRequestTimeoutMs(started, deadlineMs);
        try {
          const answer = await requestToken(http, client, credential, tokenUrl, {
            route: routeTo(tokenUrl),
            timeoutMs,
          });
          log.debug({ tokenHost: tokenUrl.host, expiresIn: answer.expiresIn }, 'OAuth token obtained');
          return { accessToken: answer.accessToken, usableUntil: tokenUsableUntil(started, answer.expiresIn) };
        } catch (error) {
          throw tokenFailure(error, Date.now() - started, timeoutMs);
        }
      };
      let given: string | undefined;
      return {
        authorization: {
          async headers() {
            try {
              given = await tokens.get(registration.id, fingerprint, fetchToken);
            } catch (error) {
              if (!(error instanceof TokenRequestError)) throw error;
              log.warn(
                { tokenHost: tokenUrl.host, errorCode: error.errorCode, durationMs: error.durationMs },
                'webhook delivery attempt failed: OAuth token endpoint',
              );
              throw error.failure(attempt);
            }
            return { authorization: `Bearer ${given}` };
          },
          refresh(statusCode) {
            if (statusCode !== 401 || given === undefined) return false;
            tokens.drop(registration.id, given);
            return true;
          },
        },
      };
    };
  },
};

/** A token is used until this long before it expires at most; a tenth of its life when that is shorter. */
export const REFRESH_MARGIN_MS = 30_000;
/** How long a token answered without expires_in is used (a 401 has it replaced sooner). */
export const DEFAULT_TOKEN_LIFETIME_MS = 300_000;

/**
 * Until when a token obtained by a request sent at `requestedAtMs` is used. expires_in counts whole seconds from an
 * issue time the server may have rounded down: the token may end up to a second sooner than it says.
 */
export function tokenUsableUntil(requestedAtMs: number, expiresInSeconds: number | undefined): number {
  const lifetimeMs =
    expiresInSeconds !== undefined && Number.isFinite(expiresInSeconds) && expiresInSeconds > 0
      ? Math.max(0, expiresInSeconds - 1) * 1000
      : DEFAULT_TOKEN_LIFETIME_MS;
  return requestedAtMs + lifetimeMs - Math.min(REFRESH_MARGIN_MS, lifetimeMs / 10);
}

/** Registrations whose token is kept; beyond this, the least recently fetched is forgotten. */
const MAX_KEPT_TOKENS = 10_000;

interface KeptToken {
  fingerprint: string;
  token?: string;
  usableUntil: number;
  /** The request in flight: attempts arriving meanwhile wait for it rather than ask again. */
  pending?: Promise<string>;
}

/** The worker's tokens, one per registration and configuration, shared by every attempt and delivery. */
export function createTokenCache(now: () => number = Date.now) {
  const kept = new Map<string, KeptToken>();
  return {
    /** The registration's token for this configuration: kept while usable, else fetched (once for all who ask). */
    get(
      registrationId: string,
      fingerprint: string,
      fetch: () => Promise<{ accessToken: string; usableUntil: number }>,
    ): Promise<string> {
      const entry = kept.get(registrationId);
      if (entry?.fingerprint === fingerprint) {
        if (entry.pending) return entry.pending;
        if (entry.token !== undefined && now() < entry.usableUntil) return Promise.resolve(entry.token);
      }
      const fresh: KeptToken = { fingerprint, usableUntil: 0 };
      fresh.pending = fetch().then(
        ({ accessToken, usableUntil }) => {
          Object.assign(fresh, { token: accessToken, usableUntil, pending: undefined });
          return accessToken;
        },
        (error: unknown) => {
          if (kept.get(registrationId) === fresh) kept.delete(registrationId);
          throw error;
        },
      );
      kept.delete(registrationId);
      kept.set(registrationId, fresh);
      const [oldest] = kept.keys();
      if (kept.size > MAX_KEPT_TOKENS && oldest !== undefined) kept.delete(oldest);
      return fresh.pending;
    },
    /** The receiver refused `token`: forgotten, unless another attempt has already replaced it. */
    drop(registrationId: string, token: string): void {
      if (kept.get(registrationId)?.token === token) kept.delete(registrationId);
    },
  };
}

/** A token request that gave no token, in words members read and without any secret. */
class TokenRequestError extends Error {
  constructor(
    message: string,
    readonly type: string,
    readonly errorCode: string,
    readonly durationMs: number,
    readonly nonRetryable = false,
  ) {
    super(message);
  }

  /** As the failure of the attempt numbered `attempt`. */
  failure(attempt: number): ApplicationFailure {
    const { durationMs, errorCode } = this;
    return ApplicationFailure.create({
      type: this.type,
      message: this.message,
      nonRetryable: this.nonRetryable,
      details: [{ attempt, durationMs, errorCode } satisfies AttemptFailureDetails],
    });
  }
}

/** What the token endpoint answered: a token, or what went wrong. */
export type TokenAnswer = { accessToken: string; expiresIn?: number } | { problem: string; errorCode: string };

/** An OAuth error code or token type quoted in a failure: RFC 6749's characters, short. */
const QUOTABLE = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,64}$/;

/** RFC 6749 sections 5.1 and 5.2: the access token and its lifetime, or the endpoint's error code. */
export function readTokenAnswer(statusCode: number, body: string | undefined): TokenAnswer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body ?? '');
  } catch {
    parsed = undefined;
  }
  const fields = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  if (statusCode < 200 || statusCode >= 300) {
    const error = typeof fields.error === 'string' && QUOTABLE.test(fields.error) ? `: ${fields.error}` : '';
    return {
      problem: `OAuth token endpoint answered HTTP ${statusCode}${error}`,
      errorCode: `OAUTH_TOKEN_HTTP_${statusCode}`,
    };
  }
  const accessToken = fields.access_token;
  // Sent as a header: visible ASCII only.
  if (typeof accessToken !== 'string' || !/^[\x21-\x7E]+$/.test(accessToken))
    return {
      problem: `OAuth token endpoint answered HTTP ${statusCode} without an access_token`,
      errorCode: 'OAUTH_TOKEN_MISSING',
    };
  const tokenType = fields.token_type;
  if (typeof tokenType === 'string' && tokenType.toLowerCase() !== 'bearer')
    return {
      problem: `OAuth token endpoint issued a token of type ${QUOTABLE.test(tokenType) ? tokenType : 'unknown'}, not Bearer`,
      errorCode: 'OAUTH_TOKEN_TYPE',
    };
  const expiresIn = Number(fields.expires_in);
  return { accessToken, ...(fields.expires_in !== undefined && Number.isFinite(expiresIn) && { expiresIn }) };
}

/** RFC 6749 section 2.3.1: the client id and secret form-encoded before they are joined for Basic. */
const formEncoded = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);

/** One token request: a form POST of grant_type=client_credentials, the client authenticated as configured. */
async function requestToken(
  http: WebhookHttpClient,
  client: StoredOAuthClient,
  credential: string,
  tokenUrl: URL,
  { route, timeoutMs }: { route: ReturnType<ReturnType<typeof egressRouteTo>>; timeoutMs: number },
): Promise<{ accessToken: string; expiresIn?: number }> {
  const started = Date.now();
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (client.scope !== null) form.set('scope', client.scope);
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
    'user-agent': 'webhook-delivery-service',
  };
  if (client.clientAuthentication === 'client_secret_basic')
    headers.authorization = `Basic ${Buffer.from(`${formEncoded(client.clientId)}:${formEncoded(credential)}`).toString('base64')}`;
  else if (client.clientAuthentication === 'client_secret_post') {
    form.set('client_id', client.clientId);
    form.set('client_secret', credential);
  } else {
    form.set('client_assertion_type', 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
    form.set('client_assertion', signClientAssertion({ ...client, privateKey: credential }));
  }
  const response = await http.post(tokenUrl, headers, form.toString(), { route }, { readBody: true, timeoutMs });
  const answer = readTokenAnswer(response.statusCode, response.body);
  if ('problem' in answer)
    throw new TokenRequestError(
      answer.problem,
      FailureType.ReceiverUnreachable,
      answer.errorCode,
      Date.now() - started,
    );
  return answer;
}

/** A token request that failed before any answer, as the SSRF guard, the proxy or the connection saw it. */
function tokenFailure(error: unknown, durationMs: number, timeoutMs: number): TokenRequestError {
  if (error instanceof TokenRequestError) return error;
  if (error instanceof ForbiddenTargetError)
    return new TokenRequestError(
      `Refused to request an OAuth token: the token URL leads to a ${error.category}, which webhook receivers may ` +
        'not use (set ALLOW_PRIVATE_WEBHOOK_URLS=true for local development)',
      FailureType.TargetForbidden,
      error.code,
      durationMs,
      true,
    );
  if (error instanceof ProxyUnavailableError)
    return new TokenRequestError(
      `${error.message} (OAuth token request)`,
      FailureType.ProxyUnavailable,
      error.code,
      durationMs,
    );
  if (error instanceof ReceiverTimeoutError)
    return new TokenRequestError(
      tokenTimeoutMessage(timeoutMs),
      FailureType.ReceiverUnreachable,
      'OAUTH_TOKEN_TIMEOUT',
      durationMs,
    );
  let code = 'UNKNOWN';
  for (let current = error; current instanceof Error; current = current.cause) {
    const found = (current as { code?: unknown }).code;
    if (typeof found === 'string' && found.length > 0) {
      code = found;
      break;
    }
    code = current.name;
  }
  return new TokenRequestError(
    `OAuth token endpoint unreachable: ${code}`,
    FailureType.ReceiverUnreachable,
    `OAUTH_TOKEN_${code}`,
    durationMs,
  );
}

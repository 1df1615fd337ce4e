import { Agent, EnvHttpProxyAgent, Pool, buildConnector, errors, type Dispatcher } from 'undici';
import { ForbiddenTargetError, createGuardedConnector, guardTarget } from './ssrf';

/** How much of a receiver's answer is read before the connection is dropped; the body is discarded. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

export interface ReceiverResponse {
  statusCode: number;
  /** The Retry-After header, when the receiver sent one. */
  retryAfter?: string;
}

/** A keep-alive HTTP client for deliveries: no redirects, a whole-attempt timeout, the SSRF guard on connect. */
export interface WebhookHttpClient {
  post(url: URL, headers: Record<string, string>, body: string): Promise<ReceiverResponse>;
  close(): Promise<void>;
}

/** The worker's egress proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY); no proxy when neither URL is set. */
export interface EgressProxy {
  httpsProxy?: string;
  httpProxy?: string;
  noProxy?: string;
}

/** The egress proxy a config names (HTTPS_PROXY, HTTP_PROXY, NO_PROXY): the worker's and the tests' alike. */
export const egressProxy = (config: { HTTPS_PROXY?: string; HTTP_PROXY?: string; NO_PROXY?: string }): EgressProxy => ({
  httpsProxy: config.HTTPS_PROXY,
  httpProxy: config.HTTP_PROXY,
  noProxy: config.NO_PROXY,
});

/** A proxy URL fit for a log line: its origin, without the credentials it may carry. */
export function proxyOrigin(proxyUrl: string | undefined): string | undefined {
  if (!proxyUrl) return undefined;
  try {
    return new URL(proxyUrl).origin;
  } catch {
    return 'unparseable';
  }
}

/** The attempt took longer than the per-attempt timeout (connect, headers and body included). */
export class ReceiverTimeoutError extends Error {
  override name = 'ReceiverTimeoutError';
  readonly code = 'TIMEOUT';
}

/**
 * The egress proxy did not carry the attempt: it refused the tunnel (407 without or with wrong credentials, 403 by
 * its policy, 502/503/504 when it could not or would not reach the receiver) or could not be reached itself. Counted
 * against the proxy, not the receiver: the receiver's breaker does not count it.
 */
export class ProxyUnavailableError extends Error {
  override name = 'ProxyUnavailableError';
  /** PROXY_<status> for a refused tunnel, else PROXY_ and the connection's error code (PROXY_ECONNREFUSED, …). */
  readonly code: string;
  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** The proxy's answer to CONNECT, as undici words it (proxy-agent.js). */
const PROXY_STATUS = /^Proxy response \((\d{3})\) !== 200/;

export function createWebhookHttpClient(options: {
  timeoutMs: number;
  allowPrivate: boolean;
  proxy?: EgressProxy;
}): WebhookHttpClient {
  const connector = createGuardedConnector(options);
  const agentOptions = {
    connect: connector,
    keepAliveTimeout: 30_000,
    connections: 32,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  };
  const proxy = options.proxy;
  const proxied = Boolean(proxy?.httpsProxy || proxy?.httpProxy);
  // Without a proxy the plain agent, as before. With one, undici's EnvHttpProxyAgent on the configured values (never
  // the process environment's): NO_PROXY hosts go through the guarded connector directly, the others are tunnelled
  // (CONNECT) through the proxy, whose own connection is tagged so its failures are told apart from the receiver's.
  const dispatcher: Dispatcher = proxied
    ? new EnvHttpProxyAgent({
        ...agentOptions,
        httpProxy: proxy?.httpProxy ?? '',
        httpsProxy: proxy?.httpsProxy ?? proxy?.httpProxy ?? '',
        noProxy: proxy?.noProxy ?? '',
        clientFactory: (origin, clientOptions) =>
          new Pool(origin, { ...clientOptions, connect: tagProxyFailures(options.timeoutMs) }),
      })
    : new Agent(agentOptions);
  return {
    async post(url, headers, body) {
      const controller = new AbortController();
      const timeoutError = new ReceiverTimeoutError(`Receiver did not answer within ${options.timeoutMs} ms`);
      const timer = setTimeout(() => controller.abort(timeoutError), options.timeoutMs);
      try {
        // The proxy resolves and connects to the target itself, past the guarded connector: the target is resolved and
        // checked here first, so a forbidden one is refused before the proxy is asked for anything.
        if (proxied && !options.allowPrivate) await guardTarget(url.hostname);
        // Dispatcher.request does not follow redirects: a 3xx comes back as a status like any other.
        const response = await dispatcher.request({
          origin: url.origin,
          path: url.pathname + url.search,
          method: 'POST',
          headers,
          body,
          signal: controller.signal,
        });
        await response.body.dump({ limit: MAX_RESPONSE_BYTES }).catch(() => undefined);
        const retryAfter = response.headers['retry-after'];
        return { statusCode: response.statusCode, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter };
      } catch (error) {
        if (error instanceof ForbiddenTargetError) throw error;
        if (controller.signal.aborted) throw timeoutError;
        if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) throw timeoutError;
        throw unwrapForbidden(error) ?? (proxied ? proxyFailure(error) : undefined) ?? error;
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => dispatcher.close(),
  };
}

/** A connector to the proxy that marks its failures (refused, reset, DNS, timeout) as the proxy's. */
function tagProxyFailures(timeoutMs: number): buildConnector.connector {
  const base = buildConnector({ timeout: timeoutMs });
  return (connectOptions, callback) =>
    base(connectOptions, (error, socket) => {
      if (!error) return callback(null, socket);
      const code = errorCode(error);
      callback(new ProxyUnavailableError(`Egress proxy unreachable: ${code}`, `PROXY_${code}`, { cause: error }), null);
    });
}

function proxyFailure(error: unknown): ProxyUnavailableError | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof ProxyUnavailableError) return current;
    const status = PROXY_STATUS.exec(current.message)?.[1];
    if (status)
      return new ProxyUnavailableError(`Egress proxy refused the tunnel: HTTP ${status}`, `PROXY_${status}`, {
        cause: error,
      });
  }
  return undefined;
}

function errorCode(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.length > 0 ? code : error.name;
}

function unwrapForbidden(error: unknown): ForbiddenTargetError | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof ForbiddenTargetError) return current;
  }
  return undefined;
}

import { Agent, Pool, buildConnector, errors, type Dispatcher } from 'undici';
import type { LookupFunction, Socket } from 'node:net';
import { rootCertificates } from 'node:tls';
import { ForbiddenTargetError, createGuardedConnector, resolveTarget, type ConnectionTls } from './ssrf';

/** How much of a receiver's answer is read before the connection is dropped; the body is discarded. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

export interface ReceiverResponse {
  statusCode: number;
  /** The Retry-After header, when the receiver sent one. */
  retryAfter?: string;
  /** The answer's body as UTF-8, its first MAX_RESPONSE_BYTES: only when asked for (a token endpoint's JSON). */
  body?: string;
}

/** What a request wants back beside the status. */
export interface RequestOptions {
  /** Read the body (at most MAX_RESPONSE_BYTES) instead of discarding it. */
  readBody?: boolean;
  /** This request's own timeout (a token request's), instead of the client's; the connection's stays the client's. */
  timeoutMs?: number;
}

/** A keep-alive HTTP client for deliveries: no redirects, a whole-attempt timeout, the SSRF guard on connect. */
export interface WebhookHttpClient {
  post(
    url: URL,
    headers: Record<string, string>,
    body: string,
    connection?: ReceiverConnection,
    options?: RequestOptions,
  ): Promise<ReceiverResponse>;
  close(): Promise<void>;
}

/** How a request's connection reaches the receiver: what a delivery's options decide (activities/delivery-options). */
export interface ReceiverConnection {
  /** Presented in the TLS handshake; none unless given. */
  clientCertificate?: ClientCertificate;
  /** Direct or through an egress proxy; the client's own proxy setting decides when not given (notices, alerts). */
  route?: EgressRoute;
}

/** Straight to the receiver, or tunnelled (CONNECT) through the egress proxy at this URL. */
export type EgressRoute = 'direct' | { proxy: string };

/** A registration's client certificate, presented in the TLS handshake to receivers that require mutual TLS. */
export interface ClientCertificate {
  /** Names the pair (registration and fingerprint): one pool of connections per pair, kept while in use. */
  id: string;
  /** PEM: the certificate, intermediates after it. */
  certificate: string;
  /** Opens the sealed key, once per pool (not per attempt). */
  privateKey: () => string;
}

/** The receiver refused the TLS handshake with an alert (certificate required, expired, unknown CA, …). */
export class TlsAlertError extends Error {
  override name = 'TlsAlertError';
  constructor(readonly code: string) {
    super(`TLS handshake refused: ${code}`);
  }
}

/** Pools kept, one per route and client certificate: beyond this, the least recently used one is closed. */
const MAX_CERTIFICATE_POOLS = 256;

/** The worker's egress proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY); no proxy when neither URL is set. */
export interface EgressProxy {
  httpsProxy?: string;
  httpProxy?: string;
  noProxy?: string;
}

/** The route to a receiver's URL under this egress proxy setting: HTTPS_PROXY, HTTP_PROXY and NO_PROXY. */
export function egressRouteTo(proxy: EgressProxy): (url: URL) => EgressRoute {
  const proxyFor = egressRoutes(proxy);
  return ({ protocol, host, hostname, port }) => {
    // As undici's Client hands its connector the URL: the host with its port, the name without brackets.
    const proxyUrl = proxyFor({ protocol, host, hostname: hostname.replace(/^\[(.*)\]$/, '$1'), port });
    return proxyUrl ? { proxy: proxyUrl } : 'direct';
  };
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

export function createWebhookHttpClient(options: {
  timeoutMs: number;
  allowPrivate: boolean;
  proxy?: EgressProxy;
  /** CAs trusted beside Node's own, for receivers whose certificate a private CA signed (tests use their own). */
  trustedCa?: string[];
  /** How receivers' host names are resolved: dns.lookup unless a test gives its own. */
  lookup?: LookupFunction;
}): WebhookHttpClient {
  const alerts = createTlsAlerts();
  const ca: ConnectionTls = options.trustedCa?.length ? { ca: [...rootCertificates, ...options.trustedCa] } : {};
  const dispatchers = new Map<string, Dispatcher>();
  /** The pool for this route and no client certificate, or this one; made on first use. */
  const dispatcherFor = (route: EgressRoute, certificate?: ClientCertificate): Dispatcher => {
    const through = route === 'direct' ? 'direct' : `proxy:${route.proxy}`;
    const id = certificate ? `${through} client-certificate:${certificate.id}` : through;
    let dispatcher = dispatchers.get(id);
    if (dispatcher) {
      // Most recently used last: the first entry is the one to close when there are too many.
      dispatchers.delete(id);
    } else {
      const tls = { ...ca, ...(certificate && { cert: certificate.certificate, key: certificate.privateKey() }) };
      const connect =
        route === 'direct' ? createGuardedConnector({ ...options, tls }) : tunnels.connector(route.proxy, tls);
      dispatcher = createDispatcher(options.timeoutMs, alerts.recording(connect));
      const [oldest] = dispatchers.keys();
      if (dispatchers.size >= MAX_CERTIFICATE_POOLS && oldest !== undefined) {
        void dispatchers.get(oldest)?.close();
        dispatchers.delete(oldest);
      }
    }
    dispatchers.set(id, dispatcher);
    return dispatcher;
  };
  const defaultRoute = egressRouteTo(options.proxy ?? {});
  const tunnels = createEgressTunnels(options);
  return {
    async post(url, headers, body, connection = {}, requestOptions = {}) {
      const route = connection.route ?? defaultRoute(url);
      const controller = new AbortController();
      const timeoutMs = requestOptions.timeoutMs ?? options.timeoutMs;
      const timeoutError = new ReceiverTimeoutError(`Receiver did not answer within ${timeoutMs} ms`);
      const timer = setTimeout(() => controller.abort(timeoutError), timeoutMs);
      try {
        // Dispatcher.request does not follow redirects: a 3xx comes back as a status like any other.
        const response = await dispatcherFor(route, connection.clientCertificate).request({
          origin: url.origin,
          path: url.pathname + url.search,
          method: 'POST',
          headers,
          body,
          signal: controller.signal,
          ...(requestOptions.timeoutMs !== undefined && { headersTimeout: timeoutMs, bodyTimeout: timeoutMs }),
        });
        const text = requestOptions.readBody ? await readLimited(response.body, MAX_RESPONSE_BYTES) : undefined;
        if (text === undefined) await response.body.dump({ limit: MAX_RESPONSE_BYTES }).catch(() => undefined);
        const retryAfter = response.headers['retry-after'];
        return {
          statusCode: response.statusCode,
          retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          ...(text !== undefined && { body: text }),
        };
      } catch (error) {
        if (error instanceof ForbiddenTargetError) throw error;
        if (controller.signal.aborted) throw timeoutError;
        if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) throw timeoutError;
        const proxied = route !== 'direct';
        throw unwrapForbidden(error) ?? (proxied ? proxyFailure(error) : undefined) ?? alerts.behind(error) ?? error;
      } finally {
        clearTimeout(timer);
      }
    },
    close: async () => {
      await Promise.all([...dispatchers.values()].map((dispatcher) => dispatcher.close()));
      dispatchers.clear();
      await tunnels.close();
    },
  };
}

/** The body's first `limit` bytes as UTF-8; the rest is not read (the connection is dropped). */
async function readLimited(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

/** One pool of keep-alive connections made by `connect`: direct, or through one egress proxy. */
function createDispatcher(timeoutMs: number, connect: buildConnector.connector): Dispatcher {
  return new Agent({
    connect,
    keepAliveTimeout: 30_000,
    connections: 32,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

/**
 * Connections through the egress proxy. The worker resolves the receiver's host and checks the address (the SSRF
 * guard), then asks the proxy for a tunnel (CONNECT) to that address: never to the name, which the proxy would resolve
 * again, perhaps to an internal address (DNS rebinding, split-horizon DNS). TLS inside the tunnel is the receiver's,
 * with SNI and the certificate check on its name; http:// receivers are tunnelled alike, with Host the name.
 */
function createEgressTunnels(options: { timeoutMs: number; allowPrivate: boolean; lookup?: LookupFunction }) {
  const proxies = new Map<string, { pool: Pool; authorization?: string }>();
  /** The connections to one proxy, tagged so that their failures are told apart from the receiver's. */
  const proxyClient = (proxyUrl: string) => {
    let proxy = proxies.get(proxyUrl);
    if (!proxy) {
      const { origin, username, password } = new URL(proxyUrl);
      const credentials = `${decodeURIComponent(username)}:${decodeURIComponent(password)}`;
      proxy = {
        pool: new Pool(origin, { connect: tagProxyFailures(proxyConnectTimeoutMs(options.timeoutMs)) }),
        ...(username && password && { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` }),
      };
      proxies.set(proxyUrl, proxy);
    }
    return proxy;
  };
  /** A socket tunnelled to the checked address of the receiver's host. */
  const tunnel = async (proxyUrl: string, { hostname, protocol, port }: buildConnector.Options): Promise<Socket> => {
    const target = await resolveTarget(hostname, options);
    const address = target.family === 6 ? `[${target.address}]` : target.address;
    const authority = `${address}:${port || DEFAULT_PORTS[protocol]}`;
    const proxy = proxyClient(proxyUrl);
    const { socket: tunnelled, statusCode } = await proxy.pool.connect({
      path: authority,
      headers: { host: authority, ...(proxy.authorization && { 'proxy-authorization': proxy.authorization }) },
    });
    // A CONNECT's socket is the connection's own net.Socket (a TLSSocket to an https:// proxy).
    const socket = tunnelled as Socket;
    if (statusCode !== 200) {
      socket.on('error', () => undefined).destroy();
      throw new ProxyUnavailableError(`Egress proxy refused the tunnel: HTTP ${statusCode}`, `PROXY_${statusCode}`);
    }
    return socket;
  };
  return {
    /** Connections through the proxy at `proxyUrl`, the receiver's TLS (these options) inside the tunnel. */
    connector(proxyUrl: string, tls: ConnectionTls): buildConnector.connector {
      const receiverTls = buildConnector({ timeout: options.timeoutMs, ...tls });
      return (connectOptions, callback) => {
        void tunnel(proxyUrl, connectOptions).then(
          (socket) =>
            connectOptions.protocol === 'https:'
              ? receiverTls({ ...connectOptions, httpSocket: socket }, callback)
              : callback(null, socket),
          (error: Error) => callback(error, null),
        );
      };
    },
    close: async () => {
      await Promise.all([...proxies.values()].map(({ pool }) => pool.close()));
      proxies.clear();
    },
  };
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** The proxy that carries a connection, if any: HTTPS_PROXY, HTTP_PROXY and NO_PROXY as undici's EnvHttpProxyAgent. */
export function egressRoutes(proxy: EgressProxy): (connectOptions: buildConnector.Options) => string | undefined {
  const httpProxy = proxy.httpProxy || undefined;
  const httpsProxy = proxy.httpsProxy || httpProxy;
  const noProxy = proxy.noProxy ?? '';
  const entries = noProxy
    .split(/[,\s]/)
    .filter(Boolean)
    .map((entry) => {
      const [, name = entry, port] = /^(.+):(\d+)$/.exec(entry) ?? [];
      // A leading dot or "*." names the domain and its subdomains.
      return { hostname: name.replace(/^\*?\./, '').toLowerCase(), port: Number(port ?? 0) };
    });
  return ({ protocol, host, hostname, port }) => {
    const proxyUrl = protocol === 'https:' ? httpsProxy : httpProxy;
    if (!proxyUrl || noProxy === '*') return undefined;
    // Without the port, an IPv6 literal in its brackets.
    const name = (host ?? hostname).replace(/:\d*$/, '').toLowerCase();
    const portNumber = Number(port) || DEFAULT_PORTS[protocol] || 0;
    const bypassed = entries.some(
      (entry) =>
        (!entry.port || entry.port === portNumber) && (name === entry.hostname || name.endsWith(`.${entry.hostname}`)),
    );
    return bypassed ? undefined : proxyUrl;
  };
}

/**
 * Under TLS 1.3 a receiver refuses a client certificate (or its absence) after the handshake, with an alert that undici
 * reports as "other side closed". The connector records each connection's alert by its local port, so the attempt's
 * failure can name it (certificate required, expired, unknown CA) instead.
 */
function createTlsAlerts() {
  const byPort = new Map<number, string>();
  return {
    recording(connector: buildConnector.connector): buildConnector.connector {
      return (connectOptions, callback) =>
        connector(connectOptions, (error, socket) => {
          const port = socket?.localPort;
          if (socket && port !== undefined)
            socket.once('error', (socketError: Error & { code?: string }) => {
              if (!socketError.code?.startsWith('ERR_SSL_')) return;
              byPort.set(port, socketError.code);
              // Read by the failing request at once; never kept beyond that.
              setTimeout(() => byPort.delete(port), 5_000).unref();
            });
          if (error) callback(error, null);
          else callback(null, socket);
        });
    },
    /** The TLS alert a failed request's connection received, if any. */
    behind(error: unknown): TlsAlertError | undefined {
      const port = (error as { socket?: { localPort?: number } } | undefined)?.socket?.localPort;
      const code = port === undefined ? undefined : byPort.get(port);
      return code ? new TlsAlertError(code) : undefined;
    },
  };
}

/**
 * How long the connection to the proxy itself may take: well inside the attempt's timeout, which starts first, so a
 * proxy host that drops packets fails as the proxy's timeout (PROXY_UND_ERR_CONNECT_TIMEOUT), never as the receiver's.
 */
const proxyConnectTimeoutMs = (attemptTimeoutMs: number) => Math.min(5_000, Math.floor(attemptTimeoutMs / 2));

/** A connector to the proxy that marks its failures (refused, reset, DNS, timeout) as the proxy's. */
function tagProxyFailures(timeoutMs: number): buildConnector.connector {
  // undici's own connect timeout runs on timers of about a second's resolution: near the attempt's timeout it can fire
  // after it. A timer of Node's own ends a connection still not made on time, so the proxy's timeout always comes first.
  const base = buildConnector({ timeout: timeoutMs * 2 });
  return (connectOptions, callback) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const settle: buildConnector.Callback = (...[error, socket]) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!error) return callback(null, socket);
      const code = errorCode(error);
      callback(new ProxyUnavailableError(`Egress proxy unreachable: ${code}`, `PROXY_${code}`, { cause: error }), null);
    };
    // The connector returns the socket it is connecting (its type says void).
    const connecting = base(connectOptions, settle) as unknown as Socket | undefined;
    // Set after the call: a connector that fails at once has settled already, and clears no timer of its own.
    if (!settled)
      timer = setTimeout(() => {
        settle(new errors.ConnectTimeoutError(), null);
        connecting?.destroy();
      }, timeoutMs);
    return connecting;
  };
}

function proxyFailure(error: unknown): ProxyUnavailableError | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof ProxyUnavailableError) return current;
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

import { Agent, errors } from 'undici';
import { ForbiddenTargetError, createGuardedConnector } from './ssrf';

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

/** The attempt took longer than the per-attempt timeout (connect, headers and body included). */
export class ReceiverTimeoutError extends Error {
  override name = 'ReceiverTimeoutError';
  readonly code = 'TIMEOUT';
}

export function createWebhookHttpClient(options: { timeoutMs: number; allowPrivate: boolean }): WebhookHttpClient {
  const agent = new Agent({
    connect: createGuardedConnector(options),
    keepAliveTimeout: 30_000,
    connections: 32,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  });
  return {
    async post(url, headers, body) {
      const controller = new AbortController();
      const timeoutError = new ReceiverTimeoutError(`Receiver did not answer within ${options.timeoutMs} ms`);
      const timer = setTimeout(() => controller.abort(timeoutError), options.timeoutMs);
      try {
        // Dispatcher.request does not follow redirects: a 3xx comes back as a status like any other.
        const response = await agent.request({
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
        if (controller.signal.aborted) throw timeoutError;
        if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) throw timeoutError;
        throw unwrapForbidden(error) ?? error;
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => agent.close(),
  };
}

function unwrapForbidden(error: unknown): ForbiddenTargetError | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof ForbiddenTargetError) return current;
  }
  return undefined;
}

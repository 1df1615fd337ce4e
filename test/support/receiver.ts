import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The bytes on the wire, before any parsing. */
  rawBody: Buffer;
  /** Receiver clock when the request arrived. */
  receivedAt: number;
  /** The TLS server name (SNI) the client asked for, over https; undefined over http or without SNI. */
  servername?: string;
}

export interface ScriptedResponse {
  status?: number;
  /** Wait this long before answering. */
  delayMs?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface TestReceiver {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** Responses for the next requests, in order; afterwards `fallback` (200 by default). */
  script(...responses: ScriptedResponse[]): void;
  fallback: ScriptedResponse;
  /** Resolves once `count` requests have arrived. */
  waitForRequests(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/**
 * This test's own HMAC check, independent of common/crypto/signature.ts: HMAC-SHA256 over the timestamp header, a dot
 * and the raw received bytes, compared with X-Signature.
 */
export function independentSignatureValid(secret: string, request: ReceivedRequest): boolean {
  const timestamp = request.headers['x-timestamp'];
  const signature = request.headers['x-signature'];
  if (typeof timestamp !== 'string' || typeof signature !== 'string') return false;
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(Buffer.concat([Buffer.from(timestamp, 'ascii'), Buffer.from('.'), request.rawBody]));
  const expected = Buffer.from(mac.digest('hex'), 'ascii');
  const actual = Buffer.from(signature, 'ascii');
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** A real HTTP receiver on 127.0.0.1 recording every request and answering from a script; https with `tls`. */
export async function startTestReceiver(
  tls?: Pick<ServerOptions, 'key' | 'cert' | 'ca' | 'requestCert' | 'rejectUnauthorized'>,
): Promise<TestReceiver> {
  const requests: ReceivedRequest[] = [];
  const queue: ScriptedResponse[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const receiver = { fallback: { status: 200 } as ScriptedResponse };
  const listener = (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      requests.push({
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        rawBody: Buffer.concat(chunks),
        receivedAt: Date.now(),
        servername: (request.socket as Partial<TLSSocket>).servername || undefined,
      });
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) waiter.resolve();
      const scripted = queue.shift() ?? receiver.fallback;
      const answer = () => {
        if (response.destroyed) return;
        response.writeHead(scripted.status ?? 200, scripted.headers ?? {});
        response.end(scripted.body ?? 'ok');
      };
      // Unref'd: a receiver scripted to hang must not keep the test process alive after it is closed.
      if (scripted.delayMs) setTimeout(answer, scripted.delayMs).unref();
      else answer();
    });
  };
  const server = tls ? createHttpsServer(tls, listener) : createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}/hooks/receive`,
    port,
    requests,
    script: (...responses: ScriptedResponse[]) => void queue.push(...responses),
    waitForRequests(count: number, timeoutMs = 20_000) {
      if (requests.length >= count) return Promise.resolve(requests);
      return new Promise<ReceivedRequest[]>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${requests.length} of ${count} requests`)),
          timeoutMs,
        );
        waiters.push({ count, resolve: () => (clearTimeout(timer), resolve(requests)) });
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

import { createServer, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type Koa from 'koa';
import type { Config } from '../../common/config';

export type HttpLimits = Pick<Config, 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_REQUEST_TIMEOUT_MS' | 'HTTP_MAX_CONNECTIONS'>;

/** What Node's HTTP parser reports, mapped to the status a client should see. */
function clientErrorStatus(code: string | undefined): number {
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  return 400;
}

/**
 * The API's HTTP server: slow-header and slow-body clients are cut off (408), open connections are capped, and a
 * request Node cannot parse (a NUL in a header, a broken request line) gets a problem+json 400, not a bare one.
 */
export function createHttpServer(app: Koa, limits: HttpLimits): Server {
  const server = createServer(
    {
      headersTimeout: limits.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: limits.HTTP_REQUEST_TIMEOUT_MS,
      // Timeouts are enforced on this tick; Node's default of 30 s would let a slow client stay far past them.
      connectionsCheckingInterval: Math.min(1_000, limits.HTTP_HEADERS_TIMEOUT_MS),
    },
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's handler answers its own errors
    app.callback(),
  );
  server.maxConnections = limits.HTTP_MAX_CONNECTIONS;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || error.code === 'ECONNRESET') return void socket.destroy();
    const status = clientErrorStatus(error.code);
    const body = JSON.stringify({
      type: 'about:blank',
      title: STATUS_CODES[status],
      status,
      detail: status === 408 ? 'The request was not received in time' : 'The request is not valid HTTP',
    });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  return server;
}

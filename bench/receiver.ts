// The bench's receiver, run as its own process (fork, IPC): listens on 127.0.0.1 only, verifies every signature
// (HMAC-SHA256 over `{X-Timestamp}.{raw bytes}`, constant-time, 5-minute tolerance) and reports each receipt.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { wallClockMs } from './stats';

/** One request as the receiver saw it: [X-Webhook-Id, receipt time (wall-clock ms), signature valid, userUUID]. */
export type Receipt = [id: string, receivedAt: number, valid: boolean, userUUID: string];

export type ReceiverMessage = { type: 'ready'; port: number } | { type: 'receipts'; receipts: Receipt[] };

const TOLERANCE_MS = 300_000;
const FLUSH_MS = 20;

function signatureValid(secret: Buffer, request: IncomingMessage, rawBody: Buffer): boolean {
  const timestamp = request.headers['x-timestamp'];
  const signature = request.headers['x-signature'];
  if (typeof timestamp !== 'string' || typeof signature !== 'string' || !/^\d{1,16}$/.test(timestamp)) return false;
  if (Math.abs(Date.now() - Number(timestamp)) > TOLERANCE_MS) return false;
  const expected = Buffer.from(
    createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex'),
    'ascii',
  );
  const actual = Buffer.from(signature, 'ascii');
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

function userOf(rawBody: Buffer): string {
  try {
    const body = JSON.parse(rawBody.toString('utf8')) as { userUUID?: unknown };
    return typeof body.userUUID === 'string' ? body.userUUID : '';
  } catch {
    return '';
  }
}

function main(): void {
  const secretText = process.env.BENCH_RECEIVER_SECRET;
  if (!secretText || !process.send) throw new Error('run by bench/index.ts with BENCH_RECEIVER_SECRET and IPC');
  const secret = Buffer.from(secretText, 'utf8');
  const send = process.send.bind(process);
  let pending: Receipt[] = [];
  const flush = setInterval(() => {
    if (pending.length === 0) return;
    send({ type: 'receipts', receipts: pending } satisfies ReceiverMessage);
    pending = [];
  }, FLUSH_MS);

  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const receivedAt = wallClockMs();
      const rawBody = Buffer.concat(chunks);
      const valid = signatureValid(secret, request, rawBody);
      const id = request.headers['x-webhook-id'];
      pending.push([typeof id === 'string' ? id : '', receivedAt, valid, userOf(rawBody)]);
      response.writeHead(valid ? 200 : 401, { 'content-type': 'text/plain' }).end(valid ? 'ok' : 'bad signature');
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    send({ type: 'ready', port: (server.address() as AddressInfo).port } satisfies ReceiverMessage);
  });
  // The parent's exit closes the channel: stop with it, whatever happened there.
  process.on('disconnect', () => {
    clearInterval(flush);
    server.closeAllConnections();
    server.close();
  });
}

main();

// A runnable example receiver: `WEBHOOK_SECRET=whsec_… PORT=4000 npx tsx receiver/example-receiver.ts`.
// It verifies each delivery against the raw body, answers 401 when the signature or timestamp is wrong and
// 200 otherwise, and handles each webhook id once (the same event may arrive more than once). WEBHOOK_SECRET may
// list several secrets, space- or comma-separated, to accept both sides of a rotation. With WEBHOOK_PUBLIC_KEY=whpk_…
// instead (a v1a registration's public key; several likewise) it verifies the Ed25519 `v1a` signatures and holds no
// secret.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import {
  checkStandardWebhook,
  checkStandardWebhookV1a,
  checkWebhookSignature,
  type WebhookSecrets,
} from '../common/crypto/signature';

export interface ExampleReceiverOptions {
  /** The secret, or during a rotation the old and the new one (unused when `publicKey` is given). */
  secret: WebhookSecrets;
  /** A v1a registration's public key (whpk_…), or both during a key rotation: only `v1a` signatures are checked. */
  publicKey?: string | string[];
  /**
   * Which signature to check: Standard Webhooks' webhook-signature (default: it covers the webhook id and carries one
   * signature per active secret during a rotation) or the spec's X-Signature. Never either: a fallback to X-Signature
   * would let a replay strip webhook-signature and change the id.
   */
  scheme?: 'standard-webhooks' | 'spec';
  /** Called once per distinct X-Webhook-Id with the parsed body. */
  onEvent?: (event: { webhookId: string; body: unknown }) => void;
  /** How many webhook ids to remember for de-duplication. */
  rememberIds?: number;
}

const MAX_BODY_BYTES = 1024 * 1024;

async function readRawBody(request: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export function createExampleReceiver(options: ExampleReceiverOptions): Server {
  const seen = new Set<string>();
  const remember = options.rememberIds ?? 10_000;
  return createServer((request, response) => {
    const reply = (status: number, text: string) =>
      response.writeHead(status, { 'content-type': 'text/plain' }).end(text);
    if (request.method !== 'POST') return reply(405, 'POST only');
    const handle = (rawBody: Buffer | undefined) => {
      if (!rawBody) return reply(413, 'body too large');
      // The bytes as received: never JSON.stringify(JSON.parse(...)).
      const check = options.publicKey
        ? checkStandardWebhookV1a({ publicKey: options.publicKey, headers: request.headers, rawBody })
        : options.scheme === 'spec'
          ? checkWebhookSignature({
              secret: options.secret,
              timestamp: request.headers['x-timestamp'],
              signature: request.headers['x-signature'],
              rawBody,
            })
          : checkStandardWebhook({ secret: options.secret, headers: request.headers, rawBody });
      if (!check.valid) return reply(401, check.reason);
      const webhookId = String(request.headers[options.scheme === 'spec' ? 'x-webhook-id' : 'webhook-id'] ?? '');
      if (webhookId && seen.has(webhookId)) return reply(200, 'duplicate, already handled');
      options.onEvent?.({ webhookId, body: JSON.parse(rawBody.toString('utf8')) as unknown });
      // Remembered only once handled: a delivery whose handling failed is handled again when it is retried.
      if (webhookId) {
        seen.add(webhookId);
        if (seen.size > remember) seen.delete(seen.values().next().value as string);
      }
      reply(200, 'ok');
    };
    // A failed handler answers 500, so the service retries the delivery.
    readRawBody(request)
      .then(handle)
      .catch(() => reply(500, 'could not handle the event'));
  });
}

if (require.main === module) {
  const secret = process.env.WEBHOOK_SECRET ?? '';
  const publicKey = process.env.WEBHOOK_PUBLIC_KEY?.split(/[\s,]+/).filter(Boolean);
  if (!secret && !publicKey?.length) {
    process.stderr.write(
      'Set WEBHOOK_SECRET to the secret returned by POST /webhooks/register, or WEBHOOK_PUBLIC_KEY to its publicKey\n',
    );
    process.exit(2);
  }
  const port = Number(process.env.PORT ?? 4000);
  const server = createExampleReceiver({
    secret: secret.split(/[\s,]+/).filter(Boolean),
    ...(publicKey?.length && { publicKey }),
    scheme: process.env.WEBHOOK_SCHEME === 'spec' ? 'spec' : 'standard-webhooks',
    onEvent: ({ webhookId, body }) => process.stdout.write(`${webhookId} ${JSON.stringify(body)}\n`),
  });
  server.listen(port, () => process.stdout.write(`example receiver listening on http://localhost:${port}\n`));
  process.once('SIGINT', () => server.close());
  process.once('SIGTERM', () => server.close());
}

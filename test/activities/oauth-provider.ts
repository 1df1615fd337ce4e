// The OAuth side of the receivers in test/activities/oauth.test.ts: oidc-provider (a certified OpenID Connect
// provider) on 127.0.0.1 issuing client-credentials tokens that live a few seconds, with introspection and
// revocation; and a receiver behind it that checks every delivery's signature with its own HMAC and every bearer
// token at the provider's introspection endpoint, as a resource server does.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type ProviderType from 'oidc-provider' with { 'resolution-mode': 'import' };
import type { ClientMetadata, KoaContextWithOIDC } from 'oidc-provider' with { 'resolution-mode': 'import' };
import { independentSignatureValid, type ReceivedRequest } from '../support/receiver';

export const SCOPE = 'system/Observation.write';

export interface ProviderClient {
  clientId: string;
  clientSecret?: string;
  method: 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt';
  /** The public JWK of a private_key_jwt client, with its kid and alg. */
  jwk?: Record<string, unknown>;
  /** How long its tokens live, when not the provider's default. */
  tokenSeconds?: number;
}

export interface TestProvider {
  issuer: string;
  tokenUrl: string;
  /** Tokens issued at the token endpoint, by client; and every answer of the token endpoint, by status. */
  issued: Map<string, number>;
  tokenAnswers: number[];
  introspect(token: string): Promise<{ active: boolean; client_id?: string; scope?: string }>;
  revoke(token: string, client: { clientId: string; clientSecret: string }): Promise<void>;
  /** Closes the port (the token endpoint is down: connections refused) and opens it again. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

const RESOURCE_SERVER = { clientId: 'receiver-resource-server', clientSecret: 'rs-secret-5b1f0c' };

const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

export async function startTestProvider(clients: ProviderClient[], tokenSeconds: number): Promise<TestProvider> {
  const { default: Provider } = (await import('oidc-provider')) as { default: typeof ProviderType };
  let port = 0;
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
  const listen = async () => {
    server = createServer((req, res) => handler(req, res));
    server.on('connection', (socket) => (sockets.add(socket), socket.on('close', () => sockets.delete(socket))));
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  };
  const shut = () =>
    new Promise<void>((resolve) => {
      if (!server) return resolve();
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
      server = undefined;
    });
  await listen();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      ...clients.map((client): ClientMetadata => ({
        client_id: client.clientId,
        ...(client.clientSecret !== undefined && { client_secret: client.clientSecret }),
        token_endpoint_auth_method: client.method,
        ...(client.jwk && { jwks: { keys: [client.jwk] } }),
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        scope: SCOPE,
      })),
      {
        client_id: RESOURCE_SERVER.clientId,
        client_secret: RESOURCE_SERVER.clientSecret,
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ],
    scopes: [SCOPE],
    enabledJWA: { clientAuthSigningAlgValues: ['RS384', 'ES384', 'ES256'] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
    },
    ttl: {
      ClientCredentials: (_ctx, _token, client) =>
        clients.find((c) => c.clientId === client.clientId)?.tokenSeconds ?? tokenSeconds,
    },
  });
  const issued = new Map<string, number>();
  const tokenAnswers: number[] = [];
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path !== '/token') return;
    tokenAnswers.push(ctx.status);
    const clientId = (ctx as KoaContextWithOIDC).oidc?.client?.clientId;
    if (ctx.status === 200 && clientId) issued.set(clientId, (issued.get(clientId) ?? 0) + 1);
  });
  const callback = provider.callback();
  handler = (req, res) => void callback(req, res);

  const form = async (path: string, authorization: string, fields: Record<string, string>) => {
    const response = await fetch(`${issuer}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization },
      body: new URLSearchParams(fields).toString(),
    });
    if (!response.ok) throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
    return response;
  };
  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    issued,
    tokenAnswers,
    introspect: async (token) =>
      (await (
        await form('/token/introspection', basic(RESOURCE_SERVER.clientId, RESOURCE_SERVER.clientSecret), { token })
      ).json()) as { active: boolean; client_id?: string; scope?: string },
    revoke: async (token, client) =>
      void (await form('/token/revocation', basic(client.clientId, client.clientSecret), { token })),
    stop: shut,
    start: listen,
    close: shut,
  };
}

/** What the resource server decided about one delivery. */
export interface Verdict {
  projectId: string;
  token: string | undefined;
  signatureValid: boolean;
  active: boolean;
  clientId?: string;
  scope?: string;
  status: number;
}

export interface ProtectedReceiver {
  /** The URL of one project's deliveries (its signing secret given to `expect`). */
  urlFor(projectId: string): string;
  /** The project's signing secret and the client whose tokens it accepts. */
  expect(projectId: string, secret: string, clientId: string): void;
  /** Another client's tokens accepted for the project from now on (its secret kept). */
  expectClient(projectId: string, clientId: string): void;
  verdicts: Verdict[];
  close(): Promise<void>;
}

/**
 * A resource server on 127.0.0.1: 200 only to a request whose signature checks out with the project's secret and
 * whose bearer token the provider says is active, for the expected client and scope; 401 to a token that is not.
 */
export async function startProtectedReceiver(provider: TestProvider): Promise<ProtectedReceiver> {
  const expected = new Map<string, { secret: string; clientId: string }>();
  const verdicts: Verdict[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const projectId = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
        const request: ReceivedRequest = {
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          rawBody: Buffer.concat(chunks),
          receivedAt: Date.now(),
        };
        const project = expected.get(projectId);
        const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
        const signatureValid = project !== undefined && independentSignatureValid(project.secret, request);
        const introspected = token ? await provider.introspect(token) : { active: false };
        const active = introspected.active && introspected.client_id === project?.clientId;
        const status = !signatureValid ? 400 : active && introspected.scope?.split(' ').includes(SCOPE) ? 200 : 401;
        verdicts.push({
          projectId,
          token,
          signatureValid,
          active,
          clientId: introspected.client_id,
          scope: introspected.scope,
          status,
        });
        res.writeHead(status, status === 401 ? { 'www-authenticate': 'Bearer error="invalid_token"' } : {});
        res.end();
      })().catch(() => {
        res.writeHead(500);
        res.end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    urlFor: (projectId) => `http://127.0.0.1:${port}/hooks/${encodeURIComponent(projectId)}`,
    expect: (projectId, secret, clientId) => void expected.set(projectId, { secret, clientId }),
    expectClient: (projectId, clientId) => void expected.set(projectId, { ...expected.get(projectId)!, clientId }),
    verdicts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

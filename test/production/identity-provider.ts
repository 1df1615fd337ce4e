// The production suite's identity provider: oidc-provider (a certified OpenID Connect provider) on https, standing in
// for the customer's own. People sign in with name and password on its login page; processes get tokens by client
// credentials. Access tokens are JWTs (RS256 with a kid, from its JWKS) for one resource each, the Temporal frontend
// or the API, carrying the `permissions` claim Temporal's default claim mapper reads.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type ProviderType from 'oidc-provider' with { 'resolution-mode': 'import' };
import type { ClientMetadata, Configuration, KoaContextWithOIDC, errors as OidcErrors } from 'oidc-provider' with {
  'resolution-mode': 'import',
};
import { Agent } from 'undici';

export interface Person {
  name: string;
  password: string;
  /** Temporal permissions, `<namespace>:<read|write|admin>`. */
  permissions: string[];
}
export interface ProcessClient {
  clientId: string;
  clientSecret: string;
  permissions: string[];
}
export interface BrowserClient {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
}
export interface IdentityProviderOptions {
  tls: { key: Buffer; cert: Buffer; ca: Buffer };
  people: Person[];
  processes: ProcessClient[];
  browserClients?: BrowserClient[];
  /** How long an access token lives. */
  accessTokenSeconds: number;
  /** The resource indicators (each token's audience): Temporal's frontend (the default) and the API. */
  temporalResource: string;
  apiResource: string;
  /** Other applications of the same provider (tokens the service must refuse). */
  otherResources?: string[];
}

export interface IdentityProvider {
  issuer: string;
  jwksUri: string;
  tokenUrl: string;
  /** Access tokens issued at the token endpoint, by client. */
  issued: Map<string, number>;
  /** Signs in as a person through the login page (authorization code flow), as a browser would; the access token. */
  signIn(name: string, password: string, resource: string): Promise<string>;
  /** The kid of the key that signs now. */
  signingKid(): string;
  /**
   * A key rotation: `publish` a new key beside the signing one, let it `sign` (the old one still published), then
   * `retire` the old one.
   */
  rotateKey(step: 'publish' | 'sign' | 'retire'): void;
  close(): Promise<void>;
}

const html = (body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head><body>${body}</body></html>`;
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

async function formOf(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString());
}

const loginPage = (uid: string, error?: string) =>
  html(
    `<h1>Sign in</h1>${error ? `<p role="alert">${escapeHtml(error)}</p>` : ''}` +
      `<form method="post" action="/interaction/${uid}/login">` +
      `<label>Name <input name="name" autocomplete="username" required></label>` +
      `<label>Password <input name="password" type="password" autocomplete="current-password" required></label>` +
      `<button type="submit">Sign in</button></form>`,
  );

export async function startIdentityProvider(options: IdentityProviderOptions): Promise<IdentityProvider> {
  // oidc-provider is an ES module.
  const { default: Provider, errors } = (await import('oidc-provider')) as {
    default: typeof ProviderType;
    errors: typeof OidcErrors;
  };
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
  const server: Server = createServer({ key: options.tls.key, cert: options.tls.cert }, (req, res) =>
    handler(req, res),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const people = new Map(options.people.map((person) => [person.name, person]));
  const processes = new Map(options.processes.map((client) => [client.clientId, client]));
  const newKey = () => ({
    ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
    kid: `idp-${randomBytes(4).toString('hex')}`,
    alg: 'RS256',
    use: 'sig',
  });
  /** The JWKS: the first key signs, all are published. */
  let keys = [newKey()];
  // The suite's own client for signIn (its redirect is read, never followed).
  const suiteClient = { clientId: 'suite-login', clientSecret: randomBytes(16).toString('hex') };
  const suiteRedirect = 'https://suite.invalid/callback';
  const resources: Record<string, string> = {
    [options.temporalResource]: 'temporal',
    [options.apiResource]: 'api',
    ...Object.fromEntries((options.otherResources ?? []).map((resource) => [resource, 'other'])),
  };

  const configuration = (): Configuration => ({
    clients: [
      ...(options.processes.map((client) => ({
        client_id: client.clientId,
        client_secret: client.clientSecret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
      })) as ClientMetadata[]),
      ...([...(options.browserClients ?? []), { ...suiteClient, redirectUri: suiteRedirect }].map((client) => ({
        client_id: client.clientId,
        client_secret: client.clientSecret,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: [client.redirectUri],
      })) as ClientMetadata[]),
    ],
    jwks: { keys },
    claims: { openid: ['sub'], profile: ['name'], email: ['email', 'email_verified'] },
    scopes: ['openid', 'profile', 'email', 'offline_access'],
    findAccount: (_ctx, id) =>
      people.has(id)
        ? { accountId: id, claims: () => ({ sub: id, name: id, email: `${id}@example.com`, email_verified: true }) }
        : undefined,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A sign-in that names no resource (the Temporal UI's) gets a token for Temporal's frontend.
        defaultResource: (_ctx, _client, oneOf) => oneOf ?? options.temporalResource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          const scope = resources[resource];
          if (!scope) throw new errors.InvalidTarget();
          return {
            scope,
            audience: resource,
            accessTokenTTL: options.accessTokenSeconds,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    extraTokenClaims: (_ctx, token) => {
      const permissions =
        token.kind === 'ClientCredentials'
          ? processes.get(token.clientId!)?.permissions
          : people.get((token as { accountId?: string }).accountId ?? '')?.permissions;
      return { permissions: permissions ?? [] };
    },
    // First-party clients only: the sign-in grants every scope asked for, no consent page.
    loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
      const { oidc } = ctx;
      const grantId = oidc.result?.consent?.grantId ?? oidc.session!.grantIdFor(oidc.client!.clientId);
      if (grantId) {
        const found = await oidc.provider.Grant.find(grantId);
        if (found) return found;
      }
      const grant = new oidc.provider.Grant({ clientId: oidc.client!.clientId, accountId: oidc.session!.accountId });
      grant.addOIDCScope('openid profile email offline_access');
      for (const [resource, scope] of Object.entries(resources)) grant.addResourceScope(resource, scope);
      await grant.save();
      return grant;
    },
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    ttl: {
      AccessToken: options.accessTokenSeconds,
      ClientCredentials: options.accessTokenSeconds,
      IdToken: 3600,
      Session: 3600,
      Grant: 3600,
      Interaction: 600,
      RefreshToken: 3600,
      AuthorizationCode: 60,
    },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    pkce: { required: () => false },
    renderError: (ctx, out) => {
      ctx.type = 'html';
      ctx.body = html(
        `<h1>Sign-in error</h1><p role="alert">${escapeHtml(String(out.error_description ?? out.error))}</p>`,
      );
    },
  });
  const issued = new Map<string, number>();
  /** A provider on the current keys (its sessions and grants live in memory: a new key starts afresh). */
  const build = () => {
    const built = new Provider(issuer, configuration());
    built.use(async (ctx, next) => {
      await next();
      const clientId = (ctx as KoaContextWithOIDC).oidc?.client?.clientId;
      if (ctx.path === '/token' && ctx.status === 200 && clientId)
        issued.set(clientId, (issued.get(clientId) ?? 0) + 1);
    });
    return { provider: built, callback: built.callback() };
  };
  let { provider, callback } = build();
  const rebuild = () => ({ provider, callback } = build());

  handler = (req, res) => {
    const match = /^\/interaction\/([\w-]+)(\/login)?$/.exec(new URL(req.url!, issuer).pathname);
    if (!match) return void callback(req, res);
    void (async () => {
      try {
        const details = await provider.interactionDetails(req, res);
        if (details.prompt.name !== 'login') {
          // Consent is granted by loadExistingGrant; anything else ends the interaction as it stands.
          return void (await provider.interactionFinished(req, res, {}, { mergeWithLastSubmission: true }));
        }
        if (req.method === 'POST' && match[2]) {
          const form = await formOf(req);
          const person = people.get(form.get('name') ?? '');
          if (person && person.password === form.get('password'))
            return void (await provider.interactionFinished(req, res, { login: { accountId: person.name } }));
          res.writeHead(401, { 'content-type': 'text/html' });
          return void res.end(loginPage(details.uid, 'Wrong name or password'));
        }
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(loginPage(details.uid));
      } catch (error) {
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end((error as Error).message);
      }
    })();
  };

  const dispatcher = new Agent({ connect: { ca: options.tls.ca } });
  /** The authorization code flow with fetch: cookies kept by hand, each redirect read. */
  async function signIn(name: string, password: string, resource: string): Promise<string> {
    const cookies = new Map<string, string>();
    const step = async (url: string, init: RequestInit = {}) => {
      const response = await fetch(new URL(url, issuer), {
        ...init,
        redirect: 'manual',
        headers: {
          ...(init.headers as Record<string, string>),
          cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        },
        dispatcher,
      } as unknown as RequestInit);
      for (const cookie of response.headers.getSetCookie()) {
        const [pair] = cookie.split(';');
        const at = pair!.indexOf('=');
        cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
      }
      return response;
    };
    const authorize = new URLSearchParams({
      client_id: suiteClient.clientId,
      response_type: 'code',
      scope: 'openid profile',
      redirect_uri: suiteRedirect,
      resource,
    });
    let response = await step(`/auth?${authorize.toString()}`);
    const interaction = response.headers.get('location')!;
    response = await step(`${interaction}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ name, password }).toString(),
    });
    if (response.status === 401) throw new Error(`${name} could not sign in: wrong name or password`);
    response = await step(response.headers.get('location')!);
    const code = new URL(response.headers.get('location')!).searchParams.get('code');
    if (!code) throw new Error(`no authorization code: ${response.status} ${response.headers.get('location')}`);
    response = await step('/token', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${suiteClient.clientId}:${suiteClient.clientSecret}`).toString('base64')}`,
      },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        redirect_uri: suiteRedirect,
        resource,
      }).toString(),
    });
    const body = (await response.json()) as { access_token?: string; error?: string };
    if (!body.access_token) throw new Error(`no access token: ${response.status} ${body.error}`);
    return body.access_token;
  }

  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    tokenUrl: `${issuer}/token`,
    issued,
    signIn,
    signingKid: () => keys[0]!.kid,
    rotateKey(step) {
      if (step === 'publish') keys = [keys[0]!, newKey()];
      else if (step === 'sign') keys = [keys[1]!, keys[0]!];
      else keys = [keys[0]!];
      rebuild();
    },
    close: async () => {
      await dispatcher.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

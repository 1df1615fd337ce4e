// Access tokens for Temporal's authorizer: an OAuth 2.0 client-credentials grant (RFC 6749 §4.4) against the identity
// provider's token endpoint, renewed well before each token expires so a long-running worker never presents a dead one.
import type { Config } from '../config';

export type TokenSettings = Pick<
  Config,
  | 'TEMPORAL_OAUTH_TOKEN_URL'
  | 'TEMPORAL_OAUTH_CLIENT_ID'
  | 'TEMPORAL_OAUTH_CLIENT_SECRET'
  | 'TEMPORAL_OAUTH_SCOPE'
  | 'TEMPORAL_OAUTH_RESOURCE'
  | 'TEMPORAL_OAUTH_AUDIENCE'
>;

export interface AccessToken {
  value: string;
  /** The lifetime the provider gave it (`expires_in`), in milliseconds. */
  lifetimeMs: number;
}

/** A token when the provider names no lifetime: assume a short one, so it is renewed soon. */
const UNSTATED_LIFETIME_MS = 60_000;

/** One client-credentials request; throws with the provider's error code (never the secret) when refused. */
export async function fetchClientCredentialsToken(
  settings: TokenSettings,
  fetchImpl: typeof fetch = fetch,
): Promise<AccessToken> {
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (settings.TEMPORAL_OAUTH_SCOPE) form.set('scope', settings.TEMPORAL_OAUTH_SCOPE);
  if (settings.TEMPORAL_OAUTH_RESOURCE) form.set('resource', settings.TEMPORAL_OAUTH_RESOURCE);
  if (settings.TEMPORAL_OAUTH_AUDIENCE) form.set('audience', settings.TEMPORAL_OAUTH_AUDIENCE);
  // client_secret_basic: each part form-encoded first (RFC 6749 §2.3.1).
  const basic = Buffer.from(
    `${encodeURIComponent(settings.TEMPORAL_OAUTH_CLIENT_ID!)}:${encodeURIComponent(settings.TEMPORAL_OAUTH_CLIENT_SECRET!)}`,
  ).toString('base64');
  const response = await fetchImpl(settings.TEMPORAL_OAUTH_TOKEN_URL!, {
    method: 'POST',
    headers: {
      authorization: `Basic ${basic}`,
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    },
    body: form.toString(),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok || typeof body.access_token !== 'string') {
    const reason = typeof body.error === 'string' ? body.error : 'no access_token';
    throw new Error(`the token endpoint refused the client credentials: ${response.status} ${reason}`);
  }
  const expiresIn = Number(body.expires_in);
  return {
    value: body.access_token,
    lifetimeMs: Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn * 1000 : UNSTATED_LIFETIME_MS,
  };
}

/**
 * When to renew a token of this lifetime: 30 s before it expires, or a quarter of its life before for long-lived ones,
 * but never before half of it has passed (a token of a minute is renewed after 30 s, one of an hour after 45 min).
 */
export function renewalDelayMs(lifetimeMs: number): number {
  const margin = Math.min(Math.max(lifetimeMs / 4, 30_000), lifetimeMs / 2);
  return Math.max(0, Math.round(lifetimeMs - margin));
}

/** After a failed renewal: 1 s, 2 s, 4 s… up to 30 s, while the current token still serves. */
export const retryDelayMs = (failures: number): number => Math.min(1_000 * 2 ** Math.max(0, failures - 1), 30_000);

export interface TokenRefresher {
  /** The newest token. */
  current(): string;
  /** How many times a token was renewed after the first. */
  renewals(): number;
  stop(): void;
}

export interface RefresherOptions {
  fetchToken: () => Promise<AccessToken>;
  /** Called with each renewed token (e.g. NativeConnection.setApiKey); a rejection counts as a failed renewal. */
  onRenewed?: (token: string) => void | Promise<void>;
  onError?: (error: Error, retryInMs: number) => void;
  onRenewedLog?: (renewals: number, lifetimeMs: number) => void;
}

/** Fetches the first token (rejecting when the provider refuses it, so a process fails at start), then renews it. */
export async function startTokenRefresher(options: RefresherOptions): Promise<TokenRefresher> {
  let token = await options.fetchToken();
  let renewals = 0;
  let failures = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (delayMs: number) => {
    if (stopped) return;
    // Unref'd: a process that has nothing else to do exits; the token alone keeps nothing alive.
    timer = setTimeout(() => void renew(), delayMs).unref();
  };
  const renew = async () => {
    try {
      const next = await options.fetchToken();
      if (stopped) return;
      await options.onRenewed?.(next.value);
      token = next;
      renewals += 1;
      failures = 0;
      options.onRenewedLog?.(renewals, next.lifetimeMs);
      schedule(renewalDelayMs(next.lifetimeMs));
    } catch (error) {
      failures += 1;
      const retryInMs = retryDelayMs(failures);
      options.onError?.(error as Error, retryInMs);
      schedule(retryInMs);
    }
  };
  schedule(renewalDelayMs(token.lifetimeMs));
  return {
    current: () => token.value,
    renewals: () => renewals,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

import type { Config } from '../config';
import { isDevelopment } from '../node-env';

/** The longest receiver URL a registration may have. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * A receiver URL as the delivery will use it (WHATWG parser): absolute http: or https:, with a host and no
 * credentials; undefined otherwise. The API checks it at registration, the delivery again at every attempt.
 */
export function parseWebhookUrl(text: string): URL | undefined {
  if (text.length > MAX_WEBHOOK_URL_LENGTH || !URL.canParse(text)) return undefined;
  const url = new URL(text);
  const usable =
    (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' && !url.username && !url.password;
  return usable ? url : undefined;
}

/** Which schemes this deployment delivers to: https only in production unless ALLOW_HTTP_WEBHOOK_URLS=true. */
export interface WebhookUrlPolicy {
  httpsOnly: boolean;
}

export function webhookUrlPolicy(
  config: Partial<Pick<Config, 'NODE_ENV' | 'ALLOW_HTTP_WEBHOOK_URLS'>>,
): WebhookUrlPolicy {
  // A loaded config always has NODE_ENV; activities built bare in tests have none and keep http.
  return {
    httpsOnly: config.NODE_ENV !== undefined && !isDevelopment(config) && config.ALLOW_HTTP_WEBHOOK_URLS !== true,
  };
}

/** What registration answers (400) and delivery fails with for a plain http:// receiver under an https-only policy. */
export const HTTPS_REQUIRED = 'must be an https URL: health data is only delivered over TLS';

/** Whether the policy refuses this (parsed) receiver URL for its scheme. */
export const refusedScheme = (url: URL, policy: WebhookUrlPolicy): boolean =>
  policy.httpsOnly && url.protocol !== 'https:';

/** Whether two receiver URLs share an origin (scheme, host and port): what a registration's credentials are bound to. */
export const sameOrigin = (a: string, b: string): boolean => new URL(a).origin === new URL(b).origin;

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

// What the worker's codec hands to the workflow and the activities in place of a payload that arrived unencrypted
// (a client without our payload key). Sandbox-safe: the workflow recognises it and decides.

/** The one property of the marker object; chosen so no event, signal or activity argument of ours has it. */
export const UNENCRYPTED_PAYLOAD_KEY = '__unencryptedPayload';

/** A payload that did not come through our codec: whether this worker accepts such payloads, and its value. */
export interface UnencryptedPayload {
  /** ALLOW_UNENCRYPTED_EVENTS=true, or outside production. */
  allowed: boolean;
  /** The value as a plain client sent it (JSON), for a history that accepted it to replay as it ran. */
  value?: unknown;
}

/** The marker, when `value` is one; undefined for every value that came encrypted. */
export function unencryptedPayloadOf(value: unknown): UnencryptedPayload | undefined {
  if (
    typeof value !== 'object' ||
    value === null ||
    !Object.prototype.hasOwnProperty.call(value, UNENCRYPTED_PAYLOAD_KEY)
  )
    return undefined;
  const marker = (value as Record<string, unknown>)[UNENCRYPTED_PAYLOAD_KEY];
  return typeof marker === 'object' && marker !== null ? (marker as UnencryptedPayload) : undefined;
}

// Event validation with ajv (it compiles code at run time, so this stays out of the workflow sandbox and out of
// the contract's index): activities, the client and the CLI import it directly.
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { eventSchemas } from './schemas';
import { WEBHOOK_ID_PATTERN, WEBHOOK_TYPES, type WebhookType } from './events';
import type { DeliverWebhookEventInput } from './payloads';
import { SAFE_ID_RULE, isSafeId } from './ids';

const ajv = new Ajv({ allErrors: true, strict: true });
addFormats(ajv, ['uuid', 'email', 'date-time']);
const validators = Object.fromEntries(
  WEBHOOK_TYPES.map((type) => [type, ajv.compile(eventSchemas[type])]),
) as unknown as Record<WebhookType, ValidateFunction>;

function describe(error: ErrorObject): string {
  const at = 'payload' + error.instancePath.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.');
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${at} is missing the required field ${String(params.missingProperty)}`;
    case 'additionalProperties':
      return `${at} has the field ${String(params.additionalProperty)}, which this event type does not allow`;
    case 'enum':
      return `${at} must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'format':
      return `${at} must be ${params.format === 'date-time' ? 'an ISO 8601 date-time with a time zone' : `a valid ${String(params.format)}`}`;
    default:
      return `${at} ${error.message ?? 'is invalid'}`;
  }
}

const isUuid = ajv.compile({ type: 'string', format: 'uuid' });

const isWebhookType = (type: unknown): type is WebhookType =>
  typeof type === 'string' && (WEBHOOK_TYPES as readonly string[]).includes(type);

/**
 * Checks an event against spec section 6. Returns undefined when valid, else one message naming every problem,
 * e.g. `Invalid VITAL_THRESHOLD event: payload.triggeredVitals[0].vitalType must be one of "heartrate", …`.
 */
export function validateEvent(type: unknown, payload: unknown): string | undefined {
  if (!isWebhookType(type))
    return `Unknown event type ${JSON.stringify(type)}: expected one of ${WEBHOOK_TYPES.join(', ')}`;
  const validate = validators[type];
  if (validate(payload)) return undefined;
  // Keep the one error per place; enum on `reason` also reports a redundant type error.
  const problems = [...new Set((validate.errors ?? []).map(describe))];
  return `Invalid ${type} event: ${problems.join('; ')}`;
}

/**
 * Checks the whole workflow input: the event, a project id, and for user events a userUUID that is a UUID and
 * the same as the payload's (the wrapper is not sent, so a mismatch would deliver the wrong person's id).
 */
export function validateDeliveryInput(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null) return 'Invalid event: the input must be an object';
  const { projectId, webhookType, userUUID, payload } = input as Partial<
    Record<keyof DeliverWebhookEventInput, unknown>
  >;
  if (!isSafeId(projectId)) return `Invalid event: projectId must be a string of ${SAFE_ID_RULE}`;
  const { webhookId } = input as { webhookId?: unknown };
  if (webhookId !== undefined && (typeof webhookId !== 'string' || !WEBHOOK_ID_PATTERN.test(webhookId)))
    return 'Invalid event: webhookId must be 1 to 300 visible ASCII characters';
  const problem = validateEvent(webhookType, payload);
  if (problem) return problem;
  if (webhookType === 'TEST') return undefined;
  if (!isUuid(userUUID)) return `Invalid ${String(webhookType)} event: userUUID must be a UUID`;
  if ((payload as { userUUID: string }).userUUID !== userUUID)
    return `Invalid ${String(webhookType)} event: userUUID differs from payload.userUUID`;
  return undefined;
}

/** An event that does not match spec section 6; the message names the problem. */
export class InvalidWebhookEventError extends Error {
  override name = 'InvalidWebhookEventError';
}

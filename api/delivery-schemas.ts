import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { InvalidRequestError } from './errors';

// Plain JSON Schema objects, exported as is so the OpenAPI document reuses them.

export const recoverBodySchema = {
  type: 'object',
  properties: {
    since: { type: 'string', format: 'date-time', description: 'Redeliver failed deliveries created at or after.' },
    until: { type: 'string', format: 'date-time', description: 'And before this time (default: now).' },
  },
  required: ['since'],
  additionalProperties: false,
} as const;

export interface RecoverBody {
  since: string;
  until?: string;
}

const ajv = new Ajv({ allErrors: true, strict: true });
addFormats(ajv, ['date-time']);
const validate = ajv.compile(recoverBodySchema);

/** The recover window, or InvalidRequestError naming every problem. */
export function validateRecoverBody(body: unknown): RecoverBody {
  if (!validate(body)) {
    throw new InvalidRequestError(
      (validate.errors ?? []).map((error) => ({
        pointer: error.instancePath || '/',
        detail:
          error.keyword === 'additionalProperties'
            ? `must NOT have additional property ${String(error.params.additionalProperty)}`
            : (error.message ?? 'is invalid'),
      })),
    );
  }
  const window = body as RecoverBody;
  if (window.until !== undefined && Date.parse(window.until) <= Date.parse(window.since))
    throw new InvalidRequestError([{ pointer: '/until', detail: 'must be later than since' }]);
  return window;
}

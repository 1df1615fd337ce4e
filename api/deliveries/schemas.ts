import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { InvalidRequestError } from '../http/errors';

// Plain JSON Schema objects, exported as is so the OpenAPI document reuses them.

export const recoverBodySchema = {
  type: 'object',
  properties: {
    since: { type: 'string', format: 'date-time', description: 'Redeliver failed deliveries created at or after.' },
    until: {
      type: 'string',
      format: 'date-time',
      description: 'And before this time, which must be later than since (default: now).',
    },
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
const isDateTime = ajv.compile({ type: 'string', format: 'date-time' });

/**
 * Why a time in a query or body cannot be used, or undefined: it must be an RFC 3339 date-time, and not a leap
 * second, which RFC 3339 allows but neither JavaScript nor PostgreSQL can hold as written.
 */
export function dateTimeProblem(value: string): string | undefined {
  if (!isDateTime(value)) return 'must be an ISO 8601 date-time with a time zone, such as 2026-01-01T00:00:00Z';
  if (Number.isNaN(Date.parse(value))) return 'is a leap second (:60), which this API cannot take: use :59';
  return undefined;
}

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
  const times = (['since', 'until'] as const).filter((name) => window[name] !== undefined);
  const problems = times.flatMap((name) => {
    const detail = dateTimeProblem(window[name]!);
    return detail ? [{ pointer: `/${name}`, detail }] : [];
  });
  if (problems.length > 0) throw new InvalidRequestError(problems);
  if (window.until !== undefined && Date.parse(window.until) <= Date.parse(window.since))
    throw new InvalidRequestError([{ pointer: '/until', detail: 'must be later than since' }]);
  return window;
}

// Redaction at any depth: pino's `redact` paths have a fixed depth, and health data can sit anywhere in a logged
// object (an event inside a failure inside a context). Every object a log line carries is copied with personal data,
// credentials and database bound values replaced, however deep they are.
import pino from 'pino';
import { eventSchemas } from '../contract/schemas';

export const CENSOR = '[redacted]';

/** Every property name an event payload schema declares, at any depth (userUUID, reasons, vital_id, reason, …). */
function propertyNames(schema: unknown): string[] {
  if (schema === null || typeof schema !== 'object') return [];
  const { properties, items } = schema as { properties?: Record<string, unknown>; items?: unknown };
  return [
    ...Object.entries(properties ?? {}).flatMap(([name, property]) => [name, ...propertyNames(property)]),
    ...propertyNames(items),
  ];
}

const normalize = (key: string) => key.toLowerCase().replace(/[_-]/g, '');

/** Keys whose value never reaches a log line, compared without case, `_` or `-`. */
const SENSITIVE_KEYS = new Set([
  // The event: its payload fields (a new field is covered as soon as its schema declares it), the wrapper's
  // userUUID, and a request or response body that may hold either.
  ...Object.values(eventSchemas).flatMap(propertyNames).map(normalize),
  // Stryker disable StringLiteral: the schemas declare these today; listed so that a renamed field's old name stays redacted
  'useruuid',
  'firstname',
  'lastname',
  'triggeredvitals',
  'vitaltype',
  'badvalue',
  'thresholdvalue',
  // Stryker restore StringLiteral
  'body',
  'payload',
  'payloads',
  'fullname',
  'givenname',
  'familyname',
  'displayname',
  'middlename',
  'phone',
  'phonenumber',
  'dateofbirth',
  'birthdate',
  'vitals',
  'rawbody',
  'bindings',
  'parameters',
]);
/** Credentials and e-mail addresses by substring: apiKey, accessToken, x-signature, secretSealed, emails, … */
const SENSITIVE_PARTS = /secret|token|password|passwd|authorization|cookie|apikey|signature|email/;

const MAX_DEPTH = 32;

export function isSensitiveKey(key: string): boolean {
  const normalized = normalize(key);
  return SENSITIVE_KEYS.has(normalized) || SENSITIVE_PARTS.test(normalized);
}

/** A PostgreSQL error (possibly wrapped by Knex): its message and detail may quote bound values. */
function isDatabaseError(error: Error): boolean {
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string';
}

/**
 * An error as a log line shows it: type, message and stack, and its own fields redacted. A database error keeps only
 * its SQLSTATE, table, constraint and routine: Knex puts the query's bound values in the message.
 */
export function serializeError(error: Error, seen = new WeakSet<object>(), depth = 0): unknown {
  if (isDatabaseError(error)) {
    // Fields PostgreSQL leaves out stay undefined, which a JSON log line omits.
    const { code, severity, table, constraint, column, routine } = error as Error & Record<string, unknown>;
    const message = `database error ${String(code)} (query and values withheld)`;
    return { type: error.name, message, code, severity, table, constraint, column, routine };
  }
  const serialized = pino.stdSerializers.err(error) as unknown as Record<string, unknown>;
  return redactDeep(serialized, seen, depth);
}

/** A copy of `value` with every sensitive key's value censored, at any depth; cycles and Buffers are cut short. */
export function redactDeep(value: unknown, seen = new WeakSet<object>(), depth = 0): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) return '[too deep]';
  if (seen.has(value)) return '[circular]';
  seen.add(value);
  try {
    if (value instanceof Error) return serializeError(value, seen, depth + 1);
    if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
    if (value instanceof Date) return value;
    if (Array.isArray(value)) return value.map((item) => redactDeep(item, seen, depth + 1));
    if (value instanceof Map) return redactDeep(Object.fromEntries(value), seen, depth + 1);
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      copy[key] = isSensitiveKey(key) ? CENSOR : redactDeep(item, seen, depth + 1);
    }
    return copy;
  } finally {
    seen.delete(value);
  }
}

/**
 * Child loggers' bindings get the same walk: pino applies its bindings formatter to the root's only. Children are
 * prototype copies of their parent, so replacing `child` on the root covers every descendant.
 */
export function redactChildBindings(logger: pino.Logger): pino.Logger {
  type ChildFn = (this: unknown, bindings: pino.Bindings, options?: unknown) => unknown;
  const child = Reflect.get(logger, 'child') as ChildFn;
  const redactingChild: ChildFn = function (this: unknown, bindings, options) {
    return child.call(this, redactDeep(bindings) as pino.Bindings, options);
  };
  Reflect.set(logger, 'child', redactingChild);
  return logger;
}

/** pino options that apply redactDeep to every log call's object and the root's bindings. */
export const deepRedaction = {
  formatters: {
    log: (object: Record<string, unknown>) => redactDeep(object) as Record<string, unknown>,
    bindings: (bindings: pino.Bindings) => redactDeep(bindings) as pino.Bindings,
  },
  serializers: {
    err: (error: unknown) => redactDeep(error),
  },
};

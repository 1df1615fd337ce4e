// A registration's custom headers: the rules the API checks, the OpenAPI document states and the
// delivery relies on. A registration's headers are sent on every attempt beside the service's own, never signed.

/** Name → value, as set through the API. */
export type CustomHeaders = Record<string, string>;

export const MAX_CUSTOM_HEADERS = 10;
export const MAX_CUSTOM_HEADER_NAME_LENGTH = 64;
export const MAX_CUSTOM_HEADER_VALUE_LENGTH = 1024;
/** What the per-header caps allow in all: 10 × (64 + 1024) characters, about 11 KB. */
export const MAX_CUSTOM_HEADERS_TOTAL =
  MAX_CUSTOM_HEADERS * (MAX_CUSTOM_HEADER_NAME_LENGTH + MAX_CUSTOM_HEADER_VALUE_LENGTH);

/** RFC 9110 token characters. */
export const CUSTOM_HEADER_NAME_PATTERN = `^[!#$%&'*+.^_\`|~0-9A-Za-z-]{1,${MAX_CUSTOM_HEADER_NAME_LENGTH}}$`;
/** Visible ASCII, with spaces and tabs inside (never at either end, where parsers trim them): no CR, LF or NUL. */
export const CUSTOM_HEADER_VALUE_PATTERN = '^[\\x21-\\x7E](?:[\\t\\x20-\\x7E]*[\\x21-\\x7E])?$';

/**
 * Names a registration may not set, each with why (lower case; `*` ends a prefix). The service's own headers (the
 * spec's, Standard Webhooks', tracing), what describes the body or the connection (hop-by-hop), and what undici or a
 * proxy owns. Authorization is allowed: receivers' gateways commonly want a bearer token or basic credentials.
 */
const RESERVED: readonly (readonly [name: string, why: string])[] = [
  ['host', 'the receiver URL decides it'],
  ['content-*', 'the service describes the body it signs'],
  ['x-timestamp', 'the service signs every delivery with it'],
  ['x-signature', 'the service signs every delivery with it'],
  ['x-webhook-id', 'the service sets it on every delivery'],
  ['webhook-*', 'Standard Webhooks headers are the service’s'],
  ['traceparent', 'the service’s tracing header'],
  ['tracestate', 'the service’s tracing header'],
  ['user-agent', 'the service sets it on every delivery'],
  ['connection', 'a hop-by-hop header'],
  ['keep-alive', 'a hop-by-hop header'],
  ['proxy-*', 'a hop-by-hop header for the egress proxy'],
  ['te', 'a hop-by-hop header'],
  ['trailer', 'a hop-by-hop header'],
  ['transfer-encoding', 'a hop-by-hop header'],
  ['upgrade', 'a hop-by-hop header'],
  ['expect', 'the HTTP client refuses it'],
];

/** Why a header name is reserved, or undefined when a registration may set it. */
export function reservedHeader(name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const [reserved, why] of RESERVED) {
    if (reserved.endsWith('*') ? lower.startsWith(reserved.slice(0, -1)) : lower === reserved) return why;
  }
  return undefined;
}

/** Every letter as [Xx]: JSON Schema patterns have no flags, and header names are case-insensitive. */
const anyCase = (text: string) =>
  text.replace(/[a-z]/g, (letter) => `[${letter.toUpperCase()}${letter}]`).replace(/\./g, '\\.');

/** The reserved names as one pattern, for the OpenAPI document's `propertyNames: { not: … }`. */
export const RESERVED_HEADER_PATTERN = `^(?:${RESERVED.map(([name]) => (name.endsWith('*') ? `${anyCase(name.slice(0, -1))}.*` : anyCase(name))).join('|')})$`;

/** The names the reference documents list as reserved. */
export const RESERVED_HEADER_NAMES = RESERVED.map(([name]) => name);

export interface HeaderProblem {
  /** JSON pointer of the field: /headers or /headers/<name>. */
  pointer: string;
  detail: string;
}

/** RFC 6901: `~` and `/` escaped in a pointer's segment. */
const pointerTo = (name: string) => `/headers/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;

/**
 * Every problem with a registration's headers, each naming the header and the rule it breaks; none when they may be
 * stored. `headers` is the request's value, of any JSON type.
 */
export function customHeaderProblems(headers: unknown): HeaderProblem[] {
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers))
    return [{ pointer: '/headers', detail: 'must be an object of header names to values' }];
  const entries = Object.entries(headers as Record<string, unknown>);
  const problems: HeaderProblem[] = [];
  if (entries.length > MAX_CUSTOM_HEADERS)
    problems.push({ pointer: '/headers', detail: `must have at most ${MAX_CUSTOM_HEADERS} headers` });
  const seen = new Map<string, string>();
  const nameRule = new RegExp(CUSTOM_HEADER_NAME_PATTERN);
  for (const [name, value] of entries) {
    const pointer = pointerTo(name);
    const problem = (detail: string) => problems.push({ pointer, detail });
    if (!nameRule.test(name))
      problem(
        `header name ${JSON.stringify(name)} must be 1 to ${MAX_CUSTOM_HEADER_NAME_LENGTH} letters, digits or ` +
          "!#$%&'*+-.^_`|~ (an HTTP token)",
      );
    const why = reservedHeader(name);
    if (why) problem(`header ${name} is reserved: ${why}`);
    const earlier = seen.get(name.toLowerCase());
    if (earlier !== undefined) problem(`header ${name} is also given as ${earlier}: names are case-insensitive`);
    seen.set(name.toLowerCase(), name);
    if (typeof value !== 'string') problem(`header ${name} must have a string value`);
    else if (value.length === 0) problem(`header ${name} must not be empty`);
    else if (value.length > MAX_CUSTOM_HEADER_VALUE_LENGTH)
      problem(`header ${name} must be at most ${MAX_CUSTOM_HEADER_VALUE_LENGTH} characters`);
    else if (/[\r\n\0]/.test(value)) problem(`header ${name} must not contain CR, LF or NUL`);
    else if (!/^[\t\x20-\x7e]*$/.test(value))
      problem(`header ${name} must be visible ASCII characters, spaces and tabs`);
    else if (/^[\t ]|[\t ]$/.test(value)) problem(`header ${name} must not start or end with a space or tab`);
  }
  return problems;
}

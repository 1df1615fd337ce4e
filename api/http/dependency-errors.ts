// What a failing dependency looks like from the API: which one is down (a 503), and a log line without its data.
import { NamespaceNotFoundError, isGrpcServiceError } from '@temporalio/client';

/** Seconds a caller is asked to wait when a dependency is down: about one pool or connect timeout. */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

export type Dependency = 'database' | 'Temporal';

/** What a caller reads in the 503 problem. */
export const unavailableDetail = (dependency: Dependency) =>
  `${dependency === 'database' ? 'The database' : 'Temporal'} is not answering; try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds`;

// SQLSTATE classes and codes that mean "the server is not there or not taking work", not "the query is wrong".
const DATABASE_DOWN_STATES = /^(08...|57P0[123]|53300|57014|25006)$/;
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);
const PG_CONNECTION_MESSAGES = /^(Connection terminated|timeout expired|Client has encountered a connection error)/;
/** gRPC UNAVAILABLE and DEADLINE_EXCEEDED. */
const TEMPORAL_DOWN = new Set<number>([14, 4]);

interface Coded {
  name?: string;
  code?: unknown;
  message?: string;
  cause?: unknown;
}

/** Which dependency an error says is down, following `cause`; undefined for any other error. */
export function unavailableDependency(error: unknown): Dependency | undefined {
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 5; at = (at as Coded).cause, depth++) {
    if (isGrpcServiceError(at)) return TEMPORAL_DOWN.has(at.code) ? 'Temporal' : undefined;
    const { name, code, message = '' } = at as Coded;
    if (name === 'KnexTimeoutError') return 'database';
    if (typeof code === 'string' && (DATABASE_DOWN_STATES.test(code) || NETWORK_CODES.has(code))) return 'database';
    if (PG_CONNECTION_MESSAGES.test(message.replace(/^.* - /s, ''))) return 'database';
  }
  return undefined;
}

/** gRPC status names by code, as operators read them in Temporal's documentation. */
const GRPC_STATUS_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
];

/** A call Temporal answered, refusing it: its gRPC status and what the server said. */
export interface TemporalRefusal {
  code: number;
  status: string;
  details: string;
}

/** What Temporal refused, following `cause`; undefined for any other error (a Temporal down is unavailableDependency). */
export function temporalRefusal(error: unknown): TemporalRefusal | undefined {
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 5; at = (at as Coded).cause, depth++) {
    // Over a NativeConnection `details` is empty and the server's text is the message.
    if (isGrpcServiceError(at))
      return {
        code: at.code,
        status: GRPC_STATUS_NAMES[at.code] ?? String(at.code),
        details: at.details || at.message,
      };
    // The SDK turns NOT_FOUND for the namespace into an error of its own, without the gRPC one.
    if (at instanceof NamespaceNotFoundError) return { code: 5, status: 'NOT_FOUND', details: at.message };
  }
  return undefined;
}

/** What a caller reads in the 503 problem when Temporal refused: its status, not what it said (the log has that). */
export const refusedDetail = (refusal: TemporalRefusal) => `Temporal refused the request (${refusal.status})`;

/** Knex puts the statement in front of the driver's message. */
const SQL_PREFIX = /^\s*(select|insert|update|delete|with|create|alter|drop|begin|commit|lock)\b/i;

/**
 * An error as it may be logged: a database error keeps its SQLSTATE and the names of what it touched, never its
 * message (Knex prefixes the SQL text) nor detail (PostgreSQL quotes the values: `Key (project_id)=(…)`).
 */
export function loggableError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { type: typeof error };
  const fields = error as Error & Record<string, unknown>;
  const isDatabase =
    typeof fields.severity === 'string' || SQL_PREFIX.test(error.message) || error.name === 'KnexTimeoutError';
  if (isDatabase) {
    const kept: Record<string, unknown> = { type: error.name, database: true };
    for (const key of ['code', 'routine', 'table', 'constraint', 'column', 'schema'])
      if (fields[key] !== undefined) kept[key] = fields[key];
    return kept;
  }
  return { type: error.name, message: error.message, code: fields.code, stack: error.stack };
}

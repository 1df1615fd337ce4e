import type { Knex } from 'knex';
import * as store from '../../db';
import { dateTimeProblem } from '../deliveries/schemas';
import { InvalidQueryError, decodeCursorArray, encodeCursorArray } from '../deliveries/query';
import { assertMember } from '../webhooks/registrations';
import { ApiError } from '../http/errors';
import { isOperator, type OperatorPolicy } from '../auth/operator-policy';

export const DEFAULT_AUDIT_PAGE = 50;
export const MAX_AUDIT_PAGE = 200;

export class NotAuditOperatorError extends ApiError {
  constructor() {
    super(403, 'The caller is not an operator: the whole audit trail is for subjects listed in OPERATOR_SUBJECTS');
  }
}

/** One event as the audit routes show it: never a secret, a token or a payload (none is stored). */
export interface AuditEventView {
  id: string;
  at: string;
  actor: store.AuditActor;
  action: string;
  outcome: store.AuditOutcome;
  projectId?: string;
  registrationId?: string;
  deliveryId?: string;
  changes?: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

export interface AuditPage {
  items: AuditEventView[];
  /** Pass as `cursor` for the next (older) page; absent on the last page. */
  nextCursor?: string;
}

type Query = Record<string, string | string[] | undefined>;

const encodeCursor = (id: string) => encodeCursorArray(['audit', id]);
function decodeCursor(cursor: string): string | undefined {
  const value = decodeCursorArray(cursor, 64);
  return value?.[0] === 'audit' && typeof value[1] === 'string' && /^[1-9]\d{0,17}$/.test(value[1])
    ? value[1]
    : undefined;
}

const TEXT_FILTER = /^[\x21-\x7e]{1,300}$/;

/** Reads the audit routes' query string (project only for operators); every problem is named in one 400. */
export function parseAuditQuery(
  query: Query,
  allowProject: boolean,
): Omit<store.AuditFilter, 'limit'> & { limit: number } {
  const problems: string[] = [];
  const one = (name: string): string | undefined => {
    const value = query[name];
    if (Array.isArray(value)) problems.push(`${name} must be given once`);
    return Array.isArray(value) ? undefined : value;
  };
  const text = (name: string) => {
    const value = one(name);
    if (value !== undefined && !TEXT_FILTER.test(value))
      problems.push(`${name} must be 1 to 300 visible ASCII characters`);
    return value;
  };
  const time = (name: string) => {
    const value = one(name);
    if (value === undefined) return undefined;
    const problem = dateTimeProblem(value);
    if (problem) problems.push(`${name} ${problem}`);
    return problem ? undefined : new Date(value);
  };
  const projectId = allowProject ? text('projectId') : undefined;
  const subject = text('actor');
  const action = text('action');
  const since = time('since');
  const until = time('until');
  const limitText = one('limit');
  const limit = limitText === undefined ? DEFAULT_AUDIT_PAGE : Number(limitText);
  if (!/^\d+$/.test(limitText ?? '1') || limit < 1 || limit > MAX_AUDIT_PAGE)
    problems.push(`limit must be an integer from 1 to ${MAX_AUDIT_PAGE}`);
  const cursorText = one('cursor');
  const beforeId = cursorText === undefined ? undefined : decodeCursor(cursorText);
  if (cursorText !== undefined && !beforeId) problems.push('cursor is not one this API returned');
  if (problems.length > 0) throw new InvalidQueryError(problems);
  return {
    ...(projectId !== undefined && { projectId }),
    ...(subject !== undefined && { subject }),
    ...(action !== undefined && { action }),
    ...(since && { since }),
    ...(until && { until }),
    ...(beforeId && { beforeId }),
    limit,
  };
}

async function page(db: Knex, filter: store.AuditFilter): Promise<AuditPage> {
  const rows = await store.listAuditEvents(db, { ...filter, limit: filter.limit + 1 });
  const items = rows.slice(0, filter.limit);
  const last = items.at(-1);
  return { items, ...(rows.length > filter.limit && last && { nextCursor: encodeCursor(last.id) }) };
}

/** The whole trail, newest first, for operators (OPERATOR_SUBJECTS / OPERATOR_ROLE, as the codec). */
export async function listAuditAsOperator(
  db: Knex,
  operators: OperatorPolicy | undefined,
  claims: object,
  query: Query,
): Promise<AuditPage> {
  if (!operators || !isOperator(operators, claims)) throw new NotAuditOperatorError();
  return page(db, parseAuditQuery(query, true));
}

/** One project's trail, for its members: never another project's rows, a stranger's refusal, or a codec call of another. */
export async function listProjectAudit(db: Knex, userId: string, projectId: string, query: Query): Promise<AuditPage> {
  await assertMember(db, projectId, userId);
  return page(db, { ...parseAuditQuery(query, false), projectId });
}

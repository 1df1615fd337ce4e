// The delivery log's list query and its opaque cursor: pure parsing, no database (api/deliveries/deliveries.ts lists the page).
import { WEBHOOK_ID_PATTERN, WEBHOOK_TYPES } from '../../common/contract';
import {
  DELIVERY_STATUSES,
  type AttemptsPage,
  type DeliveryFilter,
  type DeliveryPosition,
  type DeliveryStatus,
} from '../../db/deliveries';
import { ApiError } from '../http/errors';
import { dateTimeProblem } from './schemas';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
/** A delivery's detail holds its first attempts, this many: all of them for nearly every delivery, as before paging. */
export const DETAIL_ATTEMPTS = MAX_PAGE_SIZE;

export class InvalidQueryError extends ApiError {
  constructor(problems: string[]) {
    super(400, `The query is invalid: ${problems.join('; ')}`);
  }
}

/** The cursor is opaque to callers: the last item's position (creation time to the microsecond, id), base64url JSON. */
export const encodeCursor = (position: DeliveryPosition) => encodeCursorArray([position.createdAt, position.id]);

/** Longer than any cursor this API writes (a 300-character id and a time). */
export const MAX_CURSOR_LENGTH = 512;

/** Every cursor of this API: an array as base64url JSON, opaque to callers. */
export const encodeCursorArray = (values: unknown[]) => Buffer.from(JSON.stringify(values)).toString('base64url');

/** The array a cursor holds, or undefined for anything that is not base64url JSON of an array within maxLength. */
export function decodeCursorArray(cursor: string, maxLength = MAX_CURSOR_LENGTH): unknown[] | undefined {
  if (cursor.length > maxLength || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    return Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The position a cursor names, or undefined for anything this API did not write (a time it cannot hold, a bad id). */
function decodeCursor(cursor: string): DeliveryPosition | undefined {
  const value = decodeCursorArray(cursor);
  if (value?.length !== 2) return undefined;
  const [createdAt, id] = value;
  if (typeof createdAt !== 'string' || !isPositionTime(createdAt)) return undefined;
  if (typeof id !== 'string' || !WEBHOOK_ID_PATTERN.test(id)) return undefined;
  return { createdAt, id };
}

function parseTime(name: string, value: string | undefined, problems: string[]): Date | undefined {
  if (value === undefined) return undefined;
  const problem = dateTimeProblem(value);
  if (problem) problems.push(`${name} ${problem}`);
  return problem ? undefined : new Date(value);
}

/** Reads a query string's parameters, each given at most once; problems are collected for one 400. */
function queryReader(query: Record<string, string | string[] | undefined>, problems: string[]) {
  return (name: string): string | undefined => {
    const value = query[name];
    if (Array.isArray(value)) problems.push(`${name} must be given once`);
    return Array.isArray(value) ? undefined : value;
  };
}

function parseLimit(text: string | undefined, problems: string[]): number {
  const limit = text === undefined ? DEFAULT_PAGE_SIZE : Number(text);
  if (!/^\d+$/.test(text ?? '1') || limit < 1 || limit > MAX_PAGE_SIZE)
    problems.push(`limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return limit;
}

/** Reads the list's query string; every problem is named in one 400. */
export function parseListQuery(query: Record<string, string | string[] | undefined>): DeliveryFilter {
  const problems: string[] = [];
  const one = queryReader(query, problems);
  const status = one('status');
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status))
    problems.push(`status must be one of ${DELIVERY_STATUSES.join(', ')}`);
  const type = one('type');
  if (type !== undefined && !(WEBHOOK_TYPES as readonly string[]).includes(type))
    problems.push(`type must be one of ${WEBHOOK_TYPES.join(', ')}`);
  const since = parseTime('since', one('since'), problems);
  const until = parseTime('until', one('until'), problems);
  const limit = parseLimit(one('limit'), problems);
  const cursorText = one('cursor');
  const after = cursorText === undefined ? undefined : decodeCursor(cursorText);
  if (cursorText !== undefined && !after) problems.push('cursor is not one this API returned');
  if (problems.length > 0) throw new InvalidQueryError(problems);
  return {
    ...(status && { status: status as DeliveryStatus }),
    ...(type && { type }),
    ...(since && { since }),
    ...(until && { until }),
    limit,
    ...(after && { after }),
  };
}

/** An attempts cursor: the last listed attempt's place in the log, base64url JSON like the list's. */
export const encodeAttemptsCursor = (seq: number) => encodeCursorArray([seq]);

function decodeAttemptsCursor(cursor: string): number | undefined {
  const value = decodeCursorArray(cursor);
  if (value?.length !== 1) return undefined;
  const [seq] = value;
  return Number.isSafeInteger(seq) && (seq as number) > 0 ? (seq as number) : undefined;
}

/** Reads the query string of a delivery's attempts page (limit, cursor); every problem is named in one 400. */
export function parseAttemptsQuery(query: Record<string, string | string[] | undefined>): AttemptsPage {
  const problems: string[] = [];
  const one = queryReader(query, problems);
  const limit = parseLimit(one('limit'), problems);
  const cursorText = one('cursor');
  const afterSeq = cursorText === undefined ? undefined : decodeAttemptsCursor(cursorText);
  if (cursorText !== undefined && afterSeq === undefined) problems.push('cursor is not one this API returned');
  if (problems.length > 0) throw new InvalidQueryError(problems);
  return { limit, ...(afterSeq !== undefined && { afterSeq }) };
}

const POSITION_TIME = /^(\d{4})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(\d{3})Z$/;

/** Whether text is a cursor's position time (DeliveryPosition.createdAt) PostgreSQL reads as it was written: a real calendar time, no leap second. */
function isPositionTime(text: string): boolean {
  const match = POSITION_TIME.exec(text);
  if (!match || Number(match[1]) < 1) return false;
  const milliseconds = `${text.slice(0, 23)}Z`;
  const time = new Date(milliseconds);
  return !Number.isNaN(time.getTime()) && time.toISOString() === milliseconds;
}

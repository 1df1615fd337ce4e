import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Knex } from 'knex';
import { isSafeId } from '../../common/contract/ids';
import * as store from '../../db';
import { ApiError } from './errors';
import { unavailableDependency } from './dependency-errors';
import { createTokenBuckets } from './read-limits';
import { SendRateLimitedError } from './send-limits';
import type { PortalGrant } from '../auth/portal-tokens';

/** The audit trail could not take the action's row: the action is rolled back with it. */
export class AuditUnavailableError extends ApiError {
  constructor() {
    super(503, 'The audit trail could not be written; nothing was changed. Try again later');
  }
}

/** A portal link's id in the trail: a digest of its token (the token itself is never written). */
export const portalLinkId = (token: string): string => createHash('sha256').update(token).digest('hex').slice(0, 32);

/**
 * A URL as the trail keeps it: its origin, and a digest of the whole URL, so a change of path or query shows without the
 * path or query (often a capability) being kept in rows that are never changed and live for years.
 */
export const auditedUrl = (url: string): { origin: string; fingerprint: string } => ({
  origin: new URL(url).origin,
  fingerprint: `sha256:${createHash('sha256').update(url).digest('hex')}`,
});

interface ActorContext {
  state: { user?: unknown; portal?: PortalGrant };
  ip: string;
  get(field: string): string;
  response: { get(field: string): string };
}

/** Who is calling, as the trail records it: the token's sub and iss, or the portal link and its capabilities. */
export function auditActor(ctx: ActorContext): store.AuditActor {
  const request = { requestId: ctx.response.get('X-Request-Id') || undefined, callerAddress: ctx.ip || undefined };
  const grant = ctx.state.portal;
  if (grant) {
    const token = /^Bearer (\S+)$/i.exec(ctx.get('Authorization'))?.[1];
    return {
      kind: 'portal-link',
      subject: grant.createdBy,
      ...(token !== undefined && { portalLinkId: portalLinkId(token) }),
      portalCapabilities: [...grant.capabilities],
      ...request,
    };
  }
  const user = ctx.state.user as { sub?: unknown; iss?: unknown } | undefined;
  return {
    kind: 'member',
    ...(typeof user?.sub === 'string' && { subject: user.sub }),
    ...(typeof user?.iss === 'string' && { issuer: user.iss }),
    ...request,
  };
}

/** What appends an action's row: the trail's own append, unless the app was given another (AppDeps.auditWriter). */
export type AuditWriter = (db: store.Db, event: store.AuditEventInput) => Promise<unknown>;

const requestAuditWriter = new AsyncLocalStorage<AuditWriter>();

/**
 * Runs each request with `writer` in place of the trail's append. Only the bench mounts it (AppDeps.auditWriter), to
 * measure what the rows cost; no setting reaches it, so a server started from its configuration always writes them.
 */
export function useAuditWriter(writer: AuditWriter): Middleware {
  return (_ctx, next) => requestAuditWriter.run(writer, next);
}

/** Writes the action's row in the action's transaction; a failed write fails the action (503) and rolls it back. */
export async function recordAudit(
  db: Knex | Knex.Transaction,
  actor: store.AuditActor,
  event: Omit<store.AuditEventInput, 'actor' | 'outcome'> & { outcome?: store.AuditOutcome },
): Promise<void> {
  await recordAuditRow(db, actor, event);
}

/** recordAudit, resolving to the row written (undefined under the bench's stand-in writer, which keeps none). */
export async function recordAuditRow(
  db: Knex | Knex.Transaction,
  actor: store.AuditActor,
  event: Omit<store.AuditEventInput, 'actor' | 'outcome'> & { outcome?: store.AuditOutcome },
): Promise<store.AuditEventRow | undefined> {
  try {
    const write = requestAuditWriter.getStore() ?? store.appendAuditEvent;
    const written = await write(db, { outcome: 'ok', ...event, actor });
    return write === store.appendAuditEvent ? (written as store.AuditEventRow) : undefined;
  } catch (error) {
    // The database not answering is named as such (the error middleware's 503); any other failure is the trail's.
    if (unavailableDependency(error)) throw error;
    throw Object.assign(new AuditUnavailableError(), { cause: error });
  }
}

/** How many refused calls (403) one caller may make a minute, in this process (startApi: REFUSED_CALLS_PER_MINUTE). */
export interface RefusalLimits {
  perMinute: number;
  /** Milliseconds since some fixed time; replaces the process's clock (tests move time with it). */
  clock?: () => number;
}

/**
 * A 403 on an authenticated route leaves a refused row with the subject refused, its project and route. A caller
 * refused more than `limits.perMinute` times a minute (a token bucket per member subject or portal link) is answered
 * 429 before any route runs, and writes nothing more: a valid token cannot make the trail grow without bound.
 */
export function auditRefusals(db: Knex, limits?: RefusalLimits): Middleware<{ user?: unknown; portal?: PortalGrant }> {
  const buckets = limits && createTokenBuckets(limits.perMinute, limits.perMinute / 60, limits.clock);
  return async (ctx, next) => {
    const actor = auditActor(ctx);
    const caller = callerKey(actor);
    const waitMs = buckets?.waitMs(caller);
    if (waitMs !== undefined)
      throw new SendRateLimitedError(
        `Too many refused calls: at most ${limits!.perMinute} a minute per caller; this caller reached the limit`,
        waitMs,
      );
    try {
      await next();
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 403) throw error;
      buckets?.take(caller);
      const params = (ctx as unknown as { params?: Record<string, string> }).params;
      const bodyProject = (ctx.request as { body?: { projectId?: unknown } }).body?.projectId;
      // Only an id in the safe alphabet is written (no NUL, no length the column would refuse): the refusal stays a 403.
      const named = params?.projectId ?? bodyProject;
      const projectId = isSafeId(named) ? named : undefined;
      const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? ctx.path;
      // A stranger's refusal is the operators' to read: filed under the project, anyone could write into its trail.
      const insider = projectId !== undefined && (await actsInProject(db, ctx.state, actor, projectId));
      await recordAudit(db, actor, {
        action: 'access.refused',
        outcome: 'refused',
        ...(insider && { projectId }),
        changes: {
          method: ctx.method,
          route,
          ...(!insider && projectId !== undefined && { namedProjectId: projectId }),
        },
      });
      throw error;
    }
  };
}

/** One caller of the per-caller limits: a token's issuer and subject, or a portal link. */
const callerKey = (actor: store.AuditActor): string =>
  `${actor.kind}\u0000${actor.issuer ?? ''}\u0000${actor.subject ?? ''}\u0000${actor.portalLinkId ?? ''}`;

/** Whether a refused caller acts within the project it named: a link made for it, or a member's token. */
async function actsInProject(
  db: Knex,
  state: { portal?: PortalGrant },
  actor: store.AuditActor,
  projectId: string,
): Promise<boolean> {
  if (state.portal) return state.portal.projectId === projectId;
  if (actor.subject === undefined) return false;
  return (await store.projectAccess(db, projectId, actor.subject)).isMember;
}

/** How many audited writes one caller may make a minute, in this process (startApi: AUDITED_WRITES_PER_MINUTE). */
export interface WriteLimits {
  perMinute: number;
  /** Milliseconds since some fixed time; replaces the process's clock (tests move time with it). */
  clock?: () => number;
}

/** Methods that may leave an audited row; reads never do. */
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Every call that may write a row of the trail (a change, a test send, a link; any POST, PUT, PATCH or DELETE but the
 * codec's) spends a token of its caller's bucket, holding a minute's worth and refilled over the minute: a member or a
 * link holder looping a change is answered 429 with Retry-After before any route runs, and writes nothing. Spent on
 * arrival, not on the row: no action is ever refused after its effect. The codec's calls are not counted: only
 * operators make them, and the Temporal UI decodes a page's events at once.
 */
export function limitAuditedWrites(limits: WriteLimits): Middleware<{ user?: unknown; portal?: PortalGrant }> {
  const { perMinute } = limits;
  const buckets = createTokenBuckets(perMinute, perMinute / 60, limits.clock);
  return async (ctx, next) => {
    if (WRITE_METHODS.has(ctx.method) && !ctx.path.startsWith('/codec/')) {
      const waitMs = buckets.take(callerKey(auditActor(ctx)));
      if (waitMs !== undefined)
        throw new SendRateLimitedError(
          `Too many changes: at most ${perMinute} write calls a minute per caller; this caller reached the limit`,
          waitMs,
        );
    }
    await next();
  };
}

/** The audit row a request writes right before its side effect, once the limits in front of it have admitted it. */
const recordBeforeEffect = new AsyncLocalStorage<() => Promise<void>>();

/** Runs `work`; `record` is written by the effect wrapped in afterAuditRecord, right before it runs. */
export function withAuditBeforeEffect<T>(record: () => Promise<void>, work: () => Promise<T>): Promise<T> {
  return recordBeforeEffect.run(record, work);
}

/**
 * `effect`, run only once the current request's audit row is written: a call a limit refuses (429) writes none, and
 * a row that cannot be written stops the effect (503).
 */
export function afterAuditRecord<A extends unknown[], R>(effect: (...args: A) => Promise<R>) {
  return async (...args: A): Promise<R> => {
    await recordBeforeEffect.getStore()?.();
    return effect(...args);
  };
}

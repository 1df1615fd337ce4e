import { Router } from '@koa/router';
import type { Knex } from 'knex';
import { Connection, isGrpcCancelledError, type ConnectionLike, type ConnectionOptions } from '@temporalio/client';
import type { Logger } from '../../common/telemetry/logger';
import {
  missingSearchAttributesDetail,
  missingSearchAttributesMessage,
  namespaceSearchAttributes,
} from '../../common/temporal/namespace-search-attributes';
import { unavailableDependency } from '../http/dependency-errors';
import { ApiError } from '../http/errors';

/** What readiness depends on: the database pool and the Temporal connection the API's client uses. */
export interface ReadinessDeps {
  db: Knex;
  temporal: Pick<ConnectionLike, 'workflowService' | 'withDeadline'>;
  /** How long one dependency may take to answer before it counts as down. */
  timeoutMs?: number;
  /** The namespace's search attributes, reported next to the checks of a ready API (searchAttributesCheck). */
  searchAttributes?: () => Promise<SearchAttributesReport>;
}

export const READINESS_TIMEOUT_MS = 2_000;

/**
 * A Temporal connection for readiness only, without the SDK's gRPC retries: a probe answers at once, and closing it
 * never races a pending retry (which would throw "Channel has been shut down" from a timer).
 */
export const readinessConnection = (options: ConnectionOptions): Connection =>
  Connection.lazy({ ...options, interceptors: [] });

export type DependencyName = 'postgres' | 'temporal';
export type DependencyState = 'up' | 'down';
export type ReadinessChecks = Record<DependencyName, DependencyState>;

/** Human names, as the 503 detail shows them. */
const LABELS: Record<DependencyName, string> = { postgres: 'Postgres', temporal: 'Temporal' };

class NotReadyError extends ApiError {
  constructor(checks: ReadinessChecks) {
    const down = (Object.keys(checks) as DependencyName[]).filter((name) => checks[name] === 'down');
    super(503, `Not ready: ${down.map((name) => LABELS[name]).join(' and ')} unreachable`, { checks });
  }
}

interface ProbeResult {
  state: DependencyState;
  reason?: string;
}

/** Resolves to 'down' with the reason instead of rejecting, and never later than the deadline. */
async function probe(check: () => Promise<unknown>, timeoutMs: number): Promise<ProbeResult> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<ProbeResult>((resolve) => {
    timer = setTimeout(() => resolve({ state: 'down', reason: `no answer within ${timeoutMs} ms` }), timeoutMs);
  });
  try {
    return await Promise.race([
      check().then(
        (): ProbeResult => ({ state: 'up' }),
        (error: unknown): ProbeResult => ({
          state: 'down',
          reason: error instanceof Error ? error.message : String(error),
        }),
      ),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Shares one in-flight check among concurrent callers, so probes polling a down dependency do not pile up
 * (a pool acquire against a dead Postgres waits for Knex's acquire timeout, far beyond the probe's).
 */
function singleFlight<T>(check: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () =>
    (inFlight ??= check().finally(() => {
      inFlight = undefined;
    }));
}

/** What /readyz says of the ProjectId and WebhookType search attributes: missing ones cost the UI's filters only. */
export type SearchAttributesReport =
  | { state: 'registered' }
  | { state: 'missing'; missing: string[]; detail: string }
  /** The namespace would not list them (a hosted one may refuse the operator API), or Temporal did not answer. */
  | { state: 'unknown' };

/**
 * The namespace's search attributes as /readyz reports them. Logs what a missing one costs the first time it finds
 * out (at start, or at the first probe that reaches Temporal) and again only when that changes: said once, not per probe.
 */
export function searchAttributesCheck(
  temporal: Pick<Connection, 'operatorService' | 'withDeadline'>,
  namespace: string,
  logger: Logger,
  timeoutMs = READINESS_TIMEOUT_MS,
): () => Promise<SearchAttributesReport> {
  let said: string | undefined;
  const sayOnce = (state: string, say: () => void) => {
    if (said !== state) say();
    said = state;
  };
  return singleFlight(async (): Promise<SearchAttributesReport> => {
    const found = await temporal.withDeadline(Date.now() + timeoutMs, () =>
      namespaceSearchAttributes(temporal.operatorService, namespace),
    );
    switch (found.state) {
      case 'missing':
        sayOnce(`missing ${found.missing.join()}`, () =>
          logger.warn({ missing: found.missing, namespace }, missingSearchAttributesMessage(found.missing, namespace)),
        );
        return {
          state: 'missing',
          missing: found.missing,
          detail: missingSearchAttributesDetail(found.missing, namespace),
        };
      case 'registered':
        sayOnce('registered', () => {
          // Registered since this process said they were missing: its clients still start deliveries without them.
          if (said?.startsWith('missing'))
            logger.info({ namespace }, 'search attributes registered; restart the API and the worker to use them');
        });
        return { state: 'registered' };
      case 'unknown':
        // Temporal not answering (readiness says so) or the connection closing: a later probe finds out.
        if (unavailableDependency(found.error) || isGrpcCancelledError(found.error)) return { state: 'unknown' };
        sayOnce('unknown', () =>
          logger.warn(
            { err: found.error, namespace },
            'could not list search attributes; deliveries start with them, and without them if Temporal refuses them',
          ),
        );
        return { state: 'unknown' };
    }
  });
}

/** Public process probes: /healthz (the process answers) and /readyz (Postgres and Temporal answer). */
export function healthRouter(deps: ReadinessDeps): Router {
  const timeoutMs = deps.timeoutMs ?? READINESS_TIMEOUT_MS;
  const checks: Record<DependencyName, () => Promise<unknown>> = {
    postgres: singleFlight(() => deps.db.raw('select 1').timeout(timeoutMs, { cancel: true })),
    // The cheapest call that proves the frontend answers for real, not only that a TCP connection exists.
    temporal: singleFlight(() =>
      deps.temporal.withDeadline(Date.now() + timeoutMs, () => deps.temporal.workflowService.getSystemInfo({})),
    ),
  };

  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const [postgres, temporal, searchAttributes] = await Promise.all([
      probe(checks.postgres, timeoutMs),
      probe(checks.temporal, timeoutMs),
      deps.searchAttributes?.(),
    ]);
    const result: ReadinessChecks = { postgres: postgres.state, temporal: temporal.state };
    if (postgres.state === 'down' || temporal.state === 'down') {
      // The reasons help operators; the caller only learns which dependency is down.
      (ctx.state.log as Logger | undefined)?.warn(
        { checks: result, postgres: postgres.reason, temporal: temporal.reason },
        'not ready',
      );
      throw new NotReadyError(result);
    }
    ctx.body = { status: 'ready', checks: result, ...(searchAttributes && { searchAttributes }) };
  });
  return router;
}

import { timingSafeEqual } from 'node:crypto';
import { Router } from '@koa/router';
import type { Middleware } from 'koa';
import type { Knex } from 'knex';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { deliveryRegistry } from '../../common/telemetry/delivery-metrics';
import { readAlertState } from '../../db';
import { UnauthorizedError } from '../http/errors';

/** The API's own figures: requests by route template and status, and the process's defaults. */
const apiRegistry = new Registry();
collectDefaultMetrics({ register: apiRegistry });

const requestsTotal = new Counter({
  name: 'http_requests_total',
  help: 'API requests, by method, route template and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [apiRegistry],
});

const requestDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'API request latency, by method, route template and status',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [apiRegistry],
});

/** Counts every request under its route template (never the raw path: ids would explode the label set). */
export function requestMetrics(): Middleware {
  return async (ctx, next) => {
    const stop = requestDuration.startTimer();
    try {
      await next();
    } finally {
      const labels = {
        method: ctx.method,
        route: (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unmatched',
        status: String(ctx.status),
      };
      requestsTotal.inc(labels);
      stop(labels);
    }
  };
}

const sameToken = (given: string, expected: string) =>
  given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));

/**
 * Per-project state from the tables every worker writes (breakers, endpoint health), read at each scrape: the
 * delivery counters carry no project (its label would grow with every customer), so alerts per project read these.
 * Only open breakers and failing endpoints are listed; a project that recovers drops out, which resolves its alert.
 */
function alertStateGauges(db: Knex): { registry: Registry; refresh(): Promise<void> } {
  const registry = new Registry();
  const labelNames = ['project'] as const;
  const breakerOpen = new Gauge({
    name: 'webhook_circuit_breaker_open',
    help: "1 for each project whose receiver's circuit breaker is open or half-open (absent: closed)",
    labelNames,
    registers: [registry],
  });
  const consecutiveFailures = new Gauge({
    name: 'webhook_endpoint_consecutive_failures',
    help: "Failed attempts in a row to a project's receiver, for projects failing now (absent: last attempt 2xx)",
    labelNames,
    registers: [registry],
  });
  const failingSeconds = new Gauge({
    name: 'webhook_endpoint_failing_seconds',
    help: "Seconds since a project's receiver began failing, for projects failing now",
    labelNames,
    registers: [registry],
  });
  return {
    registry,
    async refresh() {
      const state = await readAlertState(db);
      for (const gauge of [breakerOpen, consecutiveFailures, failingSeconds]) gauge.reset();
      for (const project of state.openBreakers) breakerOpen.set({ project }, 1);
      for (const endpoint of state.failingEndpoints) {
        consecutiveFailures.set({ project: endpoint.projectId }, endpoint.consecutiveFailures);
        failingSeconds.set({ project: endpoint.projectId }, endpoint.failingSeconds);
      }
    },
  };
}

/**
 * What GET /metrics serves and the OTLP export sends (api/health/otlp-metrics.ts): the API's figures, the per-project alert
 * state read from the database now (a database that does not answer rejects), and the in-process delivery counters.
 */
export function apiMetricsSource(db: Knex): () => Promise<Registry> {
  const alertState = alertStateGauges(db);
  return async () => {
    await alertState.refresh();
    return Registry.merge([apiRegistry, deliveryRegistry, alertState.registry]);
  };
}

/**
 * GET /metrics in the Prometheus text format: the API's figures, the per-project alert state and, when the worker runs
 * in this process, the delivery counters. A bearer token equal to METRICS_TOKEN is required when it is set; production refuses to start
 * without it (loadConfig), so only development serves it openly.
 */
export function metricsRouter(deps: { metricsToken?: string; db: Knex }): Router {
  const router = new Router();
  const readMetrics = apiMetricsSource(deps.db);
  router.get('/metrics', async (ctx) => {
    const { metricsToken } = deps;
    if (metricsToken) {
      const given = /^Bearer (.+)$/i.exec(ctx.get('Authorization'))?.[1] ?? '';
      if (!sameToken(given, metricsToken))
        throw new UnauthorizedError('A bearer token equal to METRICS_TOKEN is required');
    }
    // A database that does not answer fails the scrape (`up` 0, an alert of its own) rather than hide every project.
    const merged = await readMetrics();
    ctx.type = merged.contentType;
    ctx.body = await merged.metrics();
  });
  return router;
}

import { timingSafeEqual } from 'node:crypto';
import { Router } from '@koa/router';
import type { Middleware } from 'koa';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { deliveryRegistry } from '../activities/metrics';
import { UnauthorizedError } from './errors';

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
 * GET /metrics in the Prometheus text format: the API's figures and, when the worker runs in this process, the
 * delivery counters. A bearer token equal to METRICS_TOKEN is required when it is set; production refuses to start
 * without it (loadConfig), so only development serves it openly.
 */
export function metricsRouter(deps: { metricsToken?: string }): Router {
  const router = new Router();
  router.get('/metrics', async (ctx) => {
    const { metricsToken } = deps;
    if (metricsToken) {
      const given = /^Bearer (.+)$/i.exec(ctx.get('Authorization'))?.[1] ?? '';
      if (!sameToken(given, metricsToken))
        throw new UnauthorizedError('A bearer token equal to METRICS_TOKEN is required');
    }
    const merged = Registry.merge([apiRegistry, deliveryRegistry]);
    ctx.type = merged.contentType;
    ctx.body = await merged.metrics();
  });
  return router;
}

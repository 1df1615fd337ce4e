import { randomBytes, randomUUID } from 'node:crypto';
import Koa, { type Middleware } from 'koa';
import { bodyParser } from '@koa/bodyparser';
import type { Knex } from 'knex';
import type { Logger } from '../common/telemetry/logger';
import type { SecretBox } from '../common/crypto/secrets';
import type { SendTestEvent } from './webhooks/test-event';
import { createSendLimiter, limitTestEvents, type RedeliveryLimits, type TestEventLimits } from './http/send-limits';
import { createReadLimiter, type ReadLimits } from './http/read-limits';
import { afterPortalRecheck, authenticate, type AuthOptions } from './auth/authenticate';
import { MAX_BODY, problemDetails } from './http/errors';
import { webhooksRouter } from './webhooks/router';
import { deliveriesRouter } from './deliveries/router';
import { metricsRouter, requestMetrics } from './health/metrics';
import type { RedeliveryStarter, WorkflowEndWatcher } from './deliveries/redelivery';
import { codecAuthentication, codecCors, codecRouter, type CodecDeps } from './codec/router';
import type { WebhookUrlPolicy } from '../common/registration/webhook-url';
import { allowedMethods } from './http/methods';
import { healthRouter, type ReadinessDeps } from './health/router';
import { docsRouter } from './openapi/docs-router';
import {
  afterAuditRecord,
  auditRefusals,
  limitAuditedWrites,
  useAuditWriter,
  type AuditWriter,
  type RefusalLimits,
  type WriteLimits,
} from './http/audited-actions';
import { auditRouter } from './audit/router';
import { erasuresRouter } from './erasures/router';
import type { ErasureDeps } from './erasures/erasures';
import { purgesRouter } from './purges/router';
import type { PurgeDeps } from './purges/purges';
import type { OperatorPolicy } from './auth/operator-policy';
import { createPortalTokens, type PortalTokens } from './auth/portal-tokens';
import { portalPageRouter, portalSessionsRouter } from './portal/router';

export interface AppDeps {
  db: Knex;
  secretBox: SecretBox;
  logger: Logger;
  auth: AuthOptions;
  sendTestEvent: SendTestEvent;
  /** Per-project limits of the test endpoint and TEST redeliveries (default: one in flight, 10 a minute). */
  testEventLimits?: TestEventLimits;
  /** Per-project limits of redeliver and recover calls (default: 60 and 5 a minute, one recovery at a time). */
  redeliveryLimits?: RedeliveryLimits;
  /** Replaces the database's clock for those limits (tests move time with it). */
  limitsClock?: () => Date;
  /** Per-project reads of the delivery log and health, in this process (startApi: READ_CALLS_PER_SECOND); absent: none. */
  readLimits?: ReadLimits;
  /** Refused calls (403) per caller a minute, in this process (startApi: REFUSED_CALLS_PER_MINUTE); absent: none. */
  refusalLimits?: RefusalLimits;
  /** Write calls (POST, PUT, PATCH, DELETE) per caller a minute, in this process (AUDITED_WRITES_PER_MINUTE); absent: none. */
  writeLimits?: WriteLimits;
  /**
   * The probes' dependencies: given, the app serves /healthz and /readyz without a token, before authentication, as it
   * always serves /openapi.json and /docs (which list /codec exactly when `codec` is given).
   */
  readiness?: Omit<ReadinessDeps, 'db'>;
  /** Starts redeliveries (the delivery log's redeliver and recover); without it they answer 503. */
  redelivery?: RedeliveryStarter;
  recoverRatePerSecond?: number;
  /** Tells when a TEST send or redelivery has ended, to free the TEST slot before its lease ends. */
  watchWorkflowEnd?: WorkflowEndWatcher;
  /** GET /metrics asks for this bearer token when set (METRICS_TOKEN). */
  metricsToken?: string;
  /** Temporal's remote codec endpoint for operators (POST /codec/encode, /codec/decode); absent when not given. */
  codec?: CodecDeps;
  /** https-only receivers (production unless ALLOW_HTTP_WEBHOOK_URLS=true); http and https allowed when absent. */
  webhookUrlPolicy?: WebhookUrlPolicy;
  /** PAUSE_MAX_HOURS: how long a pause holds deliveries before it ends by itself (default 72). */
  pauseMaxHours?: number;
  /** Portal links: their signer (a key made per process when absent), PUBLIC_BASE_URL, PORTAL_FRAME_ANCESTORS, PORTAL_LINKS_PER_PROJECT. */
  portal?: { tokens?: PortalTokens; publicBaseUrl?: string; frameAncestors?: string[]; linksPerProject?: number };
  /** Who reads the whole audit trail (GET /audit) and asks for erasures and purges; the codec's operators when absent. */
  operators?: OperatorPolicy;
  /** Erasure of a person's deliveries (POST /erasures): the person hash key and the job's starter; without it, 503. */
  erasures?: Omit<ErasureDeps, 'db'>;
  /** The purge of a whole project (POST /purges): the job's starter; without it, 503. */
  purges?: Omit<PurgeDeps, 'db'>;
  /** The bench's stand-in for the audit trail's append (bench/audit.ts), to measure the rows' cost; never configured. */
  auditWriter?: AuditWriter;
}

const REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;

/**
 * One JSON line per request: request id, method, path, status, duration. The request id is always the server's own
 * (answered in X-Request-Id, recorded in the audit trail); a caller's X-Request-Id is logged beside it, never as ours.
 */
function requestLog(logger: Logger): Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const given = ctx.get('X-Request-Id');
    const reqId = randomUUID();
    ctx.set('X-Request-Id', reqId);
    ctx.state.log = logger.child({ reqId, ...(REQUEST_ID.test(given) && { callerRequestId: given }) });
    try {
      await next();
    } finally {
      const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
      (ctx.state.log as Logger).info(
        { method: ctx.method, path: ctx.path, status: ctx.status, durationMs: Math.round(durationMs * 100) / 100 },
        'request',
      );
    }
  };
}

/** A request that carries a body must carry JSON (a zero-length body counts as none). */
const requireJsonBody: Middleware = async (ctx, next) => {
  const hasBody = ctx.get('Transfer-Encoding') !== '' || (ctx.request.length ?? 0) > 0;
  if (hasBody && !ctx.is('application/json')) ctx.throw(415);
  await next();
};

/** Builds the API; never listens (the server entry point or a test does). */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa();
  // Held in PostgreSQL: every API process counts against the same limits.
  const sendLimiter = createSendLimiter(deps.db, deps.logger, {
    test: deps.testEventLimits,
    redelivery: deps.redeliveryLimits,
    clock: deps.limitsClock,
  });
  // A portal link's request checks its link again right before each send or start (revoked meanwhile: 401).
  const sendTestEvent = limitTestEvents(
    afterPortalRecheck(afterAuditRecord(deps.sendTestEvent)),
    sendLimiter,
    deps.watchWorkflowEnd,
  );
  const redelivery = deps.redelivery && afterPortalRecheck(deps.redelivery);
  const webhooks = webhooksRouter({ ...deps, sendTestEvent });

  if (deps.auditWriter) app.use(useAuditWriter(deps.auditWriter));
  app.use(requestLog(deps.logger));
  app.use(requestMetrics());
  app.use(problemDetails(deps.logger));
  const readLimiter = deps.readLimits && createReadLimiter(deps.readLimits);
  const deliveries = deliveriesRouter({ ...deps, redelivery, sendLimiter, readLimiter });
  const metrics = metricsRouter(deps);
  // The API's own description is always served; the probes when their dependencies are given.
  const publicRoutes = [
    docsRouter(deps),
    ...(deps.readiness ? [healthRouter({ db: deps.db, ...deps.readiness })] : []),
  ];
  const codec = deps.codec && codecRouter(deps.codec, deps.db);
  const operators = deps.operators ?? deps.codec?.operators;
  const audit = auditRouter({ db: deps.db, operators });
  const erasures = erasuresRouter({
    db: deps.db,
    operators,
    ...(deps.erasures && { erasures: { db: deps.db, ...deps.erasures } }),
  });
  const purges = purgesRouter({
    db: deps.db,
    operators,
    ...(deps.purges && { purges: { db: deps.db, ...deps.purges } }),
  });
  const portalTokens = deps.portal?.tokens ?? createPortalTokens([{ id: 'process', key: randomBytes(32) }]);
  const portalPage = portalPageRouter(deps.portal);
  const portalSessions = portalSessionsRouter({
    db: deps.db,
    portalTokens,
    publicBaseUrl: deps.portal?.publicBaseUrl,
    linksPerProject: deps.portal?.linksPerProject,
  });
  // The Temporal UI's CORS preflight for /codec is answered before the 405/OPTIONS rule and before auth.
  if (deps.codec) app.use(codecCors(deps.codec));
  app.use(
    allowedMethods([
      ...publicRoutes,
      metrics,
      portalPage,
      webhooks,
      deliveries,
      portalSessions,
      audit,
      erasures,
      purges,
      ...(codec ? [codec] : []),
    ]),
  );
  for (const router of publicRoutes) app.use(router.routes());
  app.use(metrics.routes());
  app.use(portalPage.routes());
  const auth = authenticate(deps.auth, portalTokens);
  app.use(deps.codec ? codecAuthentication(deps.codec, auth) : auth);
  app.use(requireJsonBody);
  app.use(bodyParser({ enableTypes: ['json'], jsonLimit: MAX_BODY, encoding: 'utf-8' }));
  // Below authentication: a 401 writes nothing (nobody without a valid token can make the trail grow); a 403 does.
  app.use(auditRefusals(deps.db, deps.refusalLimits));
  if (deps.writeLimits) app.use(limitAuditedWrites(deps.writeLimits));
  // No router.allowedMethods(): allowedMethods above answers 405 and OPTIONS for the known paths, before
  // authentication; the routers' own would answer 501 to a TRACE on an unknown path, which is a 404.
  app.use(webhooks.routes());
  app.use(deliveries.routes());
  app.use(portalSessions.routes());
  app.use(audit.routes());
  app.use(erasures.routes());
  app.use(purges.routes());
  if (codec) app.use(codec.routes());

  // Only errors thrown outside the problem-details middleware land here.
  app.on('error', (err: unknown) => deps.logger.error({ err }, 'unhandled error'));
  return app;
}

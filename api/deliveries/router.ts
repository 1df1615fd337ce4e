import { Router, type RouterContext } from '@koa/router';
import { callerId, portalGuard } from '../auth/authenticate';
import { auditActor } from '../http/audited-actions';
import type { PortalGrant } from '../auth/portal-tokens';
import { WEBHOOK_ID_PATTERN } from '../../common/contract';
import * as deliveries from './deliveries';
import { InvalidParameterError } from '../http/errors';
import { projectIdParam } from '../http/validation';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant }>;

/** A project's delivery log, redelivery, recovery and endpoint health, for its members. */
export function deliveriesRouter(deps: deliveries.DeliveryDeps): Router {
  const project = (ctx: Context) => projectIdParam(ctx.params.projectId);
  // A delivery id is an X-Webhook-Id: anything else (a NUL byte, say) never reaches the database.
  const deliveryId = (ctx: Context) => {
    const id = ctx.params.id ?? '';
    if (!WEBHOOK_ID_PATTERN.test(id)) throw new InvalidParameterError('id', '1 to 300 visible ASCII characters');
    return id;
  };
  const handlers = {
    list: async (ctx: Context) => {
      ctx.body = await deliveries.listDeliveries(deps, callerId(ctx.state), project(ctx), ctx.query);
    },
    get: async (ctx: Context) => {
      ctx.body = await deliveries.getDelivery(deps, callerId(ctx.state), project(ctx), deliveryId(ctx));
    },
    attempts: async (ctx: Context) => {
      ctx.body = await deliveries.listAttempts(deps, callerId(ctx.state), project(ctx), deliveryId(ctx), ctx.query);
    },
    redeliver: async (ctx: Context) => {
      ctx.body = await deliveries.redeliver(deps, callerId(ctx.state), project(ctx), deliveryId(ctx), auditActor(ctx));
      ctx.status = 202;
    },
    recover: async (ctx: Context) => {
      ctx.body = await deliveries.recoverDeliveries(
        deps,
        callerId(ctx.state),
        project(ctx),
        ctx.request.body,
        auditActor(ctx),
      );
      ctx.status = 202;
    },
    health: async (ctx: Context) => {
      ctx.body = await deliveries.getEndpointHealth(deps, callerId(ctx.state), project(ctx));
    },
  };

  // Portal links read the log and health, and act on deliveries when they may manage.
  const portal = portalGuard(deps.db);
  const router = new Router({ prefix: '/webhooks/project/:projectId' });
  router.get('/deliveries', portal('read'), handlers.list);
  router.post('/deliveries/recover', portal('manage'), handlers.recover);
  router.get('/deliveries/:id', portal('read'), handlers.get);
  router.get('/deliveries/:id/attempts', portal('read'), handlers.attempts);
  router.post('/deliveries/:id/redeliver', portal('manage'), handlers.redeliver);
  router.get('/health', portal('read'), handlers.health);
  return router;
}

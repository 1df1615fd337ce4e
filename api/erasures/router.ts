import { Router, type RouterContext } from '@koa/router';
import type { Knex } from 'knex';
import { callerId } from '../auth/authenticate';
import type { OperatorPolicy } from '../auth/operator-policy';
import type { PortalGrant } from '../auth/portal-tokens';
import { auditActor } from '../http/audited-actions';
import {
  ErasureUnavailableError,
  asOperator,
  erasureCertificate,
  erasureStatus,
  requestErasure,
  type ErasureDeps,
} from './erasures';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant }>;

/** Erasure of one person's deliveries, for operators: request it, poll it, export its certificate. */
export function erasuresRouter(deps: { db: Knex; operators?: OperatorPolicy; erasures?: ErasureDeps }): Router {
  const router = new Router();
  /** The caller is an operator (a portal link never is): every erasure route asks first. */
  const operator = (ctx: Context) => {
    callerId(ctx.state);
    asOperator(deps.operators, ctx.state.user as object);
  };
  router.post('/erasures', async (ctx: Context) => {
    operator(ctx);
    if (!deps.erasures) throw new ErasureUnavailableError();
    const erasure = await requestErasure(deps.erasures, auditActor(ctx), ctx.request.body);
    ctx.status = 202;
    ctx.set('Location', `/erasures/${erasure.id}`);
    ctx.body = { id: erasure.id, status: erasure.status };
  });
  router.get('/erasures/:id', async (ctx: Context) => {
    operator(ctx);
    ctx.body = await erasureStatus(deps.db, ctx.params.id!);
  });
  router.get('/erasures/:id/certificate', async (ctx: Context) => {
    operator(ctx);
    ctx.body = await erasureCertificate(deps.db, ctx.params.id!);
  });
  return router;
}

import { Router, type RouterContext } from '@koa/router';
import type { Knex } from 'knex';
import { callerId } from '../auth/authenticate';
import type { OperatorPolicy } from '../auth/operator-policy';
import type { PortalGrant } from '../auth/portal-tokens';
import { auditActor } from '../http/audited-actions';
import {
  PurgeUnavailableError,
  asOperator,
  purgeCertificate,
  purgeStatus,
  requestPurge,
  type PurgeDeps,
} from './purges';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant }>;

/** The purge of a whole project, for operators: request it (or run it again), poll it, export its certificate. */
export function purgesRouter(deps: { db: Knex; operators?: OperatorPolicy; purges?: PurgeDeps }): Router {
  const router = new Router();
  /** The caller is an operator (a portal link never is): every purge route asks first. */
  const operator = (ctx: Context) => {
    callerId(ctx.state);
    asOperator(deps.operators, ctx.state.user as object);
  };
  router.post('/purges', async (ctx: Context) => {
    operator(ctx);
    if (!deps.purges) throw new PurgeUnavailableError();
    const { purge, outcome } = await requestPurge(deps.purges, auditActor(ctx), ctx.request.body);
    // One under way already: that one, as it stands. A new one, or a failed one run again: accepted.
    ctx.status = outcome === 'pending' ? 200 : 202;
    ctx.set('Location', `/purges/${purge.id}`);
    ctx.body = purge;
  });
  router.get('/purges/:purgeId', async (ctx: Context) => {
    operator(ctx);
    ctx.body = await purgeStatus(deps.db, ctx.params.purgeId!);
  });
  router.get('/purges/:purgeId/certificate', async (ctx: Context) => {
    operator(ctx);
    ctx.body = await purgeCertificate(deps.db, ctx.params.purgeId!);
  });
  return router;
}

import { Router, type RouterContext } from '@koa/router';
import type { Knex } from 'knex';
import { callerId, portalGuard } from '../auth/authenticate';
import { listAuditAsOperator, listProjectAudit } from './audit-log';
import { projectIdParam } from '../http/validation';
import type { OperatorPolicy } from '../auth/operator-policy';
import type { PortalGrant } from '../auth/portal-tokens';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant }>;

/** The audit trail: all of it for operators, a project's own for its members (and its manage links). */
export function auditRouter(deps: { db: Knex; operators?: OperatorPolicy }): Router {
  const portal = portalGuard(deps.db);
  const router = new Router();
  router.get('/audit', async (ctx: Context) => {
    callerId(ctx.state);
    ctx.body = await listAuditAsOperator(deps.db, deps.operators, ctx.state.user as object, ctx.query);
  });
  router.get('/webhooks/project/:projectId/audit', portal('manage'), async (ctx: Context) => {
    ctx.body = await listProjectAudit(deps.db, callerId(ctx.state), projectIdParam(ctx.params.projectId), ctx.query);
  });
  return router;
}

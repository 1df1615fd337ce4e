import { Router, type RouterContext } from '@koa/router';
import { callerId, portalGuard } from '../auth/authenticate';
import { auditActor } from '../http/audited-actions';
import * as registrations from './registrations';
import { pauseWebhook, resumeWebhook, type PauseDeps } from './pause';
import { getNotificationContacts, setNotificationContacts } from './notices';
import { projectIdParam } from '../http/validation';
import { validateRegisterBody, validateRotateSecretBody, validateUpdateBody } from './schemas';
import type { WebhookUrlPolicy } from '../../common/registration/webhook-url';
import type { PortalGrant } from '../auth/portal-tokens';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant }>;

/** A read-only portal link sees the receiver's origin only: paths and queries often carry a capability. */
const shownUrl = (url: string, state: Context['state']) =>
  state.portal && !state.portal.capabilities.includes('manage') ? new URL(url).origin : url;

/** The management endpoints of spec section 4; handlers validate, call the domain, shape the response. */
export function webhooksRouter(deps: PauseDeps & { webhookUrlPolicy?: WebhookUrlPolicy }): Router {
  const handlers = {
    register: async (ctx: Context) => {
      ctx.body = await registrations.registerWebhook(
        deps,
        callerId(ctx.state),
        validateRegisterBody(ctx.request.body, deps.webhookUrlPolicy),
        auditActor(ctx),
      );
      ctx.status = 201;
    },
    update: async (ctx: Context) => {
      ctx.body = await registrations.updateWebhook(
        deps,
        callerId(ctx.state),
        validateUpdateBody(ctx.request.body, deps.webhookUrlPolicy),
        auditActor(ctx),
      );
    },
    get: async (ctx: Context) => {
      const view = await registrations.getWebhook(deps, callerId(ctx.state), projectIdParam(ctx.params.projectId));
      ctx.body = { ...view, url: shownUrl(view.url, ctx.state) };
    },
    delete: async (ctx: Context) => {
      await registrations.deleteWebhook(
        deps,
        callerId(ctx.state),
        projectIdParam(ctx.params.projectId),
        auditActor(ctx),
      );
      ctx.status = 204;
    },
    rotateSecret: async (ctx: Context) => {
      const body = validateRotateSecretBody(ctx.request.body ?? {});
      ctx.body = await registrations.rotateWebhookSecret(
        deps,
        callerId(ctx.state),
        projectIdParam(ctx.params.projectId),
        body,
        auditActor(ctx),
      );
    },
    rotateSigningKey: async (ctx: Context) => {
      const body = validateRotateSecretBody(ctx.request.body ?? {});
      ctx.body = await registrations.rotateWebhookSigningKey(
        deps,
        callerId(ctx.state),
        projectIdParam(ctx.params.projectId),
        body,
        auditActor(ctx),
      );
    },
    pause: async (ctx: Context) => {
      const project = projectIdParam(ctx.params.projectId);
      ctx.body = await pauseWebhook(deps, callerId(ctx.state), project, ctx.request.body, auditActor(ctx));
    },
    resume: async (ctx: Context) => {
      ctx.body = await resumeWebhook(deps, callerId(ctx.state), projectIdParam(ctx.params.projectId), auditActor(ctx));
    },
    notices: async (ctx: Context) => {
      ctx.body = await getNotificationContacts(deps, callerId(ctx.state), projectIdParam(ctx.params.projectId));
    },
    setNotices: async (ctx: Context) => {
      const project = projectIdParam(ctx.params.projectId);
      ctx.body = await setNotificationContacts(deps, callerId(ctx.state), project, ctx.request.body, auditActor(ctx));
    },
    test: async (ctx: Context) => {
      ctx.body = await registrations.testWebhook(
        deps,
        callerId(ctx.state),
        projectIdParam(ctx.params.projectId),
        auditActor(ctx),
      );
    },
  };

  // Portal links reach only the routes given a guard, and only for their capability; register and delete are members'.
  const portal = portalGuard(deps.db);
  const router = new Router({ prefix: '/webhooks' });
  router.post('/register', handlers.register);
  router.patch('/', portal('manage', 'body'), handlers.update);
  router.get('/project/:projectId', portal('read'), handlers.get);
  router.delete('/project/:projectId', handlers.delete);
  router.post('/test/project/:projectId', portal('manage'), handlers.test);
  router.post('/project/:projectId/secret/rotate', portal('manage'), handlers.rotateSecret);
  router.post('/project/:projectId/signing-key/rotate', portal('manage'), handlers.rotateSigningKey);
  router.post('/project/:projectId/pause', portal('manage'), handlers.pause);
  router.post('/project/:projectId/resume', portal('manage'), handlers.resume);
  router.get('/project/:projectId/notifications', portal('manage'), handlers.notices);
  router.put('/project/:projectId/notifications', portal('manage'), handlers.setNotices);
  return router;
}

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Router, type RouterContext } from '@koa/router';
import { callerId } from '../auth/authenticate';
import { auditActor } from '../http/audited-actions';
import { createPortalSession, revokePortalSessions, type PortalDeps } from './links';
import { projectIdParam } from '../http/validation';
import type { PortalGrant } from '../auth/portal-tokens';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant }>;

/** Members make and revoke links to their project's portal. Portal tokens cannot: these routes have no guard. */
export function portalSessionsRouter(deps: PortalDeps): Router {
  const router = new Router({ prefix: '/webhooks/project/:projectId/portal-sessions' });
  router.post('/', async (ctx: Context) => {
    const projectId = projectIdParam(ctx.params.projectId);
    ctx.body = await createPortalSession(
      deps,
      callerId(ctx.state),
      projectId,
      ctx.request.body,
      // Without PUBLIC_BASE_URL (development only): this server on loopback, whatever Host the caller sent.
      `http://127.0.0.1:${ctx.req.socket.localPort}`,
      auditActor(ctx),
    );
    ctx.status = 201;
  });
  router.delete('/', async (ctx: Context) => {
    await revokePortalSessions(deps, callerId(ctx.state), projectIdParam(ctx.params.projectId), auditActor(ctx));
    ctx.status = 204;
  });
  return router;
}

/** The page's files: portal/ beside api/ in the sources, and dist/portal beside dist/api once built. */
const PORTAL_DIR = join(__dirname, '..', '..', 'portal');

const ASSETS = {
  '/portal': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/portal/portal.js': { file: 'portal.js', type: 'text/javascript; charset=utf-8' },
  '/portal/portal.css': { file: 'portal.css', type: 'text/css; charset=utf-8' },
} as const;

export interface PortalPageOptions {
  /** PORTAL_FRAME_ANCESTORS: origins that may embed the page in an iframe; none when empty. */
  frameAncestors?: string[];
}

/**
 * The portal page: static HTML, one script and one stylesheet, read once. Served without a token (the link's token
 * stays in the URL fragment, which browsers never send) under a Content-Security-Policy that allows this origin's
 * script, style and API calls only.
 */
export function portalPageRouter(options: PortalPageOptions = {}): Router {
  const ancestors = options.frameAncestors?.length ? options.frameAncestors.join(' ') : "'none'";
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${ancestors}`,
  ].join('; ');
  const router = new Router();
  for (const [path, { file, type }] of Object.entries(ASSETS)) {
    const body = readFileSync(join(PORTAL_DIR, file));
    router.get(path, (ctx) => {
      ctx.set('Content-Security-Policy', csp);
      ctx.set('Referrer-Policy', 'no-referrer');
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Cache-Control', 'no-cache');
      ctx.type = type;
      ctx.body = body;
    });
  }
  return router;
}

import type { Middleware } from 'koa';
import type { Router } from '@koa/router';
import { ApiError } from './errors';

/** A known path asked with a method it does not serve (TRACE, PUT on a GET route, …). */
export class MethodNotAllowedError extends ApiError {
  constructor(method: string) {
    super(405, `The method ${method} is not allowed on this resource`);
  }
}

/**
 * Answers 405 with `Allow` for any method a known path does not serve, and OPTIONS with 204 and `Allow`, before
 * authentication: the router's own allowedMethods() answers 501 to methods it has never heard of (TRACE), and only
 * after a token was checked.
 */
export function allowedMethods(routers: Router[]): Middleware {
  return async (ctx, next) => {
    const allowed = new Set<string>();
    for (const router of routers) {
      const match = router.match(ctx.path, ctx.method);
      if (match.route) {
        await next();
        return;
      }
      // A static segment (…/deliveries/recover) wins over a parameter that would also match it (…/deliveries/:id).
      const fewest = Math.min(...match.path.map((layer) => layer.paramNames.length));
      for (const layer of match.path.filter((candidate) => candidate.paramNames.length === fewest))
        for (const method of layer.methods) allowed.add(method);
    }
    if (allowed.size === 0) {
      await next();
      return;
    }
    ctx.set('Allow', [...allowed, 'OPTIONS'].join(', '));
    if (ctx.method === 'OPTIONS') {
      ctx.status = 204;
      return;
    }
    throw new MethodNotAllowedError(ctx.method);
  };
}

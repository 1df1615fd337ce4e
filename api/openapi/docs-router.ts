import { createReadStream } from 'node:fs';
import { dirname, join } from 'node:path';
import { Router } from '@koa/router';
import { buildOpenApiDocument } from './document';

/** swagger-ui-dist's folder; resolved through package.json so its browser bundle is never loaded into Node. */
const SWAGGER_UI_DIR = dirname(require.resolve('swagger-ui-dist/package.json'));

/** The only files /docs serves from swagger-ui-dist: a fixed list, so no request names a path on disk. */
export const SWAGGER_ASSETS: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

const INITIALIZER = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>Webhook delivery service API</title>
    <link rel="stylesheet" href="/docs/swagger-ui.css" />
    <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32" />
    <link rel="icon" type="image/png" href="/docs/favicon-16x16.png" sizes="16x16" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="/docs/swagger-ui-bundle.js"></script>
    <script src="/docs/swagger-initializer.js"></script>
  </body>
</html>
`;

/**
 * Public API documentation: the OpenAPI document and Swagger UI rendering it, served from node_modules. Given the deps
 * createApp gets, so the document lists the optional routes (/codec) exactly when the app mounts them.
 */
export function docsRouter(app: { codec?: object } = {}): Router {
  const document = buildOpenApiDocument({ codec: app.codec !== undefined });
  const router = new Router();
  router.get('/openapi.json', (ctx) => {
    ctx.body = document;
  });
  router.get('/docs', (ctx) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });
  router.get('/docs/swagger-initializer.js', (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.body = INITIALIZER;
  });
  router.get('/docs/:asset', (ctx) => {
    const asset = ctx.params.asset ?? '';
    const type = Object.hasOwn(SWAGGER_ASSETS, asset) ? SWAGGER_ASSETS[asset] : undefined;
    if (type === undefined) return ctx.throw(404);
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.type = type;
    ctx.body = createReadStream(join(SWAGGER_UI_DIR, asset));
  });
  return router;
}

// The management API: the Koa app, its server entry point, and the pieces the OpenAPI document reuses.
export { createApp, type AppDeps } from './app';
export { startApi, type RunningApi, type StartApiDeps } from './server';
export { authOptionsFromConfig, type AuthOptions } from './auth';
export * as schemas from './schemas';
export * from './errors';

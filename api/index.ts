// The management API: the Koa app, its server entry point, the registration's request schemas and the errors.
export { createApp, type AppDeps } from './app';
export { startApi, type RunningApi, type StartApiDeps } from './server';
export { authOptionsFromConfig, type AuthOptions } from './auth/authenticate';
export * as schemas from './webhooks/schemas';
export * from './http/errors';

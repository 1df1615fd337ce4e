// The worker's activities: the local registration lookup and the signed POST of one attempt.
import { createDeliverWebhookAttempt } from './delivery';
import type { ActivityDeps } from './deps';
import { createWebhookHttpClient } from './http';
import { createPlanDelivery } from './lookup';

export type { ActivityConfig, ActivityDeps } from './deps';
export { createWebhookHttpClient, type WebhookHttpClient } from './http';
export { ForbiddenTargetError, forbiddenRange } from './ssrf';

export function createActivities(deps: ActivityDeps) {
  const http =
    deps.http ??
    createWebhookHttpClient({
      timeoutMs: deps.config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: deps.config.ALLOW_PRIVATE_WEBHOOK_URLS,
    });
  return {
    planDelivery: createPlanDelivery(deps),
    deliverWebhookAttempt: createDeliverWebhookAttempt({ ...deps, http }),
  };
}

// The worker's activities: the local registration lookup and the signed POST of one attempt.
import { createDeliverWebhookAttempt } from './attempt';
import type { ActivityDeps } from './deps';
import { createPlanDelivery } from './plan';

export type { ActivityConfig, ActivityDeps } from './deps';
export { createWebhookHttpClient, type WebhookHttpClient } from './http';
export { ForbiddenTargetError, forbiddenRange } from './ssrf';

export function createActivities(deps: ActivityDeps) {
  return {
    planDelivery: createPlanDelivery(deps),
    deliverWebhookAttempt: createDeliverWebhookAttempt(deps),
  };
}

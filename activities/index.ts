// The worker's activities: the local registration lookup and the signed POST of one attempt.
import { createDeliverWebhookAttempt } from './attempt';
import { createDeliveryLog, createRecordDeliveryOutcome } from './delivery-log';
import type { ActivityDeps } from './deps';
import { createPlanDelivery } from './plan';

export type { ActivityConfig, ActivityDeps } from './deps';
export type { AlertOptions, OperatorAlert } from './alerts';
export { deliveryRegistry } from './metrics';
export { createWebhookHttpClient, type WebhookHttpClient } from './http';
export { ForbiddenTargetError, forbiddenRange } from './ssrf';

export function createActivities(deps: ActivityDeps) {
  const deliveryLog = createDeliveryLog(deps);
  return {
    planDelivery: createPlanDelivery({ ...deps, deliveryLog }),
    deliverWebhookAttempt: createDeliverWebhookAttempt(deps, deliveryLog),
    recordDeliveryOutcome: createRecordDeliveryOutcome(deps, deliveryLog),
  };
}

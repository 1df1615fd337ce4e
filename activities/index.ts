// The worker's activities: the local registration lookup and the signed POST of one attempt.
import { createAttempt } from './attempt';
import { createDeliveryLog, createRecordDeliveryOutcome } from './delivery-log';
import type { ActivityDeps } from './deps';
import type { DeliveryAttemptInput } from '../common/contract';
import { createPlanDelivery } from './plan';
import { traceAttempts } from './tracing';
import { tracingEnabled } from '../common/telemetry/tracing';

export type { ActivityConfig, ActivityDeps } from './deps';
export type { AlertOptions, OperatorAlert } from './alerts';
export { deliveryRegistry } from '../common/telemetry/delivery-metrics';
export { DELIVERY_OPTIONS, type DeliveryOption } from './delivery-options';
export { createWebhookHttpClient, egressProxy, proxyOrigin, type WebhookHttpClient } from './http/client';
export { ForbiddenTargetError, forbiddenRange } from './http/ssrf';
export { traceHttpClient } from './tracing';

export function createActivities(deps: ActivityDeps) {
  const deliveryLog = createDeliveryLog(deps);
  const untraced = createAttempt(deps, deliveryLog);
  // With tracing on, each attempt (the lookup's first one included) gets its span; off, the function is untouched.
  const attempt = tracingEnabled() ? traceAttempts(untraced) : untraced;
  return {
    planDelivery: createPlanDelivery({ ...deps, deliveryLog, attempt }),
    // The activity reads the registration afresh at every attempt: a DELETE or a re-registration takes effect.
    deliverWebhookAttempt: (input: DeliveryAttemptInput) => attempt(input),
    recordDeliveryOutcome: createRecordDeliveryOutcome(deps, deliveryLog),
  };
}

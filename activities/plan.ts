import { validateDeliveryInput } from '../common/contract/validate';
import { findRegistration } from '../db';
import type { DeliverWebhookEventInput, DeliveryPlan } from '../common/contract';
import type { DeliveryLog } from './delivery-log';
import type { ActivityDeps } from './deps';

/**
 * Local activity: validates the event (ajv cannot run in the workflow sandbox), says whether the project has a
 * webhook and which types it subscribes to, and hands over the worker's retry policy. Never the URL or secret.
 */
export function createPlanDelivery({
  db,
  config,
  searchAttributes = true,
  deliveryLog,
}: Pick<ActivityDeps, 'db' | 'config' | 'searchAttributes'> & { deliveryLog?: DeliveryLog }) {
  return async function planDelivery(input: unknown): Promise<DeliveryPlan> {
    const plan: DeliveryPlan = {
      registered: false,
      types: [],
      retry: {
        initialIntervalMs: config.DELIVERY_INITIAL_INTERVAL_MS,
        backoffCoefficient: config.DELIVERY_BACKOFF_COEFFICIENT,
        maximumIntervalMs: config.DELIVERY_MAX_INTERVAL_MS,
        giveUpAfterMs: config.DELIVERY_GIVE_UP_AFTER_MS,
      },
      attemptTimeoutMs: config.WEBHOOK_TIMEOUT_MS,
      searchAttributes,
      firstAttemptLocal: config.DELIVERY_FIRST_ATTEMPT_LOCAL ?? true,
    };
    const problem = validateDeliveryInput(input);
    if (problem !== undefined) return { ...plan, problem };
    const registration = await findRegistration(db, (input as { projectId: string }).projectId);
    await deliveryLog?.planned(input as DeliverWebhookEventInput, registration?.types);
    return registration ? { ...plan, registered: true, types: registration.types } : plan;
  };
}

// Task-queue priority of a delivery: emergencies first across projects whenever work is queued. Sandbox-safe.
import type { WebhookType } from './events';

/**
 * Temporal priority keys (1 is dispatched first; the server's default levels are 1 to 5): a fall before a vital
 * threshold before a test, whatever the project. Set on the workflow start and on every activity it schedules.
 */
export const PRIORITY_KEYS: Readonly<Record<WebhookType, number>> = {
  FALL_DETECTION: 1,
  VITAL_THRESHOLD: 3,
  TEST: 5,
};

export const priorityKeyOf = (webhookType: WebhookType): number => PRIORITY_KEYS[webhookType] ?? PRIORITY_KEYS.TEST;

// The event types of spec section 6 and the names every runtime shares: sandbox-safe, no I/O, no imports.

/** Event types a webhook can subscribe to (spec section 2). */
export const SUBSCRIBABLE_TYPES = ['FALL_DETECTION', 'VITAL_THRESHOLD'] as const;
export type SubscribableType = (typeof SUBSCRIBABLE_TYPES)[number];

/** Every type a delivery can carry; TEST is sent only by the test endpoint, whatever the subscription. */
export const WEBHOOK_TYPES = [...SUBSCRIBABLE_TYPES, 'TEST'] as const;
export type WebhookType = (typeof WEBHOOK_TYPES)[number];

/** Allowed values of ThresholdResult.vitalType (spec section 6). */
export const VITAL_TYPES = [
  'heartrate',
  'heartrateVariability',
  'respiratoryRate',
  'pulseox',
  'bloodPressureSystolic',
  'bloodPressureDiastolic',
  'glucose',
  'temperature',
  'EKG',
] as const;
export type VitalType = (typeof VITAL_TYPES)[number];

/** Project ids are at most this long (they also become a search attribute value and part of test workflow ids). */
export const MAX_PROJECT_ID_LENGTH = 200;

export const DEFAULT_TASK_QUEUE = 'webhooks';
export const DELIVER_WORKFLOW_TYPE = 'deliverWebhookEvent';

/** An X-Webhook-Id a redelivery may carry: 1 to 300 visible ASCII characters, safe in a header. */
export const WEBHOOK_ID_PATTERN = /^[\x21-\x7e]{1,300}$/;

// The events of spec section 6 and the workflow input: sandbox-safe, no I/O (type imports only).
import type { FromSchema } from './from-schema';
import type { eventSchemas } from './schemas';

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

/** The payload of each event type, derived from its JSON Schema (./schemas), so the two cannot differ. */
export type PayloadOf<T extends WebhookType> = FromSchema<(typeof eventSchemas)[T]>;
export type FallDetectionPayload = PayloadOf<'FALL_DETECTION'>;
export type VitalThresholdPayload = PayloadOf<'VITAL_THRESHOLD'>;
export type ThresholdResult = VitalThresholdPayload['triggeredVitals'][number];
export type TestPayload = PayloadOf<'TEST'>;
export type EventPayload = PayloadOf<WebhookType>;

/** Input of the `deliverWebhookEvent` workflow: the public contract for the monitoring system. */
export interface DeliverWebhookEventInput {
  projectId: string;
  webhookType: WebhookType;
  userUUID: string;
  /** The event data, sent as the request body (the wrapper with userUUID and webhookType is not sent). */
  payload: EventPayload;
  /** A redelivery's X-Webhook-Id: the original event's, so receivers deduplicate. Absent: the workflow id. */
  webhookId?: string;
  /**
   * The workflow id this input was sealed for (every start of ours sets it, inside the encrypted input): a copy of
   * the input started under another id is refused, so a copied history cannot deliver an event twice. Absent in
   * inputs from before it; a production worker refuses those when they arrive (histories in flight replay as they ran).
   */
  workflowId?: string;
}

/** An X-Webhook-Id a redelivery may carry: 1 to 300 visible ASCII characters, safe in a header. */
export const WEBHOOK_ID_PATTERN = /^[\x21-\x7e]{1,300}$/;

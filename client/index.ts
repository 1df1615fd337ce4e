// What the monitoring system and receivers import: emit events, check signatures, and the shared types.
export {
  emitWebhookEvent,
  eventWorkflowId,
  WebhookEventAlreadyEmittedError,
  type EmitOptions,
  type WebhookEvent,
} from './emit';
export { InvalidWebhookEventError, validateEvent, validateDeliveryInput, eventSchemas } from './events';
export { createTestEventSender } from './test-event';
export { connectTemporalClient } from './temporal';
export {
  verifyWebhookSignature,
  checkWebhookSignature,
  signPayload,
  type SignatureCheck,
  type VerifyWebhookSignatureInput,
} from '../common/signature';
export * from '../common/types';
export {
  FailureType,
  type DeliverWebhookEventResult,
  type DeliveryFailedDetails,
  type AttemptFailureDetails,
} from '../workflows/contract';

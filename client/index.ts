// The published package: what the monitoring system imports to emit events, what receivers import to verify
// deliveries, and the contract's types. Nothing here is internal plumbing.
export {
  emitWebhookEvent,
  eventWorkflowId,
  WebhookEventAlreadyEmittedError,
  type EmitOptions,
  type WebhookEvent,
} from './emit';
export { InvalidWebhookEventError, validateEvent, validateDeliveryInput } from '../common/contract/validate';
/** `EmitOptions.personHashKey` from the service's PERSON_HASH_KEY (64 hex digits or base64 of 32 bytes). */
export { parsePersonHashKey } from '../common/crypto/person-hash';
export { connectTemporalClient } from '../common/temporal/connection';
/**
 * For a monitoring system that builds its own Temporal Client:
 * `dataConverter: encryptedDataConverter(new EncryptionCodec(parsePayloadKeyRing(keys)))`. A production worker refuses
 * an event that is not encrypted with the payload key.
 */
export {
  EncryptionCodec,
  encryptedDataConverter,
  parsePayloadKeyRing,
  type PayloadKey,
} from '../common/crypto/payload-codec';
export {
  verifyWebhookSignature,
  checkWebhookSignature,
  signPayload,
  verifyStandardWebhook,
  checkStandardWebhook,
  signStandardWebhook,
  verifyStandardWebhookV1a,
  checkStandardWebhookV1a,
  type SignatureCheck,
  type VerifyWebhookSignatureInput,
  type VerifyStandardWebhookInput,
  type VerifyStandardWebhookV1aInput,
  type WebhookSecrets,
} from '../common/crypto/signature';
export * from '../common/contract/events';
export * from '../common/contract/payloads';
export { eventSchemas } from '../common/contract/schemas';
export {
  FailureType,
  type DeliverWebhookEventResult,
  type DeliveryFailedDetails,
  type AttemptFailureDetails,
} from '../common/contract/failures';
/** @deprecated The API's test-endpoint sender; kept exported for compatibility, it belongs to the API. */
export { createTestEventSender } from '../api/webhooks/test-event';
export type { SendTestEvent, TestDeliveryOutcome } from '../api/webhooks/test-event';

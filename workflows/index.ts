// The workflow module the worker loads: every function exported here is registered as a workflow type, so only
// workflows are exported as values (the contract's helpers stay in ./contract).
export { deliverWebhookEvent } from './deliver-webhook-event';
export { ProjectIdKey, WebhookTypeKey, SEARCH_ATTRIBUTE_KEYS } from './search-attributes';
export {
  FailureType,
  type AttemptFailureDetails,
  type DeliverWebhookEventResult,
  type DeliveryAttemptInput,
  type DeliveryAttemptOutcome,
  type DeliveryFailedDetails,
  type DeliveryPlan,
  type DeliveryRetryPolicy,
} from './contract';

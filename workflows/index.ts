// Everything the worker registers and the client needs to name: workflow functions and their contract.
export { deliverWebhookEvent } from './deliver-webhook-event';
export { ProjectIdKey, WebhookTypeKey } from './search-attributes';
export * from './contract';

// Everything the worker registers and the client needs to name: workflow functions and their contract.
export { deliverWebhookEvent, ProjectIdKey, WebhookTypeKey } from './deliver-webhook-event';
export * from './contract';

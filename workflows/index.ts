// The workflow module the worker loads: every function exported here is registered as a workflow type, so only
// workflows are exported (the contract they speak lives in common/contract and common/erasure).
export { deliverWebhookEvent } from './deliver-webhook-event';
export { erasePerson } from './erase-person';

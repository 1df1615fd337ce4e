// The workflow module the worker loads: every function exported here is registered as a workflow type, so only
// workflows are exported (the contract they speak lives in common/contract, common/erasure and common/purge).
export { deliverWebhookEvent } from './deliver-webhook-event';
export { erasePerson } from './erase-person';
export { purgeProject } from './purge-project';

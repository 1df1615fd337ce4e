// Keys operators filter deliveries by in the Temporal UI; both must be registered as Keyword on the namespace.
import { SearchAttributeType, defineSearchAttributeKey, type SearchAttributePair } from '@temporalio/common';

export const ProjectIdKey = defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD);
export const WebhookTypeKey = defineSearchAttributeKey('WebhookType', SearchAttributeType.KEYWORD);

/** Every search attribute the workflow sets: what a namespace must have registered (as Keyword). */
export const SEARCH_ATTRIBUTE_KEYS = [ProjectIdKey, WebhookTypeKey];

/** A delivery's search attributes, given at start or upserted: the project and the event type, for the operators' filters. */
export const deliverySearchAttributes = (projectId: string, webhookType: string): SearchAttributePair[] => [
  { key: ProjectIdKey, value: projectId },
  { key: WebhookTypeKey, value: webhookType },
];

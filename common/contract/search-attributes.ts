// Keys operators find deliveries by in the Temporal UI, and the person hash an erasure finds a person's deliveries by;
// each must be registered as Keyword on the namespace to be set.
import { SearchAttributeType, defineSearchAttributeKey, type SearchAttributePair } from '@temporalio/common';

export const ProjectIdKey = defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD);
export const WebhookTypeKey = defineSearchAttributeKey('WebhookType', SearchAttributeType.KEYWORD);
/** The event's person as the keyed hash of their userUUID (never the id): set at start by a starter holding the key. */
export const PersonHashKey = defineSearchAttributeKey('PersonHash', SearchAttributeType.KEYWORD);

/** The operators' filters: the workflow upserts them when started without, where the namespace has them. */
export const DELIVERY_SEARCH_ATTRIBUTE_KEYS = [ProjectIdKey, WebhookTypeKey];

/** Every search attribute a delivery may carry: what a namespace should have registered (as Keyword). */
export const SEARCH_ATTRIBUTE_KEYS = [...DELIVERY_SEARCH_ATTRIBUTE_KEYS, PersonHashKey];

/** A delivery's search attributes, given at start or upserted: the project and the event type, for the operators' filters. */
export const deliverySearchAttributes = (projectId: string, webhookType: string): SearchAttributePair[] => [
  { key: ProjectIdKey, value: projectId },
  { key: WebhookTypeKey, value: webhookType },
];

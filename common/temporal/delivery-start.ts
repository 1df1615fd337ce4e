// How every delivery workflow is started (events, tests, redeliveries): its priority, its project's fairness key and
// the operators' search attributes given at start, so the workflow needs no upsert (no command, no extra history).
import { isGrpcServiceError, type Client, type WorkflowHandle, type WorkflowStartOptions } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import {
  DELIVER_WORKFLOW_TYPE,
  PersonHashKey,
  deliverySearchAttributes,
  type DeliverWebhookEventInput,
} from '../contract';
import { deliveryPriority } from '../fairness';
import { inSpan, tracingEnabled } from '../telemetry/tracing';
import { deliverySpanAttributes } from '../telemetry/span-attributes';

export type DeliveryStartOptions = Omit<
  WorkflowStartOptions,
  'args' | 'priority' | 'typedSearchAttributes' | 'searchAttributes'
> & {
  /**
   * The event's person hash (common/crypto/person-hash.ts), from a starter that holds PERSON_HASH_KEY: set as the
   * PersonHash search attribute where the namespace has it, so an erasure finds every run of the person's events.
   */
  personHash?: string;
};

/** gRPC status code INVALID_ARGUMENT. */
const INVALID_ARGUMENT = 3;

/** Clients whose namespace refused the search attributes: they start without (the workflow upserts if it can). */
const withoutSearchAttributes = new WeakSet<Client>();
/** Clients whose namespace refused PersonHash (registered before it existed): they start with the operators' two. */
const withoutPersonHash = new WeakSet<Client>();

/**
 * Starts `deliverWebhookEvent` for the event, its input sealed for the workflow id; options add the workflow id, task
 * queue and id policies.
 */
export async function startDeliveryWorkflow(
  client: Client,
  input: DeliverWebhookEventInput,
  options: DeliveryStartOptions,
): Promise<WorkflowHandle> {
  if (!tracingEnabled()) return startDelivery(client, input, options);
  // The trace's root: who started which delivery (never the payload), with Temporal's start span below it.
  const webhookId = input.webhookId ?? options.workflowId;
  return inSpan(`emit ${input.webhookType}`, deliverySpanAttributes({ ...input, webhookId }), () =>
    startDelivery(client, input, options),
  );
}

async function startDelivery(
  client: Client,
  input: DeliverWebhookEventInput,
  { personHash, ...options }: DeliveryStartOptions,
): Promise<WorkflowHandle> {
  const start = (searchAttributes: SearchAttributePair[]) =>
    client.workflow.start(DELIVER_WORKFLOW_TYPE, {
      ...options,
      // Sealed for this workflow id inside the encrypted input: a copy started under another id is refused.
      args: [{ ...input, workflowId: options.workflowId }],
      // Falls ahead of vitals ahead of tests across projects; each project its own fair share of the queue.
      priority: deliveryPriority(input.projectId, input.webhookType),
      ...(searchAttributes.length > 0 && { typedSearchAttributes: searchAttributes }),
    });
  // The fullest set the namespace may take first, then less: a namespace without one of them still delivers.
  const delivery = deliverySearchAttributes(input.projectId, input.webhookType);
  const tries: SearchAttributePair[][] = [];
  if (!withoutSearchAttributes.has(client)) {
    if (personHash !== undefined && !withoutPersonHash.has(client))
      tries.push([...delivery, { key: PersonHashKey, value: personHash }]);
    tries.push(delivery);
  }
  tries.push([]);
  for (const [i, searchAttributes] of tries.entries()) {
    try {
      return await start(searchAttributes);
    } catch (error) {
      if (i === tries.length - 1 || !searchAttributesMissing(error)) throw error;
      if (searchAttributes.some((pair) => pair.key === PersonHashKey)) withoutPersonHash.add(client);
      else withoutSearchAttributes.add(client);
    }
  }
  throw new Error('unreachable: the last start either returned or threw');
}

/**
 * A namespace without ProjectId/WebhookType (or PersonHash) registered refuses the start as an invalid argument naming them. Over a
 * grpc-js Connection the text is in `details`; over a NativeConnection `details` is empty and the text is the message.
 */
function searchAttributesMissing(error: unknown): boolean {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (isGrpcServiceError(current))
      return (
        Number(current.code) === INVALID_ARGUMENT && /search attribute/i.test(`${current.details} ${current.message}`)
      );
  }
  return false;
}

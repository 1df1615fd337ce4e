// How every delivery workflow is started (events, tests, redeliveries): its priority, its project's fairness key and
// the operators' search attributes given at start, so the workflow needs no upsert (no command, no extra history).
import { isGrpcServiceError, type Client, type WorkflowHandle, type WorkflowStartOptions } from '@temporalio/client';
import { DELIVER_WORKFLOW_TYPE, deliverySearchAttributes, type DeliverWebhookEventInput } from '../contract';
import { deliveryPriority } from '../fairness';
import { inSpan, tracingEnabled } from '../telemetry/tracing';
import { deliverySpanAttributes } from '../telemetry/span-attributes';

export type DeliveryStartOptions = Omit<
  WorkflowStartOptions,
  'args' | 'priority' | 'typedSearchAttributes' | 'searchAttributes'
>;

/** gRPC status code INVALID_ARGUMENT. */
const INVALID_ARGUMENT = 3;

/** Clients whose namespace refused the search attributes: they start without (the workflow upserts if it can). */
const withoutSearchAttributes = new WeakSet<Client>();

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
  options: DeliveryStartOptions,
): Promise<WorkflowHandle> {
  const start = (searchAttributes: boolean) =>
    client.workflow.start(DELIVER_WORKFLOW_TYPE, {
      ...options,
      // Sealed for this workflow id inside the encrypted input: a copy started under another id is refused.
      args: [{ ...input, workflowId: options.workflowId }],
      // Falls ahead of vitals ahead of tests across projects; each project its own fair share of the queue.
      priority: deliveryPriority(input.projectId, input.webhookType),
      ...(searchAttributes && { typedSearchAttributes: deliverySearchAttributes(input.projectId, input.webhookType) }),
    });
  if (withoutSearchAttributes.has(client)) return start(false);
  try {
    return await start(true);
  } catch (error) {
    if (!searchAttributesMissing(error)) throw error;
    withoutSearchAttributes.add(client);
    return start(false);
  }
}

/**
 * A namespace without ProjectId/WebhookType registered refuses the start as an invalid argument naming them. Over a
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

import { randomUUID } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/common';
import {
  DEFAULT_TASK_QUEUE,
  SUBSCRIBABLE_TYPES,
  type DeliverWebhookEventInput,
  type SubscribableType,
} from '../common/contract';
import { InvalidWebhookEventError, validateDeliveryInput } from '../common/contract/validate';
import { startDeliveryWorkflow } from '../common/temporal/delivery-start';
import { eventPersonHash } from '../common/crypto/person-hash';

/** An event the monitoring system emits (TEST events come only from the test endpoint). */
export interface WebhookEvent extends DeliverWebhookEventInput {
  webhookType: SubscribableType;
}

export interface EmitOptions {
  /** The caller's id of this event; emitting the same id twice delivers once. Generated when omitted. */
  eventId?: string;
  /** Defaults to `webhooks`. */
  taskQueue?: string;
  /**
   * The service's PERSON_HASH_KEY (32 bytes), when the monitoring system holds it: the delivery then carries its
   * person's keyed hash as the PersonHash search attribute, and an erasure finds each of its runs in Temporal. Without
   * it the worker still logs the event with its hash, and an erasure finds it through the delivery log.
   */
  personHashKey?: Buffer;
}

/** The event id was emitted before: its delivery exists (running or finished) and is not started again. */
export class WebhookEventAlreadyEmittedError extends Error {
  override name = 'WebhookEventAlreadyEmittedError';
  constructor(
    readonly eventId: string,
    readonly workflowId: string,
    options?: ErrorOptions,
  ) {
    super(`Event ${eventId} was already emitted (workflow ${workflowId})`, options);
  }
}

/** Event ids become workflow ids: keep them to printable, UI-friendly characters, and no personal data. */
const EVENT_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

export const eventWorkflowId = (eventId: string) => `webhook-event-${eventId}`;

/**
 * Validates the event against spec section 6 and starts its delivery workflow `webhook-event-{eventId}`.
 * The client must encrypt (connectTemporalClient, or encryptedDataConverter): a production worker refuses an event
 * whose input is not encrypted with the payload key. Resolves to the workflow id. Throws InvalidWebhookEventError (nothing started) or
 * WebhookEventAlreadyEmittedError (the id was used before: one event id is delivered once).
 */
export async function emitWebhookEvent(
  client: Client,
  event: WebhookEvent,
  options: EmitOptions = {},
): Promise<string> {
  if (!(SUBSCRIBABLE_TYPES as readonly string[]).includes(event.webhookType))
    throw new InvalidWebhookEventError(
      `Event type ${JSON.stringify(event.webhookType)} cannot be emitted: expected one of ${SUBSCRIBABLE_TYPES.join(', ')}`,
    );
  const problem = validateDeliveryInput(event);
  if (problem) throw new InvalidWebhookEventError(problem);
  const eventId = options.eventId ?? randomUUID();
  if (!EVENT_ID.test(eventId))
    throw new InvalidWebhookEventError(
      'eventId must be 1-200 letters, digits, ".", "_", ":" or "-", starting with a letter or digit',
    );
  const workflowId = eventWorkflowId(eventId);
  const input: DeliverWebhookEventInput = {
    projectId: event.projectId,
    webhookType: event.webhookType,
    userUUID: event.userUUID,
    payload: event.payload,
  };
  try {
    await startDeliveryWorkflow(client, input, {
      taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
      workflowId,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      personHash: options.personHashKey && eventPersonHash(options.personHashKey, input.userUUID),
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError)
      throw new WebhookEventAlreadyEmittedError(eventId, workflowId, { cause: error });
    throw error;
  }
  return workflowId;
}

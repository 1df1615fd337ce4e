import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, isGrpcServiceError, type Client } from '@temporalio/client';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import type { Config } from '../common/config';
import type { DeliverWebhookEventInput } from '../common/contract';
import { startDeliveryWorkflow } from '../common/delivery-start';
import type { DeliveryRow } from '../db';
import { ApiError } from './errors';

/** gRPC NOT_FOUND. */
const GRPC_NOT_FOUND: number = 5;

/** Starts a redelivery of a logged delivery, after `startDelayMs`; resolves to the new workflow's id. */
export type RedeliveryStarter = (delivery: DeliveryRow, startDelayMs: number) => Promise<string>;

export class EventNoLongerRetainedError extends ApiError {
  constructor(id: string) {
    super(410, `The event of delivery ${id} is past Temporal's retention and can no longer be redelivered`);
  }
}

/**
 * The log never holds payloads: a redelivery reads the event back from the input of its latest workflow run in
 * Temporal's history, and starts a new run with the original X-Webhook-Id, signed afresh by the attempt.
 */
export function createRedeliveryStarter(
  temporal: Client | (() => Promise<Client>),
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE'>,
  /** eagerStart: the client is on the NativeConnection of a worker of this task queue in this process. */
  { eagerStart = false }: { eagerStart?: boolean } = {},
): RedeliveryStarter {
  return async (delivery, startDelayMs) => {
    // The API connects to Temporal on first use: a redelivery while it is down is a 503, not a failed start-up.
    const client = typeof temporal === 'function' ? await temporal() : temporal;
    let input: DeliverWebhookEventInput | undefined;
    try {
      const history = await client.workflow.getHandle(delivery.workflowId).fetchHistory();
      const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
      [input] = (await decodeArrayFromPayloads(client.options.loadedDataConverter, started?.input?.payloads)) as (
        DeliverWebhookEventInput | undefined
      )[];
    } catch (error) {
      // fetchHistory reports an unknown workflow as gRPC NOT_FOUND, not as WorkflowNotFoundError.
      if (
        error instanceof WorkflowNotFoundError ||
        (isGrpcServiceError(error) && Number(error.code) === GRPC_NOT_FOUND)
      )
        throw new EventNoLongerRetainedError(delivery.id);
      throw error;
    }
    if (!input) throw new EventNoLongerRetainedError(delivery.id);
    const workflowId = `webhook-redelivery-${randomUUID()}`;
    await startDeliveryWorkflow(
      client,
      { ...input, webhookId: delivery.id },
      {
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        workflowId,
        // Temporal refuses eager execution of a delayed start.
        ...(startDelayMs > 0 ? { startDelay: startDelayMs } : { requestEagerStart: eagerStart }),
      },
    );
    return workflowId;
  };
}

/** Resolves when the workflow has ended (whatever its outcome), or after the watcher's bound; never rejects. */
export type WorkflowEndWatcher = (workflowId: string) => Promise<void>;

/**
 * A TEST redelivery holds the project's TEST slot until its one attempt ends: this tells when, waiting at most
 * `maxWaitMs` (TEST_DELIVERY_WAIT_MS, within which a TEST attempt ends).
 */
export function createWorkflowEndWatcher(
  temporal: Client | (() => Promise<Client>),
  maxWaitMs: number,
): WorkflowEndWatcher {
  return async (workflowId) => {
    try {
      const client = typeof temporal === 'function' ? await temporal() : temporal;
      await client.withAbortSignal(AbortSignal.timeout(maxWaitMs), () =>
        client.workflow.getHandle(workflowId).result(),
      );
    } catch {
      // Failed, or not ended within the bound: either way the watch is over (the slot's lease bounds it too).
    }
  };
}

import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, isGrpcServiceError, type Client } from '@temporalio/client';
import { METADATA_ENCODING_KEY, type Payload } from '@temporalio/common';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import type { Config } from '../../common/config';
import type { DeliverWebhookEventInput } from '../../common/contract';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';
import type { Logger } from '../../common/telemetry/logger';
import {
  ENCRYPTED_ENCODING,
  PayloadDecryptionError,
  unencryptedEventsAllowed,
} from '../../common/crypto/payload-codec';
import type { DeliveryRow } from '../../db';
import { eventPersonHash } from '../../common/crypto/person-hash';
import { ApiError } from '../http/errors';

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
 * The input found in Temporal is not the event this delivery logged: not encrypted with the payload key, sealed
 * for another workflow, or of another project or type. Nothing is sent; the operators' log says which.
 */
export class EventNotTrustedError extends ApiError {
  constructor(id: string, why: string) {
    super(409, `The event of delivery ${id} cannot be redelivered: ${why}`);
  }
}

export interface RedeliveryStarterOptions {
  /** The client is on the NativeConnection of a worker of this task queue in this process. */
  eagerStart?: boolean;
  /** Where a refused input is reported (ids and the reason only). */
  logger?: Logger;
  /** PERSON_HASH_KEY: the redelivery carries its person's hash as PersonHash, so an erasure finds it too. */
  personHashKey?: Buffer;
}

/**
 * The log never holds payloads: a redelivery reads the event back from the input of the run that wrote the log row
 * (never whichever run holds the workflow id now), accepts it only when it came encrypted with the payload key and
 * names the row's project and type, and starts a new run with the original X-Webhook-Id, signed afresh by the attempt.
 */
export function createRedeliveryStarter(
  temporal: Client | (() => Promise<Client>),
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'NODE_ENV' | 'ALLOW_UNENCRYPTED_EVENTS'>,
  { eagerStart = false, logger, personHashKey }: RedeliveryStarterOptions = {},
): RedeliveryStarter {
  // Where plain events are delivered (development, a migration window), plain ones are redelivered too.
  const plainAccepted = unencryptedEventsAllowed(config);
  return async (delivery, startDelayMs) => {
    // The API connects to Temporal on first use: a redelivery while it is down is a 503, not a failed start-up.
    const client = typeof temporal === 'function' ? await temporal() : temporal;
    const refuse = (reason: string, why: string) => {
      logger?.warn(
        { deliveryId: delivery.id, workflowId: delivery.workflowId, runId: delivery.runId, reason },
        'redelivery refused: the event in Temporal is not the logged one; nothing sent',
      );
      return new EventNotTrustedError(delivery.id, why);
    };
    const started = await loggedRun(client, delivery);
    if (!started) throw refuse('later-run', 'the workflow holding its id was started after the delivery was logged');
    const [payload] = started.payloads;
    if (!payload) throw new EventNoLongerRetainedError(delivery.id);
    if (!plainAccepted && !isEncryptedPayload(payload))
      throw refuse('not-encrypted', 'its input in Temporal is not encrypted with the payload key');
    let input: DeliverWebhookEventInput | undefined;
    try {
      [input] = (await decodeArrayFromPayloads(client.options.loadedDataConverter, [payload])) as (
        DeliverWebhookEventInput | undefined
      )[];
    } catch (error) {
      if (error instanceof PayloadDecryptionError)
        throw refuse('undecryptable', 'its input in Temporal cannot be opened with the payload key');
      throw error;
    }
    const mismatch = input && mismatchWith(delivery, input);
    if (!input || mismatch) throw refuse(mismatch ?? 'no-input', 'its input in Temporal is not the logged event');
    const workflowId = `webhook-redelivery-${randomUUID()}`;
    await startDeliveryWorkflow(
      client,
      {
        projectId: input.projectId,
        webhookType: input.webhookType,
        userUUID: input.userUUID,
        payload: input.payload,
        webhookId: delivery.id,
      },
      {
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        workflowId,
        personHash: personHashKey && eventPersonHash(personHashKey, input.userUUID),
        // Temporal refuses eager execution of a delayed start.
        ...(startDelayMs > 0 ? { startDelay: startDelayMs } : { requestEagerStart: eagerStart }),
      },
    );
    return workflowId;
  };
}

/**
 * The start of the run that wrote the row: its recorded run, or, for rows from before runs were kept, the latest run
 * if it started no later than the row's last write (undefined: a later run, which the log never saw).
 */
async function loggedRun(client: Client, delivery: DeliveryRow): Promise<{ payloads: Payload[] } | undefined> {
  try {
    const history = await client.workflow.getHandle(delivery.workflowId, delivery.runId ?? undefined).fetchHistory();
    const first = history.events?.[0];
    const attributes = first?.workflowExecutionStartedEventAttributes;
    if (!attributes) throw new EventNoLongerRetainedError(delivery.id);
    if (delivery.runId === null && (optionalTsToMs(first.eventTime) ?? Infinity) > delivery.updatedAt.getTime())
      return undefined;
    return { payloads: attributes.input?.payloads ?? [] };
  } catch (error) {
    // fetchHistory reports an unknown workflow as gRPC NOT_FOUND, not as WorkflowNotFoundError; an unknown namespace
    // (a misconfigured TEMPORAL_NAMESPACE) is NOT_FOUND too, and Temporal's refusal, not the event's retention.
    if (
      error instanceof WorkflowNotFoundError ||
      (isGrpcServiceError(error) &&
        Number(error.code) === GRPC_NOT_FOUND &&
        !/namespace/i.test(`${error.details} ${error.message}`))
    )
      throw new EventNoLongerRetainedError(delivery.id);
    throw error;
  }
}

/** Sealed by our codec: a plain payload (a client without the key) says another encoding. */
export function isEncryptedPayload(payload: Payload): boolean {
  const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
  return encoding !== undefined && encoding !== null && Buffer.from(encoding).toString() === ENCRYPTED_ENCODING;
}

/** What differs between the logged delivery and the input found for it; undefined when it is the same event. */
export function mismatchWith(
  delivery: Pick<DeliveryRow, 'id' | 'projectId' | 'type' | 'workflowId'>,
  input: DeliverWebhookEventInput,
): string | undefined {
  if (input.projectId !== delivery.projectId) return 'other-project';
  if (input.webhookType !== delivery.type) return 'other-type';
  if (input.workflowId !== undefined && input.workflowId !== delivery.workflowId) return 'other-workflow';
  if ((input.webhookId ?? delivery.workflowId) !== delivery.id) return 'other-webhook-id';
  return undefined;
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

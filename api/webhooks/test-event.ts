import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Config } from '../../common/config';
import { unavailableDependency } from '../http/dependency-errors';
import { DependencyUnavailableError } from '../http/errors';
import {
  type DeliverWebhookEventInput,
  type DeliverWebhookEventResult,
  type DeliveryFailedDetails,
} from '../../common/contract';
import { startDeliveryWorkflow } from '../../common/temporal/delivery-start';

/** What the test endpoint reports: a real delivery outcome of one TEST event (one attempt, no retries). */
export type TestDeliveryOutcome =
  | { delivered: true; statusCode: number; durationMs: number; workflowId: string }
  | { delivered: false; reason: string; statusCode?: number; workflowId: string; category?: TestFailureCategory };

/** Why a TEST event was not acknowledged, in words a customer can act on, without internal addresses. */
export type TestFailureCategory =
  'timeout' | 'refused' | 'tls' | 'forbidden-target' | 'http-status' | 'unreachable' | 'no-outcome';

const TLS_CODE = /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|EPROTO$|HOSTNAME_MISMATCH|ERR_CERT)/;
const TIMEOUT_CODE = /^(TIMEOUT|ETIMEDOUT|UND_ERR_(CONNECT|HEADERS|BODY)_TIMEOUT)$/;

/** The category and a customer-facing reason for a receiver error code; never the address it resolved to. */
export function describeReceiverError(errorCode: string): { category: TestFailureCategory; reason: string } {
  if (TIMEOUT_CODE.test(errorCode))
    return { category: 'timeout', reason: `the receiver did not answer in time (${errorCode})` };
  if (errorCode === 'ECONNREFUSED') return { category: 'refused', reason: 'the connection was refused (ECONNREFUSED)' };
  if (TLS_CODE.test(errorCode))
    return { category: 'tls', reason: `the TLS handshake failed: check the receiver's certificate (${errorCode})` };
  // The worker's egress proxy failed (WebhookProxyUnavailable): the receiver was not reached, nor to blame.
  if (errorCode.startsWith('PROXY_'))
    return { category: 'unreachable', reason: `the worker's egress proxy did not carry the request (${errorCode})` };
  // The OAuth client's token endpoint gave no token: the receiver was not asked.
  if (errorCode.startsWith('OAUTH_TOKEN_'))
    return { category: 'unreachable', reason: `the OAuth token endpoint did not issue a token (${errorCode})` };
  if (errorCode === 'ERR_WEBHOOK_TARGET_FORBIDDEN')
    return {
      category: 'forbidden-target',
      reason: 'the URL resolves to an address receivers may not use (private, loopback or reserved)',
    };
  return { category: 'unreachable', reason: `the receiver could not be reached (${errorCode})` };
}

/** Sends one TEST event to the project's registered webhook and waits (bounded) for the outcome. */
export type SendTestEvent = (projectId: string) => Promise<TestDeliveryOutcome>;

/** The TEST wrapper carries no user: the nil UUID. */
const NO_USER = '00000000-0000-0000-0000-000000000000';

/**
 * Sends one TEST event (one attempt, no retries) and waits at most TEST_DELIVERY_WAIT_MS for its outcome:
 * delivered with the receiver's status and the duration, or not delivered with a reason naming the receiver's
 * status or error code.
 */
export function createTestEventSender(
  temporal: Client | (() => Promise<Client>),
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEST_DELIVERY_WAIT_MS'>,
  /** eagerStart: the client is on the NativeConnection of a worker of this task queue in this process. */
  { eagerStart = false }: { eagerStart?: boolean } = {},
): SendTestEvent {
  return async (projectId) => {
    // One deadline for connecting, starting and waiting: the caller never waits longer than TEST_DELIVERY_WAIT_MS.
    const waiting = AbortSignal.timeout(config.TEST_DELIVERY_WAIT_MS);
    const client = typeof temporal === 'function' ? await temporal() : temporal;
    const workflowId = `webhook-test-${projectId}-${randomUUID()}`;
    const input: DeliverWebhookEventInput = {
      projectId,
      webhookType: 'TEST',
      userUUID: NO_USER,
      payload: { test: `This is a test event for the webhook of project ${projectId}.` },
    };
    const handle = await client
      .withAbortSignal(waiting, () =>
        // Tests run at the lowest priority: they never get ahead of a real event.
        startDeliveryWorkflow(client, input, {
          taskQueue: config.TEMPORAL_TASK_QUEUE,
          workflowId,
          requestEagerStart: eagerStart,
        }),
      )
      .catch((error: unknown) => {
        // Not started within the deadline, or Temporal refused the call: Temporal is down, not the receiver.
        if (waiting.aborted || unavailableDependency(error))
          throw Object.assign(new DependencyUnavailableError('Temporal'), { cause: error });
        throw error;
      });
    // Stop long-polling for the result once we stop waiting: a dangling poll outlives the caller's connection.
    try {
      const result = await client.withAbortSignal(waiting, () => handle.result() as Promise<DeliverWebhookEventResult>);
      return toOutcome(result, projectId, workflowId);
    } catch (error) {
      if (error instanceof WorkflowFailedError) return failedOutcome(error, workflowId);
      if (waiting.aborted)
        return {
          delivered: false,
          workflowId,
          category: 'no-outcome',
          reason: `No delivery outcome within ${config.TEST_DELIVERY_WAIT_MS} ms`,
        };
      throw error;
    }
  };
}

function toOutcome(result: DeliverWebhookEventResult, projectId: string, workflowId: string): TestDeliveryOutcome {
  if (result.status === 'delivered')
    return { delivered: true, statusCode: result.statusCode, durationMs: result.durationMs, workflowId };
  return { delivered: false, workflowId, reason: `No webhook is registered for project ${projectId}` };
}

function failedOutcome(error: WorkflowFailedError, workflowId: string): TestDeliveryOutcome {
  const failure = error.cause;
  const details =
    failure instanceof ApplicationFailure ? (failure.details?.[0] as DeliveryFailedDetails | undefined) : undefined;
  if (details?.statusCode !== undefined)
    return {
      delivered: false,
      workflowId,
      statusCode: details.statusCode,
      category: 'http-status',
      reason: `The receiver answered HTTP ${details.statusCode}`,
    };
  if (details?.errorCode !== undefined)
    return { delivered: false, workflowId, ...describeReceiverError(details.errorCode) };
  return { delivered: false, workflowId, reason: failure?.message ?? error.message };
}

// Temporal's side of an erasure: a person's delivery runs found by PersonHash, described, and deleted with Temporal's
// own DeleteWorkflowExecution once closed. A running delivery is never touched: it is only reported open.
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, isGrpcServiceError, type Client } from '@temporalio/client';
import { DELIVER_WORKFLOW_TYPE, PersonHashKey } from '../../common/contract';
import type { FoundExecution } from '../../db';

/** gRPC status codes. */
const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;

/** The statuses of an execution that has ended for good: only these are deleted. Anything else may still run. */
const CLOSED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT', 'CONTINUED_AS_NEW']);

/** A delivery run that may be the person's: named by the delivery log, or listed under their PersonHash. */
export interface Candidate {
  workflowId: string;
  /** Absent: the latest run of the workflow id. */
  runId?: string;
}

/** What one erasure needs of Temporal: the namespace's client, and whether to list by PersonHash. */
export interface ErasureTemporal {
  client: Client;
  namespace: string;
  /** The namespace has PersonHash registered (or could not say): list the person's runs by it. */
  listByPersonHash: boolean;
}

function grpcCode(error: unknown): number | undefined {
  for (let current = error; current instanceof Error; current = current.cause)
    if (isGrpcServiceError(current)) return Number(current.code);
  return undefined;
}

const isNotFound = (error: unknown) => error instanceof WorkflowNotFoundError || grpcCode(error) === NOT_FOUND;

/**
 * The person's delivery runs Temporal lists under their PersonHash (the runs the log no longer names: a redelivered
 * event's earlier ones, events the log never took), `limit` at most. 'unlisted' where the namespace has no PersonHash:
 * it refuses the query.
 */
export async function listedRuns(
  temporal: ErasureTemporal,
  personHash: string,
  limit: number,
): Promise<Candidate[] | 'unlisted'> {
  if (!temporal.listByPersonHash) return 'unlisted';
  const runs: Candidate[] = [];
  try {
    // personHash is 64 hex digits (checked with the request): nothing in it can end the quoted value.
    const query = `WorkflowType = '${DELIVER_WORKFLOW_TYPE}' AND ${PersonHashKey.name} = '${personHash}'`;
    for await (const execution of temporal.client.workflow.list({ query, pageSize: Math.min(limit, 500) })) {
      runs.push({ workflowId: execution.workflowId, runId: execution.runId });
      Context.current().heartbeat();
      if (runs.length >= limit) break;
    }
  } catch (error) {
    if (grpcCode(error) === INVALID_ARGUMENT) return 'unlisted';
    throw error;
  }
  return runs;
}

/**
 * Looks at one candidate: gone (Temporal no longer knows it), open (still running: left alone), or closed and now
 * deleted; undefined when it is not the person's delivery (another workflow type, or another person's PersonHash).
 */
export async function eraseRun(
  temporal: ErasureTemporal,
  candidate: Candidate,
  personHash: string,
): Promise<FoundExecution | undefined> {
  const { workflowId } = candidate;
  let description;
  try {
    description = await temporal.client.workflow.getHandle(workflowId, candidate.runId).describe();
  } catch (error) {
    if (isNotFound(error)) return { workflowId, runId: candidate.runId ?? '', state: 'gone' };
    throw error;
  }
  const { runId } = description;
  if (description.type !== DELIVER_WORKFLOW_TYPE) return undefined;
  // A run tagged with another person's hash is theirs, whatever named it here.
  const tagged = description.typedSearchAttributes.get(PersonHashKey);
  if (tagged !== undefined && tagged !== personHash) return undefined;
  if (!CLOSED.has(description.status.name)) return { workflowId, runId, state: 'open' };
  return (await deleteRun(temporal, workflowId, runId)) ? { workflowId, runId, state: 'deleted' } : undefined;
}

/** Deletes one closed run with Temporal's DeleteWorkflowExecution; false when it was already gone. */
async function deleteRun(temporal: ErasureTemporal, workflowId: string, runId: string): Promise<boolean> {
  try {
    await temporal.client.workflowService.deleteWorkflowExecution({
      namespace: temporal.namespace,
      workflowExecution: { workflowId, runId },
    });
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

/**
 * Whether Temporal no longer knows a deleted run (DeleteWorkflowExecution removes a closed run's history in a task of
 * its own, moments later). A run it still knows, and that has ended, is asked to be deleted again.
 */
export async function confirmGone(temporal: ErasureTemporal, workflowId: string, runId: string): Promise<boolean> {
  try {
    const description = await temporal.client.workflow.getHandle(workflowId, runId).describe();
    // Still there: asked again (idempotent), and looked at once more later.
    if (CLOSED.has(description.status.name)) await deleteRun(temporal, workflowId, description.runId);
    return false;
  } catch (error) {
    if (isNotFound(error)) return true;
    throw error;
  }
}

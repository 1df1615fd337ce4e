// Temporal's side of a purge: every workflow execution of the project, found by its ProjectId search attribute, deleted
// by one of Temporal's own batch jobs (DeleteWorkflowExecution for each: a running delivery is terminated, then
// deleted), and the executions still listed counted.
import { isGrpcServiceError, type Client } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { ProjectIdKey } from '../../common/contract';
import type { PurgeBatchJob } from '../../db';

/** gRPC status codes. */
const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;

const { BatchOperationState } = proto.api.enums.v1;

/** What a purge needs of Temporal: the namespace's client. */
export interface PurgeTemporal {
  client: Client;
  namespace: string;
}

/** The namespace cannot list executions by ProjectId (not registered): a purge cannot find them, and says so. */
export class ProjectIdNotSearchableError extends Error {
  constructor(namespace: string) {
    super(
      `Temporal's namespace ${namespace} has no ProjectId search attribute: the project's executions cannot be found ` +
        '(register it, docs/operators.md)',
    );
    this.name = 'ProjectIdNotSearchableError';
  }
}

function grpcCode(error: unknown): number | undefined {
  for (let current = error; current instanceof Error; current = current.cause)
    if (isGrpcServiceError(current)) return Number(current.code);
  return undefined;
}

/** Every execution of the project: projectId is a safe id (no quote can end the quoted value). */
export const projectQuery = (projectId: string) => `${ProjectIdKey.name} = '${projectId}'`;

/** How many executions of the project Temporal still lists (its visibility lags a deletion by a moment). */
export async function countProjectExecutions(temporal: PurgeTemporal, projectId: string): Promise<number> {
  try {
    return (await temporal.client.workflow.count(projectQuery(projectId))).count;
  } catch (error) {
    if (grpcCode(error) === INVALID_ARGUMENT) throw new ProjectIdNotSearchableError(temporal.namespace);
    throw error;
  }
}

/** The project's executions Temporal lists now, `pageSize` at a time to `record` (heartbeating between pages). */
export async function listProjectExecutions(
  temporal: PurgeTemporal,
  projectId: string,
  record: (page: { workflowId: string; runId: string }[]) => Promise<void>,
  pageSize = 1_000,
): Promise<void> {
  let page: { workflowId: string; runId: string }[] = [];
  try {
    for await (const execution of temporal.client.workflow.list({ query: projectQuery(projectId), pageSize })) {
      page.push({ workflowId: execution.workflowId, runId: execution.runId });
      if (page.length >= pageSize) {
        await record(page);
        page = [];
      }
    }
  } catch (error) {
    if (grpcCode(error) === INVALID_ARGUMENT) throw new ProjectIdNotSearchableError(temporal.namespace);
    throw error;
  }
  await record(page);
}

/** Starts the batch job deleting the project's executions under this id; a job of that id started already is kept. */
export async function startProjectDeletion(
  temporal: PurgeTemporal,
  jobId: string,
  projectId: string,
  reason: string,
): Promise<void> {
  try {
    await temporal.client.workflowService.startBatchOperation({
      namespace: temporal.namespace,
      jobId,
      reason,
      visibilityQuery: projectQuery(projectId),
      deletionOperation: {},
    });
  } catch (error) {
    // Started by an earlier try of this activity: described next.
    if (grpcCode(error) === ALREADY_EXISTS) return;
    if (grpcCode(error) === INVALID_ARGUMENT) throw new ProjectIdNotSearchableError(temporal.namespace);
    throw error;
  }
}

/** The batch job as Temporal describes it now; undefined when Temporal does not know it (never started). */
export async function describeProjectDeletion(
  temporal: PurgeTemporal,
  jobId: string,
): Promise<PurgeBatchJob | undefined> {
  let described;
  try {
    described = await temporal.client.workflowService.describeBatchOperation({ namespace: temporal.namespace, jobId });
  } catch (error) {
    if (grpcCode(error) === NOT_FOUND) return undefined;
    throw error;
  }
  const state =
    described.state === BatchOperationState.BATCH_OPERATION_STATE_COMPLETED
      ? 'completed'
      : described.state === BatchOperationState.BATCH_OPERATION_STATE_FAILED
        ? 'failed'
        : 'running';
  return {
    jobId,
    state,
    total: Number(described.totalOperationCount ?? 0),
    deleted: Number(described.completeOperationCount ?? 0),
    failed: Number(described.failureOperationCount ?? 0),
  };
}

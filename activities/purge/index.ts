// The activities of `purgeProject`: they check the purge is the recorded one, delete the project's workflow executions
// with Temporal's batch deletion and count what is left, delete the project's rows, destroy its data keys, and record
// how the purge ended with its audit row. Each is idempotent: a purge stopped half-way and run again finishes, and
// adds to its counts only what it removes then.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { isSafeId } from '../../common/contract';
import {
  PURGE_PROJECT_WORKFLOW_TYPE,
  purgeBatchJobId,
  purgeWorkflowId,
  type PurgeCounts,
  type PurgeExecutionsLook,
  type PurgeProjectInput,
} from '../../common/purge';
import type { Logger } from '../../common/telemetry/logger';
import {
  appendAuditEvent,
  closePurge,
  deleteProjectDeliveryRows,
  deleteProjectRows,
  destroyProjectDataKeys,
  findPurge,
  purgeCounts,
  recordPurgeBatchJob,
  recordPurgeExecutions,
  recordPurgedDataKeys,
  setPurgeOutcomeAudit,
  setPurgeStep,
  type Db,
  type PurgeRow,
} from '../../db';
import {
  ProjectIdNotSearchableError,
  countProjectExecutions,
  describeProjectDeletion,
  listProjectExecutions,
  startProjectDeletion,
  type PurgeTemporal,
} from './executions';

export type { PurgeTemporal } from './executions';

/** The failure type of a purge input that is not a recorded purge: refused for good, nothing removed. */
export const PURGE_NOT_RECORDED = 'PurgeNotRecorded';
/** The failure type of a namespace without the ProjectId search attribute: the executions cannot be found. */
export const PURGE_PROJECT_NOT_SEARCHABLE = 'PurgeProjectNotSearchable';

/** How often a running batch job is described (each time with a heartbeat). */
const JOB_POLL_MS = 500;
/**
 * How long after a batch job ended its deletions may still be listed (visibility lags): executions listed within it
 * are looked at again later rather than given to a new job, which would count them deleted twice.
 */
export const VISIBILITY_SETTLE_MS = 3_000;

export interface PurgeActivityDeps {
  db: Db;
  temporal: PurgeTemporal;
  logger: Logger;
  /** Delivery log rows one transaction deletes (PURGE_DELIVERY_BATCH unless given; tests take small ones). */
  deliveryBatch?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function createPurgeActivities({ db, temporal, logger, deliveryBatch }: PurgeActivityDeps) {
  /**
   * The purge this input names, as recorded: the same project, run by its own workflow, not completed. Anyone who can
   * reach Temporal could start a `purgeProject` of their own; only a purge the API or the CLI recorded (with its audit
   * row) is carried out.
   */
  async function recordedPurge(
    input: PurgeProjectInput,
    missing: 'retry' | 'refuse',
    completed: 'refuse' | 'allow' = 'refuse',
  ): Promise<PurgeRow> {
    const { workflowExecution, workflowType } = Context.current().info;
    const refuse = (why: string) =>
      ApplicationFailure.create({ type: PURGE_NOT_RECORDED, message: `Purge refused: ${why}`, nonRetryable: true });
    if (typeof input?.purgeId !== 'string' || !isSafeId(input.projectId))
      throw refuse('the input is not a purge request');
    if (
      workflowType !== PURGE_PROJECT_WORKFLOW_TYPE ||
      workflowExecution?.workflowId !== purgeWorkflowId(input.purgeId)
    )
      throw refuse(`purge ${input.purgeId} runs only as workflow ${purgeWorkflowId(input.purgeId)}`);
    const row = await findPurge(db, input.purgeId);
    // The request's transaction commits right after the start: a first look may come a moment early.
    if (!row && missing === 'retry') throw new Error(`purge ${input.purgeId} is not recorded (yet)`);
    if (!row) throw refuse(`purge ${input.purgeId} is not recorded`);
    if (row.projectId !== input.projectId) throw refuse(`purge ${input.purgeId} was recorded for another project`);
    if (row.status === 'failed' && missing === 'retry')
      throw refuse(`purge ${input.purgeId} failed: it is run again through POST /purges or webhooks project purge`);
    // A project of the same id made after the purge completed is another customer's: never touched.
    if (row.status === 'completed' && completed === 'refuse') throw refuse(`purge ${input.purgeId} has completed`);
    return row;
  }

  const heartbeat = () => Context.current().heartbeat();

  /** Waits for a batch job to end, describing it (and heartbeating) every JOB_POLL_MS; records each description. */
  async function awaitJob(purge: PurgeRow, jobId: string): Promise<void> {
    for (;;) {
      const described = await describeProjectDeletion(temporal, jobId);
      heartbeat();
      // Recorded but never started (the activity stopped between the two): started now.
      if (!described) {
        await startProjectDeletion(temporal, jobId, purge.projectId, `purge ${purge.id} of project ${purge.projectId}`);
        continue;
      }
      const ended = described.state !== 'running';
      await recordPurgeBatchJob(db, purge.id, { ...described, ...(ended && { endedAt: new Date().toISOString() }) });
      if (ended) return;
      await sleep(JOB_POLL_MS);
    }
  }

  return {
    /** The first step: the purge is recorded (retried a few times while its transaction commits). */
    async checkPurgeRequest(input: PurgeProjectInput): Promise<void> {
      await recordedPurge(input, 'retry');
    },

    /**
     * One round in Temporal: a batch job left running by an earlier try is waited for; then, if any execution of the
     * project is still listed, a new job (recorded before it is started) deletes them and is waited for. Answers how
     * many are still listed after it: the workflow looks again until several looks in a row find none.
     */
    async deleteProjectExecutions(input: PurgeProjectInput): Promise<PurgeExecutionsLook> {
      let purge = await recordedPurge(input, 'refuse');
      try {
        const last = purge.batchJobs.at(-1);
        if (last && (last.state === 'starting' || last.state === 'running')) await awaitJob(purge, last.jobId);
        const lastEnded = (await findPurge(db, purge.id))!.batchJobs.at(-1)?.endedAt;
        const settled = !lastEnded || Date.now() - Date.parse(lastEnded) >= VISIBILITY_SETTLE_MS;
        if (settled && (await countProjectExecutions(temporal, input.projectId)) > 0) {
          // Counted before they go: a job's own count is of deletions asked, which a lagging listing repeats.
          await listProjectExecutions(temporal, input.projectId, async (page) => {
            await recordPurgeExecutions(db, purge.id, page);
            heartbeat();
          });
          const jobId = purgeBatchJobId(purge.id, purge.batchJobs.length + 1);
          purge = await recordPurgeBatchJob(db, purge.id, {
            jobId,
            state: 'starting',
            total: 0,
            deleted: 0,
            failed: 0,
          });
          await startProjectDeletion(
            temporal,
            jobId,
            input.projectId,
            `purge ${purge.id} of project ${purge.projectId}`,
          );
          await awaitJob(purge, jobId);
        }
        const remaining = await countProjectExecutions(temporal, input.projectId);
        purge = (await findPurge(db, purge.id))!;
        logger.info(
          { purgeId: purge.id, executionsDeleted: purge.executionsDeleted, remaining, jobs: purge.batchJobs.length },
          'purge: executions',
        );
        return { executionsDeleted: purge.executionsDeleted, remaining, batchJobs: purge.batchJobs.length };
      } catch (error) {
        if (error instanceof ProjectIdNotSearchableError)
          throw ApplicationFailure.create({
            type: PURGE_PROJECT_NOT_SEARCHABLE,
            message: error.message,
            nonRetryable: true,
          });
        throw error;
      }
    },

    /**
     * The database's rows: the delivery log in batches (each batch and its count one transaction), then every other
     * row of the project and the project itself in one. Run again, it deletes what is left.
     */
    async deletePurgedProjectRows(input: PurgeProjectInput): Promise<PurgeCounts> {
      const purge = await recordedPurge(input, 'refuse');
      await setPurgeStep(db, purge.id, 'rows');
      while ((await deleteProjectDeliveryRows(db, purge.id, purge.projectId, deliveryBatch)) > 0) heartbeat();
      await deleteProjectRows(db, purge.id, purge.projectId);
      const row = (await findPurge(db, purge.id))!;
      logger.info({ purgeId: purge.id, ...purgeCounts(row) }, 'purge: rows');
      return purgeCounts(row);
    },

    /** The project's data keys destroyed (tombstones kept), their ids added to the purge's record. */
    async destroyPurgedProjectKeys(input: PurgeProjectInput): Promise<PurgeCounts> {
      const purge = await recordedPurge(input, 'refuse');
      const row = await db.transaction(async (trx) => {
        await setPurgeStep(trx, purge.id, 'data-keys');
        await recordPurgedDataKeys(trx, purge.id, await destroyProjectDataKeys(trx, purge.projectId));
        return (await findPurge(trx, purge.id))!;
      });
      return purgeCounts(row);
    },

    /**
     * Records the purge completed, with its audit row (counts; no data of the project's people); once. The delivery log
     * is swept once more first: an attempt cut off by the deletion of its execution may have written its row late.
     */
    async completePurge(input: PurgeProjectInput): Promise<PurgeCounts> {
      // Completed already (this activity retried after its transaction committed): the counts as recorded.
      const purge = await recordedPurge(input, 'refuse', 'allow');
      if (purge.status === 'completed') return purgeCounts(purge);
      while ((await deleteProjectDeliveryRows(db, purge.id, purge.projectId, deliveryBatch)) > 0) heartbeat();
      return db.transaction(async (trx) => {
        const closed = await closePurge(trx, input.purgeId, { status: 'completed' });
        const row = closed ?? (await findPurge(trx, input.purgeId))!;
        if (closed) await recordOutcome(trx, closed, 'ok');
        return purgeCounts(row);
      });
    },

    /** Records the purge failed, with its audit row, when it stops on an error it cannot get past; once. */
    async recordPurgeFailure(input: PurgeProjectInput, reason: string): Promise<void> {
      // Nothing recorded, nothing to say it failed on (an input no purge recorded).
      if (!(await findPurge(db, input.purgeId))) return;
      await recordedPurge(input, 'refuse', 'allow');
      await db.transaction(async (trx) => {
        const closed = await closePurge(trx, input.purgeId, { status: 'failed', failure: reason.slice(0, 500) });
        if (closed) await recordOutcome(trx, closed, 'failed');
      });
    },
  };

  async function recordOutcome(trx: Db, purge: PurgeRow, outcome: 'ok' | 'failed'): Promise<void> {
    const row = await appendAuditEvent(trx, {
      actor: { kind: 'system' },
      action: 'purge.complete',
      outcome,
      projectId: purge.projectId,
      changes: {
        purgeId: purge.id,
        status: purge.status,
        step: purge.step,
        ...purgeCounts(purge),
        dataKeysDestroyed: purge.dataKeysDestroyed,
        batchJobs: purge.batchJobs.map((job) => job.jobId),
        ...(purge.failure !== null && { failure: purge.failure }),
      },
    });
    await setPurgeOutcomeAudit(trx, purge.id, row.id);
  }
}

export type PurgeActivities = ReturnType<typeof createPurgeActivities>;

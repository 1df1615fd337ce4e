// The activities of `erasePerson`: they check the request is the recorded one, look at the person's deliveries (found
// by their keyed hash in the delivery log and under PersonHash in Temporal), delete every closed run and its log rows,
// leave running ones alone, and record how the erasure ended with its audit row.
import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  ERASE_PERSON_WORKFLOW_TYPE,
  erasureWorkflowId,
  type ErasePersonInput,
  type ErasureCounts,
  type ErasureLook,
} from '../../common/erasure';
import { PERSON_HASH_PATTERN } from '../../common/crypto/person-hash';
import type { Logger } from '../../common/telemetry/logger';
import {
  appendAuditEvent,
  closeErasure,
  deletePersonDeliveryRows,
  findErasure,
  personDeliveryRows,
  recordErasureLook,
  setErasureOutcomeAudit,
  unconfirmedErasureExecutions,
  type Db,
  type ErasureRow,
  type FoundExecution,
} from '../../db';
import { confirmGone, eraseRun, listedRuns, type Candidate, type ErasureTemporal } from './executions';

export type { ErasureTemporal } from './executions';

/** The failure type of an erasure input that is not a recorded request: refused for good, nothing looked at. */
export const ERASURE_NOT_RECORDED = 'ErasureNotRecorded';

/** How long a look waits for Temporal to have removed what it deleted, before leaving that to the next look. */
const CONFIRM_WITHIN_MS = 5_000;
/** The log rows, and the runs listed by PersonHash, one look takes at most: a person with more takes several looks. */
export const LOOK_BATCH = 1_000;

export interface ErasureActivityDeps {
  db: Db;
  temporal: ErasureTemporal;
  logger: Logger;
  /** LOOK_BATCH unless given (tests take small batches). */
  lookBatch?: number;
}

const countsOf = (row: ErasureRow): ErasureCounts => ({
  deliveriesFound: row.deliveriesFound,
  historiesDeleted: row.historiesDeleted,
  logRowsDeleted: row.logRowsDeleted,
  stillOpen: row.stillOpen,
});

export function createErasureActivities({ db, temporal, logger, lookBatch = LOOK_BATCH }: ErasureActivityDeps) {
  /**
   * The request this input names, as recorded: the same person, run by its own workflow. Anyone who can reach
   * Temporal could start an `erasePerson` of their own; only a request the API or the CLI recorded (with its audit
   * row) is carried out.
   */
  async function recordedRequest(input: ErasePersonInput, missing: 'retry' | 'refuse'): Promise<ErasureRow> {
    const { workflowExecution, workflowType } = Context.current().info;
    const refuse = (why: string) =>
      ApplicationFailure.create({ type: ERASURE_NOT_RECORDED, message: `Erasure refused: ${why}`, nonRetryable: true });
    if (typeof input?.erasureId !== 'string' || !PERSON_HASH_PATTERN.test(String(input.personHash)))
      throw refuse('the input is not an erasure request');
    if (
      workflowType !== ERASE_PERSON_WORKFLOW_TYPE ||
      workflowExecution?.workflowId !== erasureWorkflowId(input.erasureId)
    )
      throw refuse(`erasure ${input.erasureId} runs only as workflow ${erasureWorkflowId(input.erasureId)}`);
    const row = await findErasure(db, input.erasureId);
    // The request's transaction commits right after the start: a first look may come a moment early.
    if (!row && missing === 'retry') throw new Error(`erasure ${input.erasureId} is not recorded (yet)`);
    if (!row) throw refuse(`erasure ${input.erasureId} is not recorded`);
    if (row.personHash !== input.personHash) throw refuse(`erasure ${input.erasureId} was recorded for another person`);
    return row;
  }

  return {
    /** The first step: the request is recorded (retried a few times while its transaction commits). */
    async checkErasureRequest(input: ErasePersonInput): Promise<void> {
      await recordedRequest(input, 'retry');
    },

    /**
     * One look: finds the person's delivery runs, deletes each closed one from Temporal and the log rows of every
     * delivery that is no longer running, and counts the running ones (left to end by themselves). Idempotent: a
     * look retried after a crash finds what is left and deletes it.
     */
    async lookForPersonDeliveries(input: ErasePersonInput): Promise<ErasureLook> {
      const erasure = await recordedRequest(input, 'refuse');
      const { personHash } = erasure;
      const heartbeat = () => Context.current().heartbeat();
      const rows = await personDeliveryRows(db, personHash, lookBatch);
      const candidates = new Map<string, Candidate>();
      const add = (candidate: Candidate) =>
        candidates.set(`${candidate.workflowId}\u0000${candidate.runId ?? ''}`, candidate);
      for (const row of rows) {
        add({ workflowId: row.workflowId, ...(row.runId !== null && { runId: row.runId }) });
        // A redelivered event's first run: its workflow id is the event's id, which the log row keeps.
        if (row.id !== row.workflowId) add({ workflowId: row.id });
      }
      const listed = await listedRuns(temporal, personHash, lookBatch);
      if (listed === 'unlisted')
        logger.info(
          { erasureId: erasure.id },
          'erasure: the namespace has no PersonHash search attribute; deliveries are found through the delivery log',
        );
      else for (const run of listed) add(run);
      for (const deleted of await unconfirmedErasureExecutions(db, erasure.id)) add(deleted);

      const found = new Map<string, FoundExecution>();
      // Runs named exactly first: a workflow id named without its run then adds nothing once one of its runs is seen.
      const ordered = [...candidates.values()].sort(
        (a, b) => Number(a.runId === undefined) - Number(b.runId === undefined),
      );
      for (const candidate of ordered) {
        const execution = await eraseRun(temporal, candidate, personHash);
        heartbeat();
        if (execution) remember(found, execution);
      }
      await confirmDeletions(found);

      // A delivery still running keeps its row: it writes it again as it goes, and is erased once it has ended.
      const open = new Set([...found.values()].filter((e) => e.state === 'open').map((e) => e.workflowId));
      const ended = rows.filter((row) => !open.has(row.workflowId) && !open.has(row.id)).map((row) => row.id);
      const logRowsDeleted = await deletePersonDeliveryRows(db, personHash, ended);
      const recorded = await recordErasureLook(db, erasure.id, [...found.values()], logRowsDeleted);
      logger.info({ erasureId: erasure.id, ...countsOf(recorded), unconfirmed: recorded.unconfirmed }, 'erasure look');
      // A full batch that erased something may have left more; one that erased nothing (all open) waits instead.
      const full = rows.length === lookBatch || (listed !== 'unlisted' && listed.length === lookBatch);
      const more = full && (logRowsDeleted > 0 || [...found.values()].some((e) => e.state === 'deleted'));
      return { ...countsOf(recorded), unconfirmed: recorded.unconfirmed, more };
    },

    /** Records the erasure completed, with its audit row (counts, the person as their hash); once. */
    async completeErasure(input: ErasePersonInput): Promise<ErasureCounts> {
      await recordedRequest(input, 'refuse');
      return db.transaction(async (trx) => {
        const closed = await closeErasure(trx, input.erasureId, { status: 'completed' });
        const row = closed ?? (await findErasure(trx, input.erasureId))!;
        if (closed) await recordOutcome(trx, closed, 'ok');
        return countsOf(row);
      });
    },

    /** Records the erasure failed, with its audit row, when it stops on an error it cannot get past; once. */
    async recordErasureFailure(input: ErasePersonInput, reason: string): Promise<void> {
      // Nothing recorded, nothing to say it failed on (an input no request recorded).
      if (!(await findErasure(db, input.erasureId))) return;
      await recordedRequest(input, 'refuse');
      await db.transaction(async (trx) => {
        const closed = await closeErasure(trx, input.erasureId, { status: 'failed', failure: reason.slice(0, 500) });
        if (closed) await recordOutcome(trx, closed, 'failed');
      });
    },
  };

  /**
   * Adds what one candidate turned out to be: a run deleted in this look stays deleted when another name of it finds
   * it gone (confirmed, then); a workflow id named without its run and gone adds nothing once one of its runs is seen.
   */
  function remember(found: Map<string, FoundExecution>, execution: FoundExecution): void {
    const key = `${execution.workflowId}\u0000${execution.runId}`;
    const seen = found.get(key);
    if (seen?.state === 'deleted') {
      if (execution.state === 'gone') seen.confirmed = true;
      return;
    }
    if (
      execution.state === 'gone' &&
      execution.runId === '' &&
      [...found.values()].some((e) => e.workflowId === execution.workflowId)
    )
      return;
    found.set(key, execution);
  }

  /** Waits a moment for Temporal to remove the runs just deleted; those it still knows are the next look's. */
  async function confirmDeletions(found: Map<string, FoundExecution>): Promise<void> {
    const deadline = Date.now() + CONFIRM_WITHIN_MS;
    for (;;) {
      const waiting = [...found.values()].filter((execution) => execution.state === 'deleted' && !execution.confirmed);
      if (waiting.length === 0 || Date.now() > deadline) return;
      for (const execution of waiting)
        if (await confirmGone(temporal, execution.workflowId, execution.runId)) execution.confirmed = true;
      Context.current().heartbeat();
      if (waiting.some((execution) => !execution.confirmed)) await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  async function recordOutcome(trx: Db, erasure: ErasureRow, outcome: 'ok' | 'failed'): Promise<void> {
    const row = await appendAuditEvent(trx, {
      actor: { kind: 'system' },
      action: 'erasure.complete',
      outcome,
      changes: {
        erasureId: erasure.id,
        personHash: erasure.personHash,
        status: erasure.status,
        ...countsOf(erasure),
        ...(erasure.failure !== null && { failure: erasure.failure }),
      },
    });
    await setErasureOutcomeAudit(trx, erasure.id, row.id);
  }
}

export type ErasureActivities = ReturnType<typeof createErasureActivities>;

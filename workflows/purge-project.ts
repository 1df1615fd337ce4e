import {
  ContinueAsNew,
  continueAsNew,
  defineQuery,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import { reasonOf } from './failure-reason';
import type { PurgeActivities } from '../activities/purge';
import { PURGE_STATE_QUERY, noPurgeCounts, type PurgeProjectInput, type PurgeState } from '../common/purge';

/** Where the purge stands now: status, step and counts (the API reads the same from the purge's record). */
export const purgeState = defineQuery<PurgeState>(PURGE_STATE_QUERY);

// The request's transaction commits right after the start: a few tries while it does; an input no purge recorded is
// refused for good at once.
const { checkPurgeRequest } = proxyActivities<PurgeActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 8 },
  summary: 'Check the purge is recorded',
});

// A batch job over many executions, or a delivery log of millions of rows, takes a while: each heartbeats as it goes.
// Temporal or the database down is waited out.
const { deleteProjectExecutions, deletePurgedProjectRows, destroyPurgedProjectKeys } = proxyActivities<PurgeActivities>(
  {
    startToCloseTimeout: '2h',
    heartbeatTimeout: '1m',
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '5m' },
    summary: "Delete the project's executions, rows or data keys",
  },
);

const { completePurge, recordPurgeFailure } = proxyActivities<PurgeActivities>({
  startToCloseTimeout: '5m',
  heartbeatTimeout: '1m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
  summary: 'Record how the purge ended, with its audit row',
});

/** Looks in a row that must find no execution of the project: Temporal's visibility lags a deletion by a moment. */
export const PURGE_CONFIRMING_LOOKS = 3;
/** The durable wait between two looks. */
const LOOK_AGAIN_MS = 1_000;

/**
 * Purges one project, whose recorded purge already refuses any new or changed registration: deletes every workflow
 * execution of the project from Temporal with batch jobs until several looks in a row find none, deletes its rows
 * from the database (the project's last), destroys its data keys, and records the purge completed with its audit row.
 * Each step is idempotent: run again after a failure, it does again only what is left.
 */
export async function purgeProject(input: PurgeProjectInput): Promise<PurgeState> {
  const state: PurgeState = {
    purgeId: input.purgeId,
    projectId: input.projectId,
    status: 'pending',
    step: 'executions',
    ...noPurgeCounts(),
  };
  setHandler(purgeState, () => state);
  try {
    await checkPurgeRequest(input);
    await deleteExecutions(input, state);
    state.step = 'rows';
    // An attempt in flight when its execution was deleted still ends, and writes its log row: the rows go after it.
    if (input.lateWritesMs) await sleep(input.lateWritesMs);
    Object.assign(state, await deletePurgedProjectRows(input));
    state.step = 'data-keys';
    Object.assign(state, await destroyPurgedProjectKeys(input));
    Object.assign(state, await completePurge(input), { status: 'completed', step: 'done' });
    return state;
  } catch (error) {
    if (error instanceof ContinueAsNew || isCancellation(error)) throw error;
    state.status = 'failed';
    await recordPurgeFailure(input, reasonOf(error));
    throw error;
  }
}

/** Rounds of batch deletion until PURGE_CONFIRMING_LOOKS looks in a row, a durable wait apart, find nothing left. */
async function deleteExecutions(input: PurgeProjectInput, state: PurgeState): Promise<void> {
  for (let emptyLooks = 0; emptyLooks < PURGE_CONFIRMING_LOOKS;) {
    const look = await deleteProjectExecutions(input);
    state.executionsDeleted = look.executionsDeleted;
    emptyLooks = look.remaining === 0 ? emptyLooks + 1 : 0;
    if (emptyLooks < PURGE_CONFIRMING_LOOKS) await sleep(LOOK_AGAIN_MS);
    // A project whose executions keep coming (its events still sent) must not grow one history without bound: the
    // purge goes on in a new run, from this step (each step is idempotent).
    if (workflowInfo().continueAsNewSuggested) await continueAsNew<typeof purgeProject>(input);
  }
}

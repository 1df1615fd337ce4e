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
import type { ErasureActivities } from '../activities/erasure';
import {
  ERASURE_STATE_QUERY,
  type ErasePersonInput,
  type ErasureCounts,
  type ErasureLook,
  type ErasureState,
} from '../common/erasure';

/** Where the erasure stands now: status, counts and looks (the API reads the same from the erasure's record). */
export const erasureState = defineQuery<ErasureState>(ERASURE_STATE_QUERY);

// The request's transaction commits right after the start: a few tries while it does; an input no request recorded
// is refused for good at once.
const { checkErasureRequest } = proxyActivities<ErasureActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 8 },
  summary: 'Check the erasure request is recorded',
});

// A look may delete many runs: it heartbeats after each. Temporal or the database down is waited out.
const { lookForPersonDeliveries } = proxyActivities<ErasureActivities>({
  startToCloseTimeout: '30m',
  heartbeatTimeout: '1m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '5m' },
  summary: "Find the person's deliveries, delete the closed ones and their log rows",
});

const { completeErasure, recordErasureFailure } = proxyActivities<ErasureActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
  summary: 'Record how the erasure ended, with its audit row',
});

/** How soon to look again when Temporal had not yet removed what the last look deleted (no delivery is open). */
const CONFIRM_AGAIN_MS = 2_000;

const countsOf = (look: ErasureCounts): ErasureCounts => ({
  deliveriesFound: look.deliveriesFound,
  historiesDeleted: look.historiesDeleted,
  logRowsDeleted: look.logRowsDeleted,
  stillOpen: look.stillOpen,
});

/**
 * Erases one person's deliveries: looks, deletes every closed delivery run from Temporal and its log rows, and waits
 * (a durable timer, then another look) for any delivery still being retried to end by itself, delivered or given up,
 * before deleting it too. Never cancels a delivery. Ends with the erasure recorded completed and its audit row.
 */
export async function erasePerson(input: ErasePersonInput): Promise<ErasureState> {
  const state: ErasureState = {
    erasureId: input.erasureId,
    status: 'pending',
    looks: input.resumed?.looks ?? 0,
    deliveriesFound: 0,
    historiesDeleted: 0,
    logRowsDeleted: 0,
    stillOpen: 0,
  };
  setHandler(erasureState, () => state);
  try {
    if (!input.resumed) await checkErasureRequest(input);
    let waitMs = input.resumed?.waitMs ?? input.recheckAfterMs;
    for (;;) {
      const look: ErasureLook = await lookForPersonDeliveries(input);
      Object.assign(state, countsOf(look), {
        looks: state.looks + 1,
        status: look.stillOpen > 0 ? 'waiting-for-open-deliveries' : 'pending',
      });
      if (look.stillOpen === 0 && look.unconfirmed === 0 && !look.more) break;
      // A batch taken: the next at once. Deliveries still open: a durable wait, doubling. Deletions Temporal has not
      // yet carried out: a moment.
      if (!look.more && look.stillOpen > 0) {
        await sleep(waitMs);
        waitMs = Math.min(waitMs * 2, input.maxRecheckAfterMs);
      } else if (!look.more) await sleep(CONFIRM_AGAIN_MS);
      // A person whose deliveries stay open for weeks (a long pause) must not grow one history without bound.
      if (workflowInfo().continueAsNewSuggested)
        await continueAsNew<typeof erasePerson>({ ...input, resumed: { waitMs, looks: state.looks } });
    }
    Object.assign(state, await completeErasure(input), { status: 'completed' });
    return state;
  } catch (error) {
    if (error instanceof ContinueAsNew || isCancellation(error)) throw error;
    state.status = 'failed';
    await recordErasureFailure(input, reasonOf(error));
    throw error;
  }
}

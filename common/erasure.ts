// The erasure of one person's deliveries: what the API, the `erasePerson` workflow and its activities hand each
// other. Sandbox-safe (the workflow imports it): no imports, no I/O. The person is only ever their keyed hash.

export const ERASE_PERSON_WORKFLOW_TYPE = 'erasePerson';
/** The workflow's query: where the job stands now (ErasureState). */
export const ERASURE_STATE_QUERY = 'erasureState';

/** One erasure request is one workflow, its id derived from the request's. */
export const erasureWorkflowId = (erasureId: string): string => `erasure-${erasureId}`;

/**
 * Where an erasure stands: asked for and looking (pending), waiting for deliveries still being retried to end
 * (they are delivered or given up, never cancelled), done, or stopped by an error it could not get past.
 */
export const ERASURE_STATUSES = ['pending', 'waiting-for-open-deliveries', 'completed', 'failed'] as const;
export type ErasureStatus = (typeof ERASURE_STATUSES)[number];

/** What an erasure found and removed so far. */
export interface ErasureCounts {
  /** The person's delivery runs found: workflow executions in Temporal and those the delivery log names. */
  deliveriesFound: number;
  /** Closed workflow executions deleted from Temporal (DeleteWorkflowExecution). */
  historiesDeleted: number;
  /** Delivery log rows deleted, each with its attempts. */
  logRowsDeleted: number;
  /** Deliveries still running at the last look: the erasure waits for them to end. */
  stillOpen: number;
}

/** The workflow's input: the recorded request (the activities refuse one that is not recorded as this). */
export interface ErasePersonInput {
  erasureId: string;
  personHash: string;
  /** The first wait before looking again at deliveries still open; each wait doubles, up to the next. */
  recheckAfterMs: number;
  maxRecheckAfterMs: number;
  /** Set by a continue-as-new: the request was checked already, and the wait reached so far. */
  resumed?: { waitMs: number; looks: number };
}

/** One look at the person's deliveries: the counts so far, and whether anything is left to wait for. */
export interface ErasureLook extends ErasureCounts {
  /** Executions deleted in this look that Temporal still describes: the next look confirms they are gone. */
  unconfirmed: number;
  /** The look took a batch of the person's deliveries and more are left: the next look takes them, at once. */
  more: boolean;
}

/** What the `erasureState` query answers. */
export interface ErasureState extends ErasureCounts {
  erasureId: string;
  status: ErasureStatus;
  /** Looks made so far (a look finds, deletes what has closed, and counts what is still open). */
  looks: number;
}

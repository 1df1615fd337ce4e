// The purge of one project (a customer whose contract ended): what the API, the CLI, the `purgeProject` workflow and
// its activities hand each other. Sandbox-safe (the workflow imports it): no imports, no I/O.

export const PURGE_PROJECT_WORKFLOW_TYPE = 'purgeProject';
/** The workflow's query: where the purge stands now (PurgeState). */
export const PURGE_STATE_QUERY = 'purgeState';

/** One purge is one workflow, its id derived from the purge's: a purge started again runs under the same id. */
export const purgeWorkflowId = (purgeId: string): string => `purge-${purgeId}`;

/** Temporal's batch deletion job of one round of a purge: rounds are numbered from 1, each job id used once. */
export const purgeBatchJobId = (purgeId: string, round: number): string => `purge-${purgeId}-${round}`;

/** Where a purge stands: under way (pending), done, or stopped by an error it could not get past (run it again). */
export const PURGE_STATUSES = ['pending', 'completed', 'failed'] as const;
export type PurgeStatus = (typeof PURGE_STATUSES)[number];

/** The steps in order: Temporal's executions, then the database's rows, then the data keys; `done` once completed. */
export const PURGE_STEPS = ['executions', 'rows', 'data-keys', 'done'] as const;
export type PurgeStep = (typeof PURGE_STEPS)[number];

/** What a purge removed so far (each step adds what it removed; run again, it adds what was left). */
export interface PurgeCounts {
  /** Workflow executions of the project deleted from Temporal by its batch deletion jobs (running ones terminated). */
  executionsDeleted: number;
  /** The webhook registration: URL, signing secrets, custom headers and client certificate, all sealed in its row. */
  registrationsDeleted: number;
  portalLinksDeleted: number;
  /** The notification contacts (a URL, e-mail addresses). */
  contactsDeleted: number;
  /** Notices told or queued for the project. */
  noticesDeleted: number;
  membersDeleted: number;
  /** Delivery log rows deleted, and their attempts with them. */
  deliveryRowsDeleted: number;
  attemptsDeleted: number;
  /** The project's data keys destroyed: the keys its Temporal payloads were sealed under. */
  dataKeysDestroyed: number;
}

/** The workflow's input: the recorded purge (the activities refuse one that is not recorded as this). */
export interface PurgeProjectInput {
  purgeId: string;
  projectId: string;
  /**
   * How long an attempt cut off by its execution's deletion may still write its log row (an attempt's deadline): the
   * rows are deleted only after it. None when absent.
   */
  lateWritesMs?: number;
}

/** One look at the project's executions in Temporal: how many a visibility query still finds after the round. */
export interface PurgeExecutionsLook {
  executionsDeleted: number;
  /** Executions still listed under the project (visibility lags a deletion: a few more looks confirm none is left). */
  remaining: number;
  /** The batch jobs so far. */
  batchJobs: number;
}

/** What the `purgeState` query answers. */
export interface PurgeState extends PurgeCounts {
  purgeId: string;
  projectId: string;
  status: PurgeStatus;
  step: PurgeStep;
}

/** A new purge's counts: nothing removed yet. */
export const noPurgeCounts = (): PurgeCounts => ({
  executionsDeleted: 0,
  registrationsDeleted: 0,
  portalLinksDeleted: 0,
  contactsDeleted: 0,
  noticesDeleted: 0,
  membersDeleted: 0,
  deliveryRowsDeleted: 0,
  attemptsDeleted: 0,
  dataKeysDestroyed: 0,
});

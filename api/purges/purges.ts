// The purge of one project (a customer whose contract ended), for operators: the request (recorded with its audit row
// and started as the `purgeProject` workflow; a failed or interrupted one run again), its status, and the certificate
// of destruction once it has completed.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/common';
import type { Config } from '../../common/config';
import { attemptDeadlineMs } from '../../common/contract';
import {
  PURGE_PROJECT_WORKFLOW_TYPE,
  purgeWorkflowId,
  type PurgeCounts,
  type PurgeProjectInput,
  type PurgeStatus,
  type PurgeStep,
} from '../../common/purge';
import * as store from '../../db';
import { recordAuditRow } from '../http/audited-actions';
import { ApiError, ProjectNotFoundError } from '../http/errors';
import { isOperator, type OperatorPolicy } from '../auth/operator-policy';
import { validatePurgeRequest } from './schemas';

/**
 * Starts the job of a recorded purge, or leaves it running when it is: a purge started again runs under the same
 * workflow id. Rejects when Temporal would not start it (a new request is then rolled back).
 */
export type PurgeStarter = (purge: Pick<PurgeProjectInput, 'purgeId' | 'projectId'>) => Promise<void>;

/** What the purge routes and commands need: the database and the job's starter. */
export interface PurgeDeps {
  db: Knex;
  start: PurgeStarter;
}

export class NotPurgeOperatorError extends ApiError {
  constructor() {
    super(
      403,
      'The caller is not an operator: purges are for subjects listed in OPERATOR_SUBJECTS or tokens with OPERATOR_ROLE',
    );
  }
}

export class PurgeNotFoundError extends ApiError {
  constructor(id: string) {
    super(404, `No purge with id ${id} was found`);
  }
}

export class PurgeNotCompletedError extends ApiError {
  constructor(id: string, status: PurgeStatus) {
    super(409, `Purge ${id} has not completed (it is ${status}): its certificate is issued once it has`);
  }
}

export class PurgeUnavailableError extends ApiError {
  constructor() {
    super(503, 'Purge is unavailable: this API instance has no Temporal connection');
  }
}

/** A purge as the routes show it: where it stands and what it removed so far. */
export interface PurgeView {
  id: string;
  projectId: string;
  status: PurgeStatus;
  step: PurgeStep;
  requestedAt: string;
  completedAt?: string;
  counts: PurgeCounts;
  failure?: string;
}

/** What a request did: recorded a new purge, ran a failed one again, or found one under way. */
export type PurgeRequestOutcome = 'started' | 'resumed' | 'pending';

/** The certificate of destruction: what was destroyed, where, when, at whose request, and the audit rows saying so. */
export interface PurgeCertificate {
  certificate: 'purge-of-project-data';
  purgeId: string;
  projectId: string;
  requestedBy: { kind: string; subject?: string; issuer?: string };
  requestedAt: string;
  completedAt: string;
  counts: PurgeCounts;
  dataKeysDestroyed: string[];
  temporalBatchJobs: { jobId: string; deleted: number; failed: number }[];
  erased: string[];
  notErased: string[];
  auditEvents: { id: string; at: string; action: string; outcome: string; hash: string }[];
}

const ERASED = [
  "Temporal: every workflow execution of the project (deliveries, redeliveries, tests: their events, payloads and attempts), found by its ProjectId and deleted by Temporal's batch deletion (running ones terminated first), until no look found any",
  "PostgreSQL: the project's webhook registration with its URL, signing secrets, custom headers and client certificate (sealed in its row), its circuit breaker and waiters, send limits and endpoint health",
  "PostgreSQL: the project's notification contacts, notices, portal links and members, and the project's row",
  "PostgreSQL: the project's delivery log (deliveries) and its attempts (delivery_attempts)",
  "The project's data keys, under which its Temporal payloads were sealed: their wrapped bytes cleared for good (a tombstone names each), so no copy of those payloads can be opened again",
];
const NOT_ERASED = [
  "Backups of Temporal's persistence and of PostgreSQL taken before the purge: they age out with their retention (the payloads in them stay sealed under the destroyed keys)",
  'Copies the receivers hold of what was delivered to them: the customer’s own to erase',
  'The audit trail: its rows about the project (who changed what, when), kept for the trail to verify; none holds a secret, a payload or a person’s data',
];

const iso = (date: Date) => date.toISOString();

function view(row: store.PurgeRow): PurgeView {
  return {
    id: row.id,
    projectId: row.projectId,
    status: row.status,
    step: row.step,
    requestedAt: iso(row.requestedAt),
    ...(row.completedAt && { completedAt: iso(row.completedAt) }),
    counts: store.purgeCounts(row),
    ...(row.failure !== null && { failure: row.failure }),
  };
}

/**
 * The operator's starter of `purgeProject` on the workers' queue, behind every delivery (lowest priority). Its rows
 * are deleted an attempt's deadline (WEBHOOK_TIMEOUT_MS and its margin) after its executions, unless told otherwise.
 */
export function createPurgeStarter(
  temporal: Client | (() => Promise<Client>),
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'WEBHOOK_TIMEOUT_MS'>,
  { lateWritesMs = attemptDeadlineMs(config.WEBHOOK_TIMEOUT_MS) }: { lateWritesMs?: number } = {},
): PurgeStarter {
  return async (input) => {
    const client = typeof temporal === 'function' ? await temporal() : temporal;
    await client.workflow.start(PURGE_PROJECT_WORKFLOW_TYPE, {
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workflowId: purgeWorkflowId(input.purgeId),
      args: [{ purgeId: input.purgeId, projectId: input.projectId, lateWritesMs } satisfies PurgeProjectInput],
      // Run again after it failed or was terminated; left as it is while it runs.
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: 'USE_EXISTING',
      // A purge never gets ahead of a fall: it runs at the tests' priority, in a fairness share of its own.
      priority: { priorityKey: 5, fairnessKey: 'purge' },
    });
  };
}

/**
 * Purges a project: a new purge is recorded with its audit row and started in one transaction (a job Temporal would not
 * start leaves no record); the project's unfinished purge is run again instead, under its own id: a failed one with an
 * audit row saying who asked again, a pending one (under way, or interrupted) started again if its workflow is gone.
 */
export async function requestPurge(
  deps: PurgeDeps,
  actor: store.AuditActor,
  body: unknown,
): Promise<{ purge: PurgeView; outcome: PurgeRequestOutcome }> {
  const { projectId } = validatePurgeRequest(body);
  for (;;) {
    const unfinished = await store.unfinishedPurge(deps.db, projectId);
    if (unfinished) return { purge: view(await resume(deps, actor, unfinished)), outcome: outcomeOf(unfinished) };
    if (!(await store.projectExists(deps.db, projectId))) throw new ProjectNotFoundError(projectId);
    const id = randomUUID();
    const row = await deps.db
      .transaction(async (trx) => {
        const audit = await recordAuditRow(trx, actor, {
          action: 'purge.request',
          projectId,
          changes: { purgeId: id },
        });
        const recorded = await store.insertPurge(trx, { id, projectId, requestedBy: actor, requestAuditId: audit?.id });
        // Another request recorded one first: this audit row is rolled back, and that purge is the answer.
        if (!recorded) throw new PurgeRaceLost();
        await deps.start({ purgeId: id, projectId });
        return recorded;
      })
      .catch((error: unknown) => {
        if (error instanceof PurgeRaceLost) return undefined;
        throw error;
      });
    if (row) return { purge: view(row), outcome: 'started' };
  }
}

class PurgeRaceLost extends Error {}

const outcomeOf = (row: store.PurgeRow): PurgeRequestOutcome => (row.status === 'failed' ? 'resumed' : 'pending');

/** Runs an unfinished purge again: a failed one made pending (with its audit row), any started again if not running. */
async function resume(deps: PurgeDeps, actor: store.AuditActor, purge: store.PurgeRow): Promise<store.PurgeRow> {
  const input = { purgeId: purge.id, projectId: purge.projectId };
  if (purge.status !== 'failed') {
    await deps.start(input);
    return purge;
  }
  return deps.db.transaction(async (trx) => {
    const reopened = await store.reopenPurge(trx, purge.id);
    if (!reopened) return (await store.findPurge(trx, purge.id))!;
    await recordAuditRow(trx, actor, {
      action: 'purge.resume',
      projectId: purge.projectId,
      changes: { purgeId: purge.id, step: purge.step, ...(purge.failure !== null && { failure: purge.failure }) },
    });
    await deps.start(input);
    return reopened;
  });
}

async function found(db: Knex, id: string): Promise<store.PurgeRow> {
  const row = await store.findPurge(db, id);
  if (!row) throw new PurgeNotFoundError(id);
  return row;
}

/** Where a purge stands, with its counts so far. */
export async function purgeStatus(db: Knex, id: string): Promise<PurgeView> {
  return view(await found(db, id));
}

/** The certificate of a completed purge (409 before it has completed). */
export async function purgeCertificate(db: Knex, id: string): Promise<PurgeCertificate> {
  const row = await found(db, id);
  if (row.status !== 'completed' || !row.completedAt) throw new PurgeNotCompletedError(id, row.status);
  const { kind, subject, issuer } = row.requestedBy;
  return {
    certificate: 'purge-of-project-data',
    purgeId: row.id,
    projectId: row.projectId,
    requestedBy: { kind, ...(subject !== undefined && { subject }), ...(issuer !== undefined && { issuer }) },
    requestedAt: iso(row.requestedAt),
    completedAt: iso(row.completedAt),
    counts: store.purgeCounts(row),
    dataKeysDestroyed: row.dataKeysDestroyed,
    temporalBatchJobs: row.batchJobs.map(({ jobId, deleted, failed }) => ({ jobId, deleted, failed })),
    erased: ERASED,
    notErased: NOT_ERASED,
    auditEvents: await store.purgeAuditEvents(db, row),
  };
}

/** The routes' check: an operator (as the codec, the whole audit trail and erasures). */
export function asOperator(operators: OperatorPolicy | undefined, claims: object): void {
  if (!operators || !isOperator(operators, claims)) throw new NotPurgeOperatorError();
}

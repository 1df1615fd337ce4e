// Erasure of one person's deliveries, for operators: the request (recorded with its audit row and started as the
// `erasePerson` workflow), its status, and the certificate of destruction once it has completed. The person is taken
// as a userUUID and kept only as its keyed hash.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/common';
import type { Config } from '../../common/config';
import { personHash as hashPerson } from '../../common/crypto/person-hash';
import {
  ERASE_PERSON_WORKFLOW_TYPE,
  erasureWorkflowId,
  type ErasePersonInput,
  type ErasureCounts,
  type ErasureStatus,
} from '../../common/erasure';
import * as store from '../../db';
import { recordAuditRow } from '../http/audited-actions';
import { ApiError } from '../http/errors';
import { isOperator, type OperatorPolicy } from '../auth/operator-policy';
import { validateErasureRequest } from './schemas';

/** Starts the job of a recorded request; rejects when Temporal would not start it (the request is then rolled back). */
export type ErasureStarter = (request: Pick<ErasePersonInput, 'erasureId' | 'personHash'>) => Promise<void>;

/** What the erasure routes and commands need: the database, the person hash key and the job's starter. */
export interface ErasureDeps {
  db: Knex;
  personHashKey: Buffer;
  start: ErasureStarter;
}

export class NotErasureOperatorError extends ApiError {
  constructor() {
    super(
      403,
      'The caller is not an operator: erasures are for subjects listed in OPERATOR_SUBJECTS or tokens with OPERATOR_ROLE',
    );
  }
}

export class ErasureNotFoundError extends ApiError {
  constructor(id: string) {
    super(404, `No erasure with id ${id} was found`);
  }
}

export class ErasureNotCompletedError extends ApiError {
  constructor(id: string, status: ErasureStatus) {
    super(409, `Erasure ${id} has not completed (it is ${status}): its certificate is issued once it has`);
  }
}

export class ErasureUnavailableError extends ApiError {
  constructor() {
    super(503, 'Erasure is unavailable: this API instance has no Temporal connection');
  }
}

/** An erasure as the routes show it: where it stands and what it found, the person as their hash. */
export interface ErasureView {
  id: string;
  status: ErasureStatus;
  personHash: string;
  requestedAt: string;
  completedAt?: string;
  counts: ErasureCounts;
  failure?: string;
}

/** The certificate of destruction: what was erased, where, when, at whose request, and the audit rows saying so. */
export interface ErasureCertificate {
  certificate: 'erasure-of-personal-data';
  erasureId: string;
  person: { hash: string; hashedWith: string };
  requestedBy: { kind: string; subject?: string; issuer?: string };
  requestedAt: string;
  completedAt: string;
  counts: ErasureCounts;
  deletedWorkflows: { workflowId: string; runId: string }[];
  erased: string[];
  notErased: string[];
  auditEvents: { id: string; at: string; action: string; outcome: string; hash: string }[];
}

/** How the person is hashed, in the certificate's words. */
const HASHED_WITH = 'HMAC-SHA256 under PERSON_HASH_KEY of the lower-case userUUID; the userUUID itself is kept nowhere';
const ERASED = [
  "Temporal: every closed workflow execution of the person's deliveries (event, payload, attempts), deleted with " +
    "Temporal's DeleteWorkflowExecution and confirmed gone",
  "PostgreSQL: the person's rows of the delivery log (deliveries) and their attempts (delivery_attempts)",
];
const NOT_ERASED = [
  "Backups of Temporal's persistence and of PostgreSQL taken before the erasure: they age out with their retention",
  "Copies the receivers hold of what was delivered to them: each customer's own to erase",
  'The audit trail: the request and this outcome, naming the person only by the hash above',
];

const iso = (date: Date) => date.toISOString();

function view(row: store.ErasureRow): ErasureView {
  return {
    id: row.id,
    status: row.status,
    personHash: row.personHash,
    requestedAt: iso(row.requestedAt),
    ...(row.completedAt && { completedAt: iso(row.completedAt) }),
    counts: {
      deliveriesFound: row.deliveriesFound,
      historiesDeleted: row.historiesDeleted,
      logRowsDeleted: row.logRowsDeleted,
      stillOpen: row.stillOpen,
    },
    ...(row.failure !== null && { failure: row.failure }),
  };
}

/** The operator's starter of `erasePerson` on the workers' queue, behind every delivery (lowest priority). */
export function createErasureStarter(
  temporal: Client | (() => Promise<Client>),
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'ERASURE_RECHECK_MS' | 'ERASURE_RECHECK_MAX_MS'>,
): ErasureStarter {
  return async ({ erasureId, personHash }) => {
    const client = typeof temporal === 'function' ? await temporal() : temporal;
    const input: ErasePersonInput = {
      erasureId,
      personHash,
      recheckAfterMs: config.ERASURE_RECHECK_MS,
      maxRecheckAfterMs: config.ERASURE_RECHECK_MAX_MS,
    };
    await client.workflow.start(ERASE_PERSON_WORKFLOW_TYPE, {
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workflowId: erasureWorkflowId(erasureId),
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      // An erasure never gets ahead of a fall: it runs at the tests' priority, in a fairness share of its own.
      priority: { priorityKey: 5, fairnessKey: 'erasure' },
    });
  };
}

/**
 * Records the request with its audit row (the person as their hash) and starts its job, in one transaction: a job
 * Temporal would not start leaves no record, and a record is never without its job.
 */
export async function requestErasure(deps: ErasureDeps, actor: store.AuditActor, body: unknown): Promise<ErasureView> {
  const { userUUID } = validateErasureRequest(body);
  const personHash = hashPerson(deps.personHashKey, userUUID);
  const id = randomUUID();
  const row = await deps.db.transaction(async (trx) => {
    const audit = await recordAuditRow(trx, actor, {
      action: 'erasure.request',
      changes: { erasureId: id, personHash },
    });
    const recorded = await store.insertErasure(trx, { id, personHash, requestedBy: actor, requestAuditId: audit?.id });
    await deps.start({ erasureId: id, personHash });
    return recorded;
  });
  return view(row);
}

async function found(db: Knex, id: string): Promise<store.ErasureRow> {
  const row = await store.findErasure(db, id);
  if (!row) throw new ErasureNotFoundError(id);
  return row;
}

/** Where an erasure stands, with its counts so far. */
export async function erasureStatus(db: Knex, id: string): Promise<ErasureView> {
  return view(await found(db, id));
}

/** The certificate of a completed erasure (409 before it has completed). */
export async function erasureCertificate(db: Knex, id: string): Promise<ErasureCertificate> {
  const row = await found(db, id);
  if (row.status !== 'completed' || !row.completedAt) throw new ErasureNotCompletedError(id, row.status);
  const { kind, subject, issuer } = row.requestedBy;
  return {
    certificate: 'erasure-of-personal-data',
    erasureId: row.id,
    person: { hash: row.personHash, hashedWith: HASHED_WITH },
    requestedBy: { kind, ...(subject !== undefined && { subject }), ...(issuer !== undefined && { issuer }) },
    requestedAt: iso(row.requestedAt),
    completedAt: iso(row.completedAt),
    counts: view(row).counts,
    deletedWorkflows: (await store.deletedErasureExecutions(db, id)).map(({ workflowId, runId }) => ({
      workflowId,
      runId,
    })),
    erased: ERASED,
    notErased: NOT_ERASED,
    auditEvents: await store.erasureAuditEvents(db, row),
  };
}

/** The routes' checks: an operator (as the codec and the whole audit trail), and a process that can start jobs. */
export function asOperator(operators: OperatorPolicy | undefined, claims: object): void {
  if (!operators || !isOperator(operators, claims)) throw new NotErasureOperatorError();
}

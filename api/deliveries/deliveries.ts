import type { Knex } from 'knex';
import * as store from '../../db';
import { certificateExpiry } from '../../common/registration/client-certificate';
import { UNAVAILABLE_RETRY_AFTER_S, unavailableDependency } from '../http/dependency-errors';
import { ApiError } from '../http/errors';
import { assertMember, view as registrationView } from '../webhooks/registrations';
import { recordAudit } from '../http/audited-actions';
import { recheckPortalLink } from '../auth/authenticate';
import {
  EventNoLongerRetainedError,
  EventNotTrustedError,
  type RedeliveryStarter,
  type WorkflowEndWatcher,
} from './redelivery';
import { RECOVER_CALL_LEASE_MS, type SendLimiter, type SendSlot } from '../http/send-limits';
import type { ReadLimiter } from '../http/read-limits';
import { validateRecoverBody } from './schemas';
import { DETAIL_ATTEMPTS, encodeAttemptsCursor, encodeCursor, parseAttemptsQuery, parseListQuery } from './query';

export {
  DEFAULT_PAGE_SIZE,
  DETAIL_ATTEMPTS,
  InvalidQueryError,
  MAX_CURSOR_LENGTH,
  MAX_PAGE_SIZE,
  parseListQuery,
} from './query';

export interface DeliveryDeps {
  db: Knex;
  /** Starts redeliveries through Temporal; absent when the API runs without a Temporal client. */
  redelivery?: RedeliveryStarter;
  /** Recovery spaces its redeliveries to this many per second (RECOVER_RATE_PER_SECOND). */
  recoverRatePerSecond?: number;
  /** The per-project limits of members' redeliver and recover calls; absent for the operator CLI (unlimited). */
  sendLimiter?: SendLimiter;
  /** Tells when a TEST redelivery has ended, to free the project's TEST slot; without it the slot's lease does. */
  watchWorkflowEnd?: WorkflowEndWatcher;
  /** The per-project rate of reads of the log and health (READ_CALLS_PER_SECOND); absent: unlimited. */
  readLimiter?: ReadLimiter;
}

/** One delivery as a member sees it: status, counts, codes and times; never the payload or a response body. */
export interface DeliveryView {
  id: string;
  type: string;
  status: store.DeliveryStatus;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  /** When the last attempt was made; null before the first. */
  lastAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface AttemptView {
  attempt: number;
  at: string;
  statusCode?: number;
  errorCode?: string;
  durationMs: number;
}

export interface EndpointHealthView {
  state: 'unknown' | 'healthy' | 'failing';
  consecutiveFailures: number;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  lastError: string | null;
  breaker: BreakerView;
  /** The client certificate's expiry, with a warning from 14 days before; null without a certificate. */
  clientCertificate: CertificateExpiryView | null;
  /** Why deliveries are held, when they are: a member's pause, or the receiver's 410 Gone; null otherwise. */
  held: HeldView | null;
  /** Until when the receiver asked to be left alone (429, 502, 503, 504); null when it did not. */
  slowedUntil: string | null;
  /** The receiver's rate limit and the deliveries queued for it; null: unlimited. */
  rateLimit: RateLimitView | null;
}

export interface RateLimitView {
  perSecond: number;
  waiting: number;
}

export interface HeldView {
  reason: 'member' | 'gone';
  since: string;
  /** When a member's pause ends by itself; null for a 410's hold, which lasts until a member resumes. */
  until: string | null;
  /** In words, e.g. "held: the receiver answered 410 Gone at 2026-11-29T00:42:00.000Z". */
  summary: string;
}

export interface CertificateExpiryView {
  state: 'valid' | 'expiring' | 'expired';
  notAfter: string;
  daysLeft: number;
  warning: string | null;
}

/**
 * The registration's circuit breaker: closed (attempts go), open (none go until `openUntil`), or half-open (its open
 * period is over: the next attempt probes, and its outcome closes or reopens it).
 */
export interface BreakerView {
  state: 'closed' | 'open' | 'half-open';
  /** While open: when the open period ends and a probe may go; null otherwise. */
  openUntil: string | null;
}

/** The most failed deliveries one recover call redelivers; a second call takes the rest (claimed ones are pending). */
export const MAX_RECOVER_BATCH = 500;

export class DeliveryNotFoundError extends ApiError {
  constructor(id: string) {
    super(404, `No delivery with id ${id} was found`);
  }
}

export class DeliveryNotRedeliverableError extends ApiError {
  constructor(id: string, status: store.DeliveryStatus) {
    super(409, notRedeliverable[status](id));
  }
}

/** Why a delivery in each state is refused a redelivery, in the 409's detail. */
const notRedeliverable: Record<store.DeliveryStatus, (id: string) => string> = {
  pending: (id: string) => `Delivery ${id} is pending: wait for it to be delivered or to fail before redelivering it`,
  held: (id: string) =>
    `Delivery ${id} is held by the webhook's pause: it is sent when deliveries resume, so it cannot be redelivered now`,
  skipped: (id: string) =>
    `Delivery ${id} was skipped (no webhook took it): only delivered or failed deliveries can be redelivered`,
  // Claimable only as it changed under the claim (another redelivery of it just ended, for one).
  delivered: (id: string) => `Delivery ${id} changed while it was being claimed: try again`,
  failed: (id: string) => `Delivery ${id} changed while it was being claimed: try again`,
};

export class RedeliveryUnavailableError extends ApiError {
  constructor() {
    super(503, 'Redelivery is unavailable: this API instance has no Temporal connection');
  }
}

/**
 * Temporal stopped answering part-way through a recovery: the redeliveries started so far stand (they are no longer
 * failed, so the next recovery does not take them twice); the 503 says how many, in `count`.
 */
export class RecoveryInterruptedError extends ApiError {
  constructor(readonly count: number) {
    super(
      503,
      `Temporal stopped answering after ${count} of the recovery's redeliveries were started; ` +
        `recover again in ${UNAVAILABLE_RETRY_AFTER_S} seconds to start the rest`,
      { count },
    );
  }
}

const iso = (date: Date | null) => date?.toISOString() ?? null;

const view = (row: store.DeliveryRow): DeliveryView => ({
  id: row.id,
  type: row.type,
  status: row.status,
  attempts: row.attempts,
  lastStatusCode: row.lastStatusCode,
  lastError: row.lastError,
  lastAttemptAt: iso(row.lastAttemptAt),
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});

const attemptView = (row: store.DeliveryAttemptRow): AttemptView => ({
  attempt: row.attempt,
  at: row.at.toISOString(),
  ...(row.statusCode !== null && { statusCode: row.statusCode }),
  ...(row.errorCode !== null && { errorCode: row.errorCode }),
  durationMs: row.durationMs,
});

export async function listDeliveries(
  deps: DeliveryDeps,
  userId: string,
  projectId: string,
  query: Record<string, string | string[] | undefined>,
): Promise<{ items: DeliveryView[]; nextCursor: string | null }> {
  await assertMember(deps.db, projectId, userId);
  deps.readLimiter?.(projectId);
  const filter = parseListQuery(query);
  const rows = await store.listDeliveries(deps.db, projectId, filter);
  const page = rows.slice(0, filter.limit);
  const last = page.at(-1);
  return {
    items: page.map((row) => view(row)),
    nextCursor: rows.length > filter.limit && last ? encodeCursor(last.position) : null,
  };
}

/** A page of attempts, oldest first, and the cursor of the next page (null on the last). */
async function attemptsPage(
  deps: DeliveryDeps,
  delivery: store.DeliveryRef,
  page: store.AttemptsPage,
): Promise<{ items: AttemptView[]; nextCursor: string | null }> {
  const rows = await store.listDeliveryAttempts(deps.db, delivery, page);
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return {
    items: items.map(attemptView),
    nextCursor: rows.length > page.limit && last ? encodeAttemptsCursor(last.seq) : null,
  };
}

/**
 * One delivery with its first DETAIL_ATTEMPTS attempts (every one, for a delivery that has no more); when it has
 * more, `nextAttemptsCursor` reads the rest from listAttempts.
 */
export async function getDelivery(
  deps: DeliveryDeps,
  userId: string,
  projectId: string,
  id: string,
): Promise<DeliveryView & { attemptLog: AttemptView[]; nextAttemptsCursor: string | null }> {
  await assertMember(deps.db, projectId, userId);
  deps.readLimiter?.(projectId);
  const row = await store.findDelivery(deps.db, projectId, id);
  if (!row) throw new DeliveryNotFoundError(id);
  // The last attempt's time is the row's own (written with the attempt): no read of the attempts for it.
  const attempts = await attemptsPage(deps, row, { limit: DETAIL_ATTEMPTS });
  return { ...view(row), attemptLog: attempts.items, nextAttemptsCursor: attempts.nextCursor };
}

/** A page of a delivery's attempts, oldest first (`limit`, and `cursor` from the detail or the previous page). */
export async function listAttempts(
  deps: DeliveryDeps,
  userId: string,
  projectId: string,
  id: string,
  query: Record<string, string | string[] | undefined>,
): Promise<{ items: AttemptView[]; nextCursor: string | null }> {
  await assertMember(deps.db, projectId, userId);
  deps.readLimiter?.(projectId);
  const page = parseAttemptsQuery(query);
  const row = await store.findDelivery(deps.db, projectId, id);
  if (!row) throw new DeliveryNotFoundError(id);
  return attemptsPage(deps, row, page);
}

/**
 * Sends a delivered or failed event again, with its X-Webhook-Id, to the current registration. The claim moves it
 * to pending first, so a second redelivery of it is refused (409) until this one ends. A TEST event counts against
 * the test endpoint's limits (one in flight, TEST_EVENTS_PER_MINUTE); any other against REDELIVER_CALLS_PER_MINUTE.
 */
export async function redeliver(
  deps: DeliveryDeps,
  userId: string,
  projectId: string,
  id: string,
  actor?: store.AuditActor,
): Promise<{ id: string; redeliveryOf: string }> {
  await assertMember(deps.db, projectId, userId);
  if (!deps.sendLimiter) return redeliverAsOperator(deps, projectId, id, actor);
  // Nothing can start: the call is not counted.
  if (!deps.redelivery) throw new RedeliveryUnavailableError();
  const delivery = await store.findDelivery(deps.db, projectId, id);
  if (!delivery) throw new DeliveryNotFoundError(id);
  if (delivery.type !== 'TEST') {
    await deps.sendLimiter('redeliver', projectId);
    return redeliverAsOperator(deps, projectId, id, actor);
  }
  const slot = await deps.sendLimiter('test', projectId);
  let started: { id: string; redeliveryOf: string };
  try {
    started = await redeliverAsOperator(deps, projectId, id, actor);
  } catch (error) {
    await slot.release();
    throw error;
  }
  // The slot stays taken until the TEST attempt has ended, after this answer (or until its lease ends).
  if (deps.watchWorkflowEnd) void deps.watchWorkflowEnd(started.id).then(() => slot.release());
  return started;
}

/** The redelivery itself, without the membership check: the operator CLI calls it directly. */
export async function redeliverAsOperator(
  deps: DeliveryDeps,
  projectId: string,
  id: string,
  /** Who asked: the trail records the request with the claim, in its transaction (the start is Temporal's). */
  actor?: store.AuditActor,
): Promise<{ id: string; redeliveryOf: string }> {
  if (!deps.redelivery) throw new RedeliveryUnavailableError();
  // A link revoked meanwhile stops here, before anything is claimed or written (a 401 writes nothing).
  await recheckPortalLink();
  const event = { action: 'delivery.redeliver', projectId, deliveryId: id } as const;
  const claimed = await deps.db.transaction(async (trx) => {
    const row = await store.claimRedelivery(trx, projectId, id);
    if (row && actor) await recordAudit(trx, actor, event);
    return row;
  });
  if (!claimed) {
    const row = await store.findDelivery(deps.db, projectId, id);
    if (!row) throw new DeliveryNotFoundError(id);
    throw new DeliveryNotRedeliverableError(id, row.status);
  }
  // A start that fails (past retention, not the logged event, Temporal down) leaves a second row, outcome `failed`,
  // in the transaction that puts the delivery back: the trail never shows a redelivery that did not happen as done.
  const workflowId = await startOrRelease(
    deps,
    deps.redelivery,
    claimed,
    0,
    actor &&
      ((trx, error) => recordAudit(trx, actor, { ...event, outcome: 'failed', changes: { status: statusOf(error) } })),
  );
  return { id: workflowId, redeliveryOf: id };
}

/**
 * Redelivers every failed delivery created in [since, until), oldest first, spaced by Temporal's start delay so
 * the receiver sees at most RECOVER_RATE_PER_SECOND of them per second. Returns how many were started.
 * At most RECOVER_CALLS_PER_MINUTE calls per project, one at a time: a recovery holds the project's slot until its
 * last redelivery is due, so calls made together or one after another never add up their rates.
 */
export async function recoverDeliveries(
  deps: DeliveryDeps,
  userId: string,
  projectId: string,
  body: unknown,
  actor?: store.AuditActor,
): Promise<{ count: number }> {
  await assertMember(deps.db, projectId, userId);
  // After membership: a non-member learns nothing from the validation either.
  const window = validateRecoverBody(body);
  if (!deps.sendLimiter) return recoverAndRecord(deps, projectId, window, actor);
  if (!deps.redelivery) throw new RedeliveryUnavailableError();
  const slot = await deps.sendLimiter('recover', projectId);
  const redelivery = deps.redelivery;
  // Each start renews the slot's lease: a long recovery never outlives it and runs beside a second one.
  const renewing = { ...deps, redelivery: afterRenewal(slot, redelivery) };
  const progress = { count: 0 };
  try {
    return await recoverAndRecord(renewing, projectId, window, actor, progress);
  } finally {
    // Held until the last redelivery started is due, however the recovery ended.
    await slot.keepFor(progress.count * recoverSpacingMs(deps));
  }
}

/**
 * A recovery and its row in the trail (the API's and the CLI's). The row is written in the transaction that claims the
 * recovery's deliveries, before any start, so no redelivery starts without it; `count` is how many were claimed. A
 * recovery that stops part-way (Temporal gone, the link revoked, the database lost) adds a row, outcome `failed`, with
 * how many had started and the status it stopped with, in the transaction that puts the rest back.
 */
export async function recoverAndRecord(
  deps: DeliveryDeps,
  projectId: string,
  window: { since: string; until?: string },
  actor: store.AuditActor | undefined,
  progress = { count: 0 },
): Promise<{ count: number }> {
  const record = (db: Knex.Transaction, changes: Record<string, unknown>, outcome: store.AuditOutcome) =>
    recordAudit(db, actor!, {
      action: 'deliveries.recover',
      outcome,
      projectId,
      changes: { since: window.since, ...(window.until !== undefined && { until: window.until }), ...changes },
    });
  const trail: RecoveryTrail | undefined = actor && {
    claimed: (trx, count) => record(trx, { count }, 'ok'),
    stopped: (trx, error) => record(trx, { count: progress.count, stoppedWith: statusOf(error) }, 'failed'),
  };
  return recoverAsOperator(deps, projectId, window, progress, trail);
}

/** What a recovery writes to the trail, each in the transaction of the claims it speaks of. */
export interface RecoveryTrail {
  /** With the claim of the recovery's deliveries, before any start: how many were claimed. */
  claimed(trx: Knex.Transaction, count: number): Promise<void>;
  /** With the release of the claims not started, when the recovery stops part-way. */
  stopped(trx: Knex.Transaction, error: unknown): Promise<void>;
}

/** The HTTP status an error is answered with (what a `failed` row records). */
const statusOf = (error: unknown): number =>
  error instanceof ApiError ? error.status : unavailableDependency(error) ? 503 : 500;

const afterRenewal =
  (slot: SendSlot, start: RedeliveryStarter): RedeliveryStarter =>
  async (row, delayMs) => {
    await slot.keepFor(RECOVER_CALL_LEASE_MS);
    return start(row, delayMs);
  };

const recoverSpacingMs = (deps: DeliveryDeps) => 1000 / (deps.recoverRatePerSecond ?? 10);

/** The recovery itself, without the membership check: the operator CLI calls it directly. */
export async function recoverAsOperator(
  deps: DeliveryDeps,
  projectId: string,
  window: { since: string; until?: string },
  /** How many have started so far, for a caller that must know it when the recovery stops part-way. */
  progress = { count: 0 },
  trail?: RecoveryTrail,
): Promise<{ count: number }> {
  if (!deps.redelivery) throw new RedeliveryUnavailableError();
  const since = new Date(window.since);
  const until = window.until === undefined ? undefined : new Date(window.until);
  const failed = await store.failedDeliveries(deps.db, projectId, since, until, MAX_RECOVER_BATCH);
  const spacingMs = recoverSpacingMs(deps);
  // One claim for the batch, with its row in the trail: a redelivery never starts without that row.
  const claimed = await deps.db.transaction(async (trx) => {
    const rows: store.DeliveryRow[] = [];
    for (const row of failed) {
      const claim = await store.claimRedelivery(trx, projectId, row.id);
      if (claim) rows.push(claim);
    }
    await trail?.claimed(trx, rows.length);
    return rows;
  });
  for (const [index, row] of claimed.entries()) {
    try {
      await deps.redelivery(row, Math.round(progress.count * spacingMs));
      progress.count += 1;
    } catch (error) {
      // One event past Temporal's retention does not stop the others; Temporal down (a 503) stops them all.
      // An event whose input in Temporal is not the logged one (refused and logged by the starter) stays failed too.
      const skipped = error instanceof EventNoLongerRetainedError || error instanceof EventNotTrustedError;
      await releaseClaims(deps.db, skipped ? [row] : claimed.slice(index), skipped ? undefined : trail, error);
      if (skipped) continue;
      if (progress.count > 0 && unavailableDependency(error) === 'Temporal')
        throw new RecoveryInterruptedError(progress.count);
      throw error;
    }
  }
  return { count: progress.count };
}

/**
 * Puts back claims whose redeliveries did not start, with the trail's `failed` row when the recovery stops; should that
 * row be what fails, the claims are put back without it (the caller gets the error that stopped the recovery).
 */
async function releaseClaims(db: Knex, rows: store.DeliveryRow[], trail: RecoveryTrail | undefined, error: unknown) {
  const release = (withRow: boolean) =>
    db.transaction(async (trx) => {
      for (const row of rows) await store.releaseRedelivery(trx, row);
      if (withRow) await trail?.stopped(trx, error);
    });
  try {
    await release(trail !== undefined);
  } catch {
    if (trail) await release(false);
  }
}

async function startOrRelease(
  deps: DeliveryDeps,
  start: RedeliveryStarter,
  claimed: store.DeliveryRow,
  startDelayMs: number,
  /** Written in the transaction that puts the claimed delivery back. */
  failed?: (trx: Knex.Transaction, error: unknown) => Promise<void>,
): Promise<string> {
  try {
    return await start(claimed, startDelayMs);
  } catch (error) {
    await deps.db.transaction(async (trx) => {
      await store.releaseRedelivery(trx, claimed);
      await failed?.(trx, error);
    });
    throw error;
  }
}

export async function getEndpointHealth(
  deps: DeliveryDeps,
  userId: string,
  projectId: string,
): Promise<EndpointHealthView> {
  await assertMember(deps.db, projectId, userId);
  deps.readLimiter?.(projectId);
  const [row, { breaker, clientCertificate, held, slowedUntil, rateLimit }] = await Promise.all([
    store.findEndpointHealth(deps.db, projectId),
    registrationHealth(deps.db, projectId),
  ]);
  if (!row)
    return {
      state: 'unknown',
      consecutiveFailures: 0,
      lastSuccessAt: null,
      lastFailureAt: null,
      lastError: null,
      breaker,
      clientCertificate,
      held,
      slowedUntil,
      rateLimit,
    };
  return {
    state: row.consecutiveFailures > 0 ? 'failing' : 'healthy',
    consecutiveFailures: row.consecutiveFailures,
    lastSuccessAt: iso(row.lastSuccessAt),
    lastFailureAt: iso(row.lastFailureAt),
    lastError: row.lastError,
    breaker,
    clientCertificate,
    held,
    slowedUntil,
    rateLimit,
  };
}

/** The breaker, the client certificate's expiry and the rate limit of the project's current registration. */
async function registrationHealth(db: Knex, projectId: string) {
  const registration = await store.findRegistration(db, projectId);
  const certificate = registration?.clientCertificate;
  const perSecond = registration?.rateLimitPerSecond ?? null;
  return {
    breaker: await breakerOf(db, registration),
    clientCertificate: certificate ? certificateExpiryView(certificate.notAfter) : null,
    held: registration ? heldView(registration) : null,
    slowedUntil: registration ? registrationView(registration).slowedUntil : null,
    rateLimit:
      registration && perSecond !== null
        ? { perSecond, waiting: await store.countRateWaiters(db, registration.id) }
        : null,
  };
}

/** Why the registration's deliveries are held, as its view says it, in words too. */
function heldView(registration: store.RegistrationRow): HeldView | null {
  const { pausedAt, pausedUntil, pauseReason } = registrationView(registration);
  if (pausedAt === null || pauseReason === null) return null;
  const summary =
    pauseReason === 'gone'
      ? `held: the receiver answered 410 Gone at ${pausedAt}; nothing is sent until a member resumes`
      : `held: paused at ${pausedAt} until ${pausedUntil ?? 'resumed'}`;
  return { reason: pauseReason, since: pausedAt, until: pausedUntil, summary };
}

/** Where the certificate stands, in words from CLIENT_CERTIFICATE_WARNING_DAYS before it expires. */
export function certificateExpiryView(notAfter: Date, now = Date.now()): CertificateExpiryView {
  const { state, daysLeft } = certificateExpiry(notAfter, now);
  const when = notAfter.toISOString();
  const warning =
    state === 'expired'
      ? `The client certificate expired at ${when}: receivers that require it refuse every delivery; upload a new one`
      : state === 'expiring'
        ? `The client certificate expires at ${when} (in ${daysLeft} days): upload its successor before then`
        : null;
  return { state, notAfter: when, daysLeft, warning };
}

/**
 * The breaker of the project's current registration; closed when there is none or it never failed. Read against this
 * process's clock (the worker's admissions use the database's): near the end of an open period the two may differ by
 * the clocks' skew, which a page showing the state can bear.
 */
async function breakerOf(db: Knex, registration: store.RegistrationRow | undefined): Promise<BreakerView> {
  const breaker = registration && (await store.findBreaker(db, registration.id));
  if (!breaker?.openUntil) return { state: 'closed', openUntil: null };
  if (breaker.openUntil.getTime() > Date.now()) return { state: 'open', openUntil: breaker.openUntil.toISOString() };
  return { state: 'half-open', openUntil: null };
}

import * as store from '../../db';
import { recordAudit } from '../http/audited-actions';
import { recheckPortalLink } from '../auth/authenticate';
import { InvalidRequestError } from '../http/errors';
import { assertMember, noWebhook, view, type RegistrationDeps, type RegistrationView } from './registrations';
import { compileBody } from '../http/validation';

/** PAUSE_MAX_HOURS' default: a weekend's receiver migration, with room. */
export const DEFAULT_PAUSE_MAX_HOURS = 72;
/** The schema's bound; the configured PAUSE_MAX_HOURS (at most this) is checked beside it. */
export const MAX_PAUSE_HOURS = 720;

export const pauseBodySchema = {
  type: 'object',
  properties: {
    hours: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_PAUSE_HOURS,
      description:
        'How long the pause may hold deliveries before it ends by itself, in hours: at most PAUSE_MAX_HOURS ' +
        '(72 by default), which is also the default.',
    },
  },
  additionalProperties: false,
} as const;

export interface PauseBody {
  hours?: number;
}

const validatePauseBody = compileBody<PauseBody>(pauseBodySchema);

export interface PauseDeps extends RegistrationDeps {
  /** PAUSE_MAX_HOURS. */
  pauseMaxHours?: number;
}

/**
 * Pauses the project's webhook: nothing is sent until a resume or the pause's end, and new and pending deliveries are
 * held (not attempted, not failed). A pause under way is left as it is; only a pause that starts is audited.
 */
export async function pauseWebhook(
  deps: PauseDeps,
  userId: string,
  projectId: string,
  body: unknown,
  actor: store.AuditActor,
): Promise<RegistrationView> {
  await assertMember(deps.db, projectId, userId);
  const maxHours = deps.pauseMaxHours ?? DEFAULT_PAUSE_MAX_HOURS;
  const { hours = maxHours } = validatePauseBody(body ?? {});
  if (hours > maxHours)
    throw new InvalidRequestError([{ pointer: '/hours', detail: `must be at most PAUSE_MAX_HOURS (${maxHours})` }]);
  await recheckPortalLink();
  return deps.db.transaction(async (trx) => {
    const paused = await store.pauseRegistration(trx, projectId, hours * 3_600_000, pausedBy(actor));
    if (!paused) throw noWebhook(projectId);
    // A pause that starts has an end; one under way is left as it is (a hold the receiver's 410 began has none).
    if (paused.started && paused.pausedUntil) {
      await recordAudit(trx, actor, {
        action: 'webhook.pause',
        projectId,
        registrationId: paused.registrationId,
        changes: { pausedUntil: paused.pausedUntil.toISOString() },
      });
      // The contacts hear of every pause, with its action: falls are held, and they should know by whom and how long.
      await store.queueNotice(trx, {
        projectId,
        condition: 'pause-started',
        facts: {
          pausedBy: whoActed(actor),
          pausedAt: paused.pausedAt.toISOString(),
          pausedUntil: paused.pausedUntil.toISOString(),
        },
      });
    }
    return view((await store.findRegistration(trx, projectId))!);
  });
}

/**
 * Resumes the project's webhook: the held deliveries go out, falls first and oldest first, at the breaker's resume
 * rate. Resuming a webhook that is not paused changes nothing (and is not audited).
 */
export async function resumeWebhook(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
  actor: store.AuditActor,
): Promise<RegistrationView> {
  await assertMember(deps.db, projectId, userId);
  await recheckPortalLink();
  return deps.db.transaction(async (trx) => {
    const resumed = await store.resumeRegistration(trx, projectId);
    if (!resumed) throw noWebhook(projectId);
    if (resumed.ended) {
      await recordAudit(trx, actor, {
        action: 'webhook.resume',
        projectId,
        registrationId: resumed.registrationId,
        changes: {
          pausedAt: resumed.ended.pausedAt.toISOString(),
          pausedUntil: resumed.ended.pausedUntil?.toISOString() ?? null,
          ...(resumed.ended.reason && { pauseReason: resumed.ended.reason }),
          heldDeliveries: resumed.held,
        },
      });
      await queuePauseEnded(trx, projectId, resumed.ended, resumed.held, whoActed(actor));
    }
    return view((await store.findRegistration(trx, projectId))!);
  });
}

/** Who started a pause, as the registration keeps it: a portal link's pause ends with the project's links. */
const pausedBy = (actor: store.AuditActor): store.PausedBy => ({
  kind: actor.kind === 'portal-link' ? 'portal-link' : 'member',
  ...(actor.subject !== undefined && { subject: actor.subject }),
  ...(actor.portalLinkId !== undefined && { portalLinkId: actor.portalLinkId }),
});

/** Who acted, in a notice's words: the member's subject, or a manage link and the member who made it; never a token. */
export const whoActed = (actor: store.AuditActor): string =>
  actor.kind === 'portal-link'
    ? `a manage link${actor.subject !== undefined ? ` (made by member ${actor.subject})` : ''}`
    : `member ${actor.subject ?? '(unknown)'}`;

/** Queues the contacts' notice of a pause that ended early, in the transaction that ends it. */
export async function queuePauseEnded(
  db: store.Db,
  projectId: string,
  ended: store.PauseState,
  heldDeliveries: number,
  endedBy: string,
): Promise<void> {
  await store.queueNotice(db, {
    projectId,
    condition: 'pause-ended',
    facts: {
      endedBy,
      pausedAt: ended.pausedAt.toISOString(),
      // A hold the receiver's 410 began has no end of its own: the notice names its reason instead.
      ...(ended.pausedUntil !== null && { pausedUntil: ended.pausedUntil.toISOString() }),
      ...(ended.reason && { pauseReason: ended.reason }),
      heldDeliveries,
    },
  });
}

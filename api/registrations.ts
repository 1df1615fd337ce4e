import type { Knex } from 'knex';
import * as store from '../db';
import type { SecretBox } from '../common/secrets';
import type { SendTestEvent } from './test-event';
import { recheckPortalLink } from './auth';
import {
  NotMemberError,
  ProjectNotFoundError,
  RegistrationExistsError,
  RegistrationNotFoundError,
  TestDeliveryFailedError,
} from './errors';
import {
  DEFAULT_OVERLAP_SECONDS,
  type RegisterWebhookBody,
  type RotateSecretBody,
  type UpdateWebhookBody,
} from './schemas';

export interface RegistrationDeps {
  db: Knex;
  secretBox: SecretBox;
  sendTestEvent: SendTestEvent;
}

/** A registration as the API shows it; the signing secret only appears in the register response. */
export interface RegistrationView {
  _id: string;
  projectId: string;
  url: string;
  types: string[];
  /** The names of the custom headers sent with every delivery; their values are never shown. */
  headerNames: string[];
  createdAt: string;
  updatedAt: string;
}

/** A rotation's answer: the new secret (shown once) and when the replaced one stops signing deliveries. */
export interface RotatedSecretView {
  secret: string;
  previousSecretExpiresAt: string;
}

export interface TestDeliveryView {
  delivered: true;
  statusCode: number;
  durationMs: number;
  workflowId: string;
}

const view = (row: store.RegistrationRow): RegistrationView => ({
  _id: row.id,
  projectId: row.projectId,
  url: row.url,
  types: row.types,
  headerNames: row.customHeaderNames,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});

const noWebhook = (projectId: string) =>
  new RegistrationNotFoundError(`No webhook is registered for project ${projectId}`);

/** The project exists (else 404) and the user is one of its members (else 403), in that order. */
export async function assertMember(db: Knex, projectId: string, userId: string): Promise<void> {
  const access = await store.projectAccess(db, projectId, userId);
  if (!access.projectExists) throw new ProjectNotFoundError(projectId);
  if (!access.isMember) throw new NotMemberError();
}

export async function registerWebhook(
  deps: RegistrationDeps,
  userId: string,
  body: RegisterWebhookBody,
): Promise<RegistrationView & { secret: string }> {
  await assertMember(deps.db, body.projectId, userId);
  const created = await store.createRegistration(deps.db, deps.secretBox, {
    projectId: body.projectId,
    url: body.url,
    types: body.types,
    ...(body.headers && { headers: body.headers }),
  });
  // The unique constraint decides between concurrent registrations.
  if (!created) throw new RegistrationExistsError();
  return { ...view(created.row), secret: created.secret };
}

export async function updateWebhook(
  deps: RegistrationDeps,
  userId: string,
  body: UpdateWebhookBody,
): Promise<RegistrationView> {
  await assertMember(deps.db, body.projectId, userId);
  await recheckPortalLink();
  const changes = { ...(body.url !== undefined && { url: body.url }), ...(body.types && { types: body.types }) };
  const headers = body.headers && { secretBox: deps.secretBox, values: body.headers };
  const row = await store.updateRegistration(deps.db, body.projectId, changes, headers);
  if (!row) throw new RegistrationNotFoundError('Must register webhook before updating it');
  return view(row);
}

export async function getWebhook(deps: RegistrationDeps, userId: string, projectId: string): Promise<RegistrationView> {
  await assertMember(deps.db, projectId, userId);
  const row = await store.findRegistration(deps.db, projectId);
  if (!row) throw noWebhook(projectId);
  return view(row);
}

export async function deleteWebhook(deps: RegistrationDeps, userId: string, projectId: string): Promise<void> {
  await assertMember(deps.db, projectId, userId);
  if (!(await store.deleteRegistration(deps.db, projectId))) throw noWebhook(projectId);
}

/** Replaces the project's signing secret; the replaced one keeps signing beside it for the overlap. */
export async function rotateWebhookSecret(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
  body: RotateSecretBody,
): Promise<RotatedSecretView> {
  await assertMember(deps.db, projectId, userId);
  const overlapSeconds = body.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS;
  await recheckPortalLink();
  const rotated = await store.rotateRegistrationSecret(deps.db, deps.secretBox, projectId, overlapSeconds);
  if (!rotated) throw noWebhook(projectId);
  return { secret: rotated.secret, previousSecretExpiresAt: rotated.previousSecretExpiresAt.toISOString() };
}

/** Sends one TEST event through the delivery pipeline; a receiver that does not acknowledge it is a 502. */
export async function testWebhook(
  deps: RegistrationDeps,
  userId: string,
  projectId: string,
): Promise<TestDeliveryView> {
  await assertMember(deps.db, projectId, userId);
  if (!(await store.findRegistration(deps.db, projectId))) throw noWebhook(projectId);
  const outcome = await deps.sendTestEvent(projectId);
  if (!outcome.delivered) {
    throw new TestDeliveryFailedError(`The receiver did not acknowledge the TEST event: ${outcome.reason}`, {
      workflowId: outcome.workflowId,
      ...(outcome.category !== undefined && { category: outcome.category }),
      ...(outcome.statusCode !== undefined && { statusCode: outcome.statusCode }),
    });
  }
  const { delivered, statusCode, durationMs, workflowId } = outcome;
  return { delivered, statusCode, durationMs, workflowId };
}

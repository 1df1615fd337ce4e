// The steps of a rotation's overlap that the secret's (rotation.test.ts) and the Ed25519 key pair's
// (asymmetric-signatures.test.ts) suites share: a project of alice's, one delivery through a real worker, and the
// overlap's end moved into the past as the clock would move it.
import { randomUUID } from 'node:crypto';
import { addMember, addProject } from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { fallEvent, newProjectId } from '../support/deliveries';
import type { DeliveryFixture } from '../support/delivery-fixture';

/** A new project with alice as its member, and no webhook yet. */
export async function aliceProject(fx: DeliveryFixture): Promise<string> {
  const projectId = newProjectId();
  await addProject(fx.database.db, projectId);
  await addMember(fx.database.db, projectId, 'alice');
  return projectId;
}

/** One FALL_DETECTION delivered through a real worker: the workflow's result. */
export const deliverFall = (fx: DeliveryFixture, projectId: string) =>
  fx.runWorker(async (taskQueue) => {
    const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
      args: [fallEvent(projectId)],
      taskQueue,
      workflowId: `webhook-event-${randomUUID()}`,
    });
    return handle.result();
  });

/** The overlap's end moved a second into the past, on the database's clock: the replaced secret or key pair expired. */
export const endOverlap = (
  fx: DeliveryFixture,
  projectId: string,
  column: 'previous_secret_expires_at' | 'previous_signing_key_expires_at',
) =>
  fx.database
    .db('webhook_registrations')
    .where({ project_id: projectId })
    .update({ [column]: fx.database.db.raw("now() - interval '1 second'") });

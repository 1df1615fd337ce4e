import { createHash } from 'node:crypto';
import type { Priority } from '@temporalio/common';
import { priorityKeyOf, type WebhookType } from './contract';

/** Temporal limits fairness keys to 64 bytes; project ids may be up to 200 characters. */
const MAX_FAIRNESS_KEY_BYTES = 64;

/**
 * The task-queue fairness key of a project: its id, or the SHA-256 of a longer one (64 hex digits), so every project
 * gets its own share of dispatch and a backlog of one cannot hold back the others.
 */
export function fairnessKeyOf(projectId: string): string {
  if (Buffer.byteLength(projectId, 'utf8') <= MAX_FAIRNESS_KEY_BYTES) return projectId;
  return createHash('sha256').update(projectId, 'utf8').digest('hex');
}

/** The priority a delivery workflow is started with; its activities inherit the fairness key. */
export const deliveryPriority = (projectId: string, webhookType: WebhookType): Priority => ({
  priorityKey: priorityKeyOf(webhookType),
  fairnessKey: fairnessKeyOf(projectId),
});

// What an operator's decode disclosed, and to whom it is accounted: each project whose events were opened sees a row
// in its own trail naming the workflows (HIPAA's accounting of disclosures: who read, when, what).
import { METADATA_ENCODING_KEY, type Payload } from '@temporalio/common';
import { isSafeId } from '../../common/contract/ids';
import * as store from '../../db';

/** Whose events one decode opened: per project, its workflows and how many of the payloads were its. */
export interface Disclosures {
  projects: Map<string, { workflowIds: Set<string>; payloads: number; keyIds: Set<string> }>;
  /** Workflows named by payloads that name no project (a resume signal): their project is looked up. */
  unplaced: Map<string, { payloads: number; keyIds: Set<string> }>;
}

const field = (value: unknown, name: string): unknown =>
  value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[name] : undefined;

/** The JSON a decoded payload holds, when it holds JSON; anything else names nobody. */
function jsonOf(payload: Payload): unknown {
  const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
  if (!encoding || Buffer.from(encoding).toString() !== 'json/plain') return undefined;
  try {
    return JSON.parse(Buffer.from(payload.data ?? new Uint8Array()).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Reads the project and the workflow each opened payload was sealed for: an event input names both (projectId,
 * workflowId), an attempt input its project and the run it is bound to (boundTo), a resume signal its workflow.
 * Only ids in the safe alphabet count; a payload that was not sealed (`sealed` false) opened nothing.
 */
export function disclosuresOf(decoded: Payload[], keyIdOf: (index: number) => string | undefined): Disclosures {
  const result: Disclosures = { projects: new Map(), unplaced: new Map() };
  decoded.forEach((payload, index) => {
    const keyId = keyIdOf(index);
    if (keyId === undefined) return;
    const value = jsonOf(payload);
    const projectId = field(value, 'projectId');
    const workflowId = field(value, 'workflowId') ?? field(field(value, 'boundTo'), 'workflowId');
    const workflow = isSafeId(workflowId) ? workflowId : undefined;
    if (isSafeId(projectId)) {
      const entry = result.projects.get(projectId) ?? { workflowIds: new Set(), payloads: 0, keyIds: new Set() };
      if (workflow !== undefined) entry.workflowIds.add(workflow);
      entry.payloads += 1;
      entry.keyIds.add(keyId);
      result.projects.set(projectId, entry);
    } else if (workflow !== undefined) {
      const entry = result.unplaced.get(workflow) ?? { payloads: 0, keyIds: new Set() };
      entry.payloads += 1;
      entry.keyIds.add(keyId);
      result.unplaced.set(workflow, entry);
    }
  });
  return result;
}

/** Places payloads that named only their workflow under the project the delivery log holds for it. */
export async function placeByDeliveryLog(db: store.Db, disclosures: Disclosures): Promise<void> {
  if (disclosures.unplaced.size === 0) return;
  const projects = await store.projectsOfWorkflows(db, [...disclosures.unplaced.keys()]);
  for (const [workflowId, projectId] of projects) {
    const opened = disclosures.unplaced.get(workflowId)!;
    const entry = disclosures.projects.get(projectId) ?? { workflowIds: new Set(), payloads: 0, keyIds: new Set() };
    entry.workflowIds.add(workflowId);
    entry.payloads += opened.payloads;
    for (const keyId of opened.keyIds) entry.keyIds.add(keyId);
    disclosures.projects.set(projectId, entry);
  }
}

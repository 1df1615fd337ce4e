// Inputs sealed for the workflow run they were made for. Our payload codec encrypts and authenticates every input,
// so nobody without the key can change one; but a copy of a whole encrypted input (read from a history) could be
// started again under a new workflow id, scheduled by a foreign workflow, or sent as another delivery's signal. The
// workflow id (or run) inside the sealed input tells the copy from the original. Sandbox-safe: the workflow and the
// activities apply the same rules.
import type { ResumeDeliverySignal } from '../deferral';
import type { WorkflowRun } from '../delivery';

/** How an input stands against the run that received it. */
export type Binding = 'bound' | 'other' | 'unbound';

/** An event input: bound to the workflow id it was started under, sealed for another, or for none (older inputs). */
export function eventBinding(input: { workflowId?: unknown }, workflowId: string): Binding {
  if (input.workflowId === undefined) return 'unbound';
  return input.workflowId === workflowId ? 'bound' : 'other';
}

/** An attempt input: bound to the run that scheduled it, or to another, or to none (inputs from before it). */
export function attemptBinding(boundTo: WorkflowRun | undefined, run: WorkflowRun): Binding {
  if (boundTo === undefined) return 'unbound';
  return boundTo.workflowId === run.workflowId && boundTo.runId === run.runId ? 'bound' : 'other';
}

/** A resume signal: its wait token when sent to this workflow, else how it stands (a bare number is unbound). */
export function resumeSignalBinding(
  signalled: ResumeDeliverySignal | number,
  workflowId: string,
): { binding: Binding; waitToken?: number } {
  if (typeof signalled === 'number') return { binding: 'unbound', waitToken: signalled };
  if (signalled?.workflowId !== workflowId) return { binding: 'other' };
  return { binding: 'bound', waitToken: signalled.waitToken };
}

/** The refusal's words: what was refused and why, never the input's content. */
export const bindingRefusal = (what: string, binding: Exclude<Binding, 'bound'>): string =>
  binding === 'other'
    ? `${what} refused: its input was sealed for another workflow (a copy of another delivery's input); nothing sent`
    : `${what} refused: its input is not sealed for its workflow (emit it with this service's client, which seals ` +
      'the workflow id in the encrypted input); nothing sent';

/** Details (first element) of an InputNotBound refusal by an activity. */
export interface InputRefusalDetails {
  binding: Exclude<Binding, 'bound'>;
  /** Attempts of the delivery made before the refused one (none was made by it). */
  attempt: number;
}

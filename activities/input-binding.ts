// The activities' side of sealed inputs (common/contract/sealing/binding.ts): the lookup refuses an event input sealed for
// another workflow id, the attempt one sealed for another run, so a copy scheduled by someone else's workflow sends
// nothing. Inputs sealed for none (from before sealing) are refused where the worker requires it (production).
import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  FailureType,
  attemptBinding,
  bindingRefusal,
  eventBinding,
  type Binding,
  type DeliverWebhookEventInput,
  type DeliveryAttemptInput,
  type InputRefusalDetails,
  type WorkflowRun,
} from '../common/contract';
import type { Logger } from '../common/telemetry/logger';
import { inputRefusedTotal } from '../common/telemetry/delivery-metrics';

/** The run of the workflow that scheduled the running activity. */
export function currentRun(): WorkflowRun {
  const { workflowExecution, activityId } = Context.current().info;
  return { workflowId: workflowExecution?.workflowId ?? activityId, runId: workflowExecution?.runId ?? '' };
}

/** Throws the refusal when the event input is not sealed for this workflow id (or for none, when required). */
export function assertEventBound(input: DeliverWebhookEventInput, requireBound: boolean, logger?: Logger): void {
  const binding = eventBinding(input, currentRun().workflowId);
  if (binding === 'bound' || (binding === 'unbound' && !requireBound)) return;
  throw refusal('event', 'Event', binding, 0, logger);
}

/** Throws the refusal when the attempt input is not sealed for this run (or for none, when required). */
export function assertAttemptBound(input: DeliveryAttemptInput, requireBound: boolean, logger: Logger): void {
  const binding = attemptBinding(input.boundTo, currentRun());
  if (binding === 'bound' || (binding === 'unbound' && !requireBound)) return;
  // The attempts this activity made before the refused one: its own retries reached the receiver.
  const attempt = (input.earlierAttempts ?? 0) + Context.current().info.attempt - 1;
  throw refusal('attempt', 'Attempt', binding, attempt, logger);
}

function refusal(
  what: 'event' | 'attempt',
  label: string,
  binding: Exclude<Binding, 'bound'>,
  attempt: number,
  logger: Logger | undefined,
): ApplicationFailure {
  const { activityType, workflowType, workflowExecution } = Context.current().info;
  logger?.warn(
    { activityType, workflowType, workflowId: workflowExecution?.workflowId, binding },
    `${what} input not sealed for its workflow: refused, nothing sent`,
  );
  inputRefusedTotal.inc({ what, binding });
  Context.current().metricMeter.createCounter('webhook_input_refused', 'payloads').add(1, { what, binding });
  const details: InputRefusalDetails = { binding, attempt };
  return ApplicationFailure.create({
    type: FailureType.InputNotBound,
    message: bindingRefusal(label, binding),
    nonRetryable: true,
    details: [details],
  });
}

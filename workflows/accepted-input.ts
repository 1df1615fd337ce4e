// What a delivery may run on: its event and resume signals as this workflow accepts them. A refusal is recorded with a
// patch marker, so a history replays as it ran whatever the worker's settings say now.
import { ApplicationFailure, log, metricMeter, patched, workflowInfo } from '@temporalio/workflow';
import {
  FailureType,
  bindingRefusal,
  eventBinding,
  resumeSignalBinding,
  unencryptedPayloadOf,
  type DeliverWebhookEventInput,
  type ResumeDeliverySignal,
  type UnencryptedPayload,
} from '../common/contract';

/** Recorded when a refusal is decided: a history replays as it ran, whatever ALLOW_UNENCRYPTED_EVENTS says now. */
const UNENCRYPTED_EVENT_REFUSED = 'unencrypted-event-refused';
const UNENCRYPTED_SIGNAL_IGNORED = 'unencrypted-signal-ignored';

/**
 * Whether a payload that arrived unencrypted (the worker's codec marked it) is refused. Decided once, live: a refusal
 * records a patch marker, an acceptance records nothing, and a replay follows the history. So a delivery accepted
 * during the migration window still replays after it closes, and no event costs a command unless it is refused.
 */
function refused(marker: UnencryptedPayload, patchId: string): boolean {
  if (marker.allowed) return workflowInfo().unsafe.isReplaying && patched(patchId);
  return patched(patchId);
}

/**
 * The event, or the refusal of one a client without our payload key started (production, no migration window):
 * nothing is looked up or sent, and the workflow fails for good.
 */
export function acceptedInput(event: DeliverWebhookEventInput): DeliverWebhookEventInput {
  const marker = unencryptedPayloadOf(event);
  if (!marker) return boundInput(event);
  if (!refused(marker, UNENCRYPTED_EVENT_REFUSED)) return boundInput(marker.value as DeliverWebhookEventInput);
  log.warn('Unencrypted event refused: its input was not encrypted with PAYLOAD_ENCRYPTION_KEYS; nothing sent');
  metricMeter.createCounter('webhook_unencrypted_refused', 'payloads').add(1, { what: 'event' });
  throw ApplicationFailure.create({
    type: FailureType.UnencryptedEventRefused,
    message:
      'Event refused: its input is not encrypted with the payload key (PAYLOAD_ENCRYPTION_KEYS); emit it with ' +
      "the service's codec (connectTemporalClient), or open a migration window with ALLOW_UNENCRYPTED_EVENTS=true",
    nonRetryable: true,
  });
}

/**
 * The event, or the refusal of an input sealed for another workflow id: a copy of another delivery's input (read
 * from its history) started again under a new id. Nothing is looked up or sent. No history has a mismatch to replay
 * (inputs were sealed after it shipped); one sealed for none is for the lookup to judge, which knows the worker's
 * settings.
 */
function boundInput(event: DeliverWebhookEventInput): DeliverWebhookEventInput {
  if (eventBinding(event, workflowInfo().workflowId) !== 'other') return event;
  log.warn('Event refused: its input was sealed for another workflow id; nothing sent', {
    sealedFor: event.workflowId,
  });
  metricMeter.createCounter('webhook_input_refused', 'payloads').add(1, { what: 'event', binding: 'other' });
  throw ApplicationFailure.create({
    type: FailureType.InputNotBound,
    message: bindingRefusal('Event', 'other'),
    nonRetryable: true,
  });
}

/** Recorded when a bare wait token (a signal from before signals named their workflow) is ignored. */
const UNBOUND_SIGNAL_IGNORED = 'unbound-signal-ignored';

/**
 * A resumeDelivery signal's wait token, as sent to this workflow. Ignored: one sent without our payload key (in
 * production), one naming another workflow (copied from another delivery's history), and a bare number (histories
 * from before it replay as they ran). An ignored signal only means the wait runs to its timer.
 */
export function acceptedSignal(signalled: ResumeDeliverySignal | number): number | undefined {
  const marker = unencryptedPayloadOf(signalled);
  if (marker && refused(marker, UNENCRYPTED_SIGNAL_IGNORED)) {
    log.warn('Unencrypted resumeDelivery signal ignored: not encrypted with PAYLOAD_ENCRYPTION_KEYS');
    metricMeter.createCounter('webhook_unencrypted_refused', 'payloads').add(1, { what: 'signal' });
    return undefined;
  }
  const value = marker ? (marker.value as ResumeDeliverySignal | number) : signalled;
  const { binding, waitToken } = resumeSignalBinding(value, workflowInfo().workflowId);
  if (binding === 'bound' || (binding === 'unbound' && !patched(UNBOUND_SIGNAL_IGNORED))) return waitToken;
  log.warn('resumeDelivery signal ignored: not sealed for this workflow', { binding });
  metricMeter.createCounter('webhook_input_refused', 'payloads').add(1, { what: 'signal', binding });
  return undefined;
}

import { ApplicationFailure } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { FailureType, unencryptedPayloadOf } from '../common/contract';
import type { Logger } from '../common/telemetry/logger';
import { unencryptedRefusedTotal } from '../common/telemetry/delivery-metrics';

/**
 * The activities' side of the refusal: an activity task whose input was not encrypted with our key (a workflow of
 * someone else's worker scheduling our activities on our task queue) fails for good in production, before the
 * activity runs; where unencrypted payloads are allowed, its arguments are unwrapped. Our own workflows' activity
 * inputs are always encrypted, so a normal attempt only pays for one property check per argument.
 */
export function unencryptedActivityInputGuard(logger: Logger): ActivityInterceptorsFactory {
  return (context) => ({
    inbound: {
      execute(input, next) {
        const markers = input.args.map(unencryptedPayloadOf);
        if (markers.every((marker) => marker === undefined)) return next(input);
        if (markers.some((marker) => marker?.allowed === false)) {
          const { activityType, workflowExecution, workflowType } = context.info;
          logger.warn(
            { activityType, workflowType, workflowId: workflowExecution?.workflowId },
            'activity input not encrypted with PAYLOAD_ENCRYPTION_KEYS: refused, nothing sent',
          );
          unencryptedRefusedTotal.inc({ what: 'activity' });
          context.metricMeter.createCounter('webhook_unencrypted_refused', 'payloads').add(1, { what: 'activity' });
          throw ApplicationFailure.create({
            type: FailureType.UnencryptedEventRefused,
            message: `Activity ${activityType} refused: its input is not encrypted with the payload key (PAYLOAD_ENCRYPTION_KEYS)`,
            nonRetryable: true,
          });
        }
        return next({ ...input, args: input.args.map((arg, i) => (markers[i] ? markers[i].value : arg)) });
      },
    },
  });
}

import { ApplicationFailure } from '@temporalio/activity';
import { FailureType } from '../../common/contract';
import { openCustomHeaders } from '../../db';
import type { DeliveryOption } from './option';

/** The registration's own headers (common/registration/custom-headers.ts), opened; retryable when they cannot be. Never logged. */
export const customHeaders: DeliveryOption = {
  name: 'custom-headers',
  setUp:
    ({ secretBox }) =>
    (registration, { log }) => {
      if (registration.customHeadersSealed === null) return undefined;
      try {
        return { headers: Object.fromEntries(openCustomHeaders(secretBox, registration)) };
      } catch {
        log.error('cannot open the webhook custom headers: is WEBHOOK_SECRET_KEY the one they were sealed with?');
        throw ApplicationFailure.create({
          type: FailureType.SecretUnavailable,
          message: 'The webhook custom headers could not be opened with this worker’s WEBHOOK_SECRET_KEY',
        });
      }
    },
};

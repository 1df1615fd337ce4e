import { ApplicationFailure } from '@temporalio/activity';
import { handshakeRefusal } from '../../common/registration/client-certificate';
import { FailureType } from '../../common/contract';
import { openClientKey } from '../../db';
import type { DeliveryOption } from './option';

/**
 * The registration's client certificate for receivers that require mutual TLS; its key is opened only when a new pool
 * needs it. A handshake refused over the certificate (none uploaded, expired, refused) is named as such.
 */
export const clientCertificate: DeliveryOption = {
  name: 'client-certificate',
  setUp:
    ({ secretBox }) =>
    (registration, { log }) => {
      const stored = registration.clientCertificate ?? undefined;
      const unreachable = (errorCode: string) => handshakeRefusal(errorCode, stored);
      if (!stored) return { unreachable };
      const privateKey = () => {
        try {
          return openClientKey(secretBox, { ...registration, clientCertificate: stored });
        } catch {
          log.error('cannot open the client certificate key: is WEBHOOK_SECRET_KEY the one it was sealed with?');
          throw ApplicationFailure.create({
            type: FailureType.SecretUnavailable,
            message: 'The webhook client certificate key could not be opened with this worker’s WEBHOOK_SECRET_KEY',
          });
        }
      };
      return {
        clientCertificate: { id: `${registration.id}:${stored.fingerprint}`, certificate: stored.pem, privateKey },
        unreachable,
      };
    },
};

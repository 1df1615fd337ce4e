// What a delivery carries beyond its signed body: each option one file here, listed once in DELIVERY_OPTIONS. The
// attempt calls prepareDelivery and knows none of them (docs/development.md, "Delivery options").
import type { RegistrationRow } from '../../db';
import type { ReceiverConnection } from '../http/client';
import { clientCertificate } from './client-certificate';
import { customHeaders } from './custom-headers';
import { egressRoute } from './egress-route';
import type { AttemptTarget, DeliveryOption, DeliveryOptionSetup } from './option';

export type { AttemptTarget, DeliveryContribution, DeliveryOption, DeliveryOptionSetup, PrepareOption } from './option';

/** Every option a delivery carries, applied in this order: a later one's header, certificate or route wins. */
export const DELIVERY_OPTIONS: readonly DeliveryOption[] = [customHeaders, clientCertificate, egressRoute];

/** What one attempt sends beside its signed body. */
export interface PreparedDelivery {
  /** Laid down before the signed headers, which win over any of the same name. */
  headers: Record<string, string>;
  connection: ReceiverConnection;
  /** A failure to reach the receiver in the first words an option has for it, or undefined. */
  unreachable(errorCode: string): string | undefined;
}

/** Sets the options up once per worker; the function returned prepares each attempt from its registration. */
export function createPrepareDelivery(
  setup: DeliveryOptionSetup,
  options: readonly DeliveryOption[] = DELIVERY_OPTIONS,
) {
  const prepares = options.map((option) => option.setUp(setup));
  return async function prepareDelivery(
    registration: RegistrationRow,
    target: AttemptTarget,
  ): Promise<PreparedDelivery> {
    const headers: Record<string, string> = {};
    const connection: ReceiverConnection = {};
    const explainers: ((errorCode: string) => string | undefined)[] = [];
    for (const prepare of prepares) {
      const prepared = prepare(registration, target);
      const contribution = prepared instanceof Promise ? await prepared : prepared;
      if (!contribution) continue;
      if (contribution.headers) Object.assign(headers, contribution.headers);
      if (contribution.clientCertificate) connection.clientCertificate = contribution.clientCertificate;
      if (contribution.route) connection.route = contribution.route;
      if (contribution.unreachable) explainers.push(contribution.unreachable);
    }
    return {
      headers,
      connection,
      unreachable(errorCode) {
        for (const explain of explainers) {
          const message = explain(errorCode);
          if (message !== undefined) return message;
        }
        return undefined;
      },
    };
  };
}

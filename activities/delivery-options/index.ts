// What a delivery carries beyond its signed body: each option one file here, listed once in DELIVERY_OPTIONS. The
// attempt calls prepareDelivery and knows none of them (docs/development.md, "Delivery options").
import type { RegistrationRow } from '../../db';
import type { ReceiverConnection, ReceiverResponse } from '../http/client';
import { clientCertificate } from './client-certificate';
import { customHeaders } from './custom-headers';
import { egressRoute } from './egress-route';
import { oauthClientCredentials } from './oauth-client-credentials';
import type { AttemptTarget, DeliveryOption, DeliveryOptionSetup, RequestAuthorization } from './option';

export type {
  AttemptTarget,
  DeliveryContribution,
  DeliveryOption,
  DeliveryOptionSetup,
  PrepareOption,
  RequestAuthorization,
} from './option';

/** Every option a delivery carries, applied in this order: a later one's header, certificate or route wins. */
export const DELIVERY_OPTIONS: readonly DeliveryOption[] = [
  customHeaders,
  clientCertificate,
  oauthClientCredentials,
  egressRoute,
];

/** What one attempt sends beside its signed body. */
export interface PreparedDelivery {
  /** Laid down before the signed headers, which win over any of the same name. */
  headers: Record<string, string>;
  connection: ReceiverConnection;
  /** A failure to reach the receiver in the first words an option has for it, or undefined. */
  unreachable(errorCode: string): string | undefined;
  /**
   * Makes the request through `post`, given the options' headers with each authorization's laid over them (a name
   * once, whatever its case); once more, with authorizations obtained afresh, when one asks for it on the answer.
   */
  send(post: (headers: Record<string, string>) => Promise<ReceiverResponse>): Promise<ReceiverResponse>;
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
    const authorizations: RequestAuthorization[] = [];
    for (const prepare of prepares) {
      const prepared = prepare(registration, target);
      const contribution = prepared instanceof Promise ? await prepared : prepared;
      if (!contribution) continue;
      if (contribution.headers) Object.assign(headers, contribution.headers);
      if (contribution.clientCertificate) connection.clientCertificate = contribution.clientCertificate;
      if (contribution.route) connection.route = contribution.route;
      if (contribution.unreachable) explainers.push(contribution.unreachable);
      if (contribution.authorization) authorizations.push(contribution.authorization);
    }
    const authorized = async () => {
      let sent = headers;
      for (const authorization of authorizations) sent = overlay(sent, await authorization.headers());
      return sent;
    };
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
      async send(post) {
        const response = await post(await authorized());
        // Every authorization hears the answer (each drops what it gave); one more request if any asks for it.
        const again = authorizations.map((authorization) => authorization.refresh(response.statusCode));
        return again.includes(true) ? post(await authorized()) : response;
      },
    };
  };
}

/** `base` with `over` laid on it: a header named in `over`, in any case, replaces base's. */
function overlay(base: Record<string, string>, over: Readonly<Record<string, string>>): Record<string, string> {
  const names = new Set(Object.keys(over).map((name) => name.toLowerCase()));
  const kept = Object.entries(base).filter(([name]) => !names.has(name.toLowerCase()));
  return { ...Object.fromEntries(kept), ...over };
}

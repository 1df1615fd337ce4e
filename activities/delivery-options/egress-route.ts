import { egressProxy, egressRouteTo } from '../http/client';
import type { DeliveryOption } from './option';

/** The worker's egress proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY): the route to the receiver's URL. */
export const egressRoute: DeliveryOption = {
  name: 'egress-route',
  setUp: ({ config }) => {
    // NO_PROXY is parsed once per worker, not per attempt.
    const routeTo = egressRouteTo(egressProxy(config));
    return (_registration, { url }) => ({ route: routeTo(url) });
  },
};

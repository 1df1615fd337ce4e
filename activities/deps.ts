import type { Config, ISOLATION_DEFAULTS } from '../common/config';
import type { Logger } from '../common/telemetry/logger';
import type { SecretBox } from '../common/crypto/secrets';
import type { Db } from '../db';
import type { AlertOptions } from './alerts';
import type { DeliveryOption } from './delivery-options/option';
import type { WebhookHttpClient } from './http/client';
import type { Notify } from './notices';

export type ActivityConfig = Pick<
  Config,
  | 'WEBHOOK_TIMEOUT_MS'
  | 'ALLOW_PRIVATE_WEBHOOK_URLS'
  | 'DELIVERY_INITIAL_INTERVAL_MS'
  | 'DELIVERY_BACKOFF_COEFFICIENT'
  | 'DELIVERY_MAX_INTERVAL_MS'
  | 'DELIVERY_GIVE_UP_AFTER_MS'
> &
  // Optional so a bare test config delivers to http://127.0.0.1 (production sets NODE_ENV: https only), and
  // activities built without the isolation settings (tests, bench) get the defaults of common/config.
  Partial<
    Pick<
      Config,
      | 'NODE_ENV'
      | 'ALLOW_HTTP_WEBHOOK_URLS'
      | 'DELIVERY_FIRST_ATTEMPT_LOCAL'
      | 'HTTPS_PROXY'
      | 'HTTP_PROXY'
      | 'NO_PROXY'
      | keyof typeof ISOLATION_DEFAULTS
    >
  >;

/** What the activities need from the worker; tests pass their own. */
export interface ActivityDeps {
  db: Db;
  secretBox: SecretBox;
  logger: Logger;
  config: ActivityConfig;
  /** Shared keep-alive client; whoever creates the activities creates and closes it. */
  http: WebhookHttpClient;
  /** Whether the namespace has the ProjectId/WebhookType search attributes (default true). */
  searchAttributes?: boolean;
  /**
   * Refuse event and attempt inputs sealed for no workflow (from clients before sealing): production, outside the
   * ALLOW_UNENCRYPTED_EVENTS migration window. Inputs sealed for another workflow are refused always. Default false.
   */
  requireBoundInputs?: boolean;
  /** Operator alerts (ALERT_*): a log line always, a signed POST when a webhook is set; 15 min by default. */
  alerts?: AlertOptions;
  /** Tells a project's own contacts (breaker open, recovered, given up); none told without it. */
  notify?: Notify;
  /** What deliveries carry beyond the signed body: DELIVERY_OPTIONS unless a test adds its own. */
  deliveryOptions?: readonly DeliveryOption[];
  /**
   * PERSON_HASH_KEY: the delivery log keeps each event's person as the keyed hash of its userUUID, which an erasure
   * finds the person's deliveries by. Without it (tests, bench) no row carries one.
   */
  personHashKey?: Buffer;
}

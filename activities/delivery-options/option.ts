import type { Logger } from '../../common/telemetry/logger';
import type { SecretBox } from '../../common/crypto/secrets';
import type { RegistrationRow } from '../../db';
import type { Config } from '../../common/config';
import type { ClientCertificate, EgressRoute, WebhookHttpClient } from '../http/client';

/** What the worker gives each option once, when its activities are made. */
export interface DeliveryOptionSetup {
  /** The worker's settings an option may read (the activities' config is one). */
  config: Partial<
    Pick<
      Config,
      'HTTPS_PROXY' | 'HTTP_PROXY' | 'NO_PROXY' | 'WEBHOOK_TIMEOUT_MS' | 'NODE_ENV' | 'ALLOW_HTTP_WEBHOOK_URLS'
    >
  >;
  secretBox: SecretBox;
  /** The worker's HTTP client (SSRF guard, egress proxy), for an option that must ask another server (a token). */
  http: WebhookHttpClient;
}

/** The attempt an option prepares: the receiver's URL, already checked against the URL policy, and its log. */
export interface AttemptTarget {
  url: URL;
  log: Logger;
  /** The delivery's attempt number, for the details of a failure the option throws. */
  attempt: number;
  /** When the attempt's activity times out (this process's clock): a request the option makes ends before. */
  deadlineMs?: number;
}

/**
 * Headers obtained for each request rather than once per attempt (a bearer token from a token endpoint), inside the
 * endpoint guard: the breaker has admitted the attempt, and a failure to obtain them, thrown as an ApplicationFailure,
 * is the attempt's failure (in the delivery log, counted by the breaker when it is the endpoint's).
 */
export interface RequestAuthorization {
  /** The headers for the next request: cached, or fetched now. */
  headers(): Promise<Readonly<Record<string, string>>>;
  /**
   * The receiver answered `statusCode` to a request carrying them: true when fresh ones are worth one more request
   * within the same attempt (a 401 to a token revoked or expired early; the option drops the one it gave). Asked once
   * per attempt: the second answer stands.
   */
  refresh(statusCode: number): boolean;
}

/** What one option adds to an attempt's request; each part optional. */
export interface DeliveryContribution {
  /** Sent beside the signed headers, which win over any of the same name. */
  headers?: Readonly<Record<string, string>>;
  /** TLS material the connector presents to the receiver (one pool of connections per pair, kept across attempts). */
  clientCertificate?: ClientCertificate;
  /** Direct, or through an egress proxy. */
  route?: EgressRoute;
  /** A failure to reach the receiver said in this option's terms (the message members and the breaker show). */
  unreachable?: (errorCode: string) => string | undefined;
  /** Headers obtained per request, with a second chance on the receiver's answer. */
  authorization?: RequestAuthorization;
}

/**
 * Something a delivery carries beyond its signed body. `setUp` runs once per worker and does what needs no
 * registration (parse settings, hold caches); what it returns runs once per attempt, on the registration the attempt
 * has read, and must not query the database. It throws an ApplicationFailure to refuse the attempt before any request.
 */
export interface DeliveryOption {
  /** Names the option in the registry. */
  readonly name: string;
  setUp(setup: DeliveryOptionSetup): PrepareOption;
}

/** Synchronous unless the option must wait (a token to fetch): only a promise is awaited. */
export type PrepareOption = (
  registration: RegistrationRow,
  target: AttemptTarget,
) => DeliveryContribution | undefined | Promise<DeliveryContribution | undefined>;

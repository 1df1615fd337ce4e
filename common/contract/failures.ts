// How a delivery fails or ends, as the workflow, the activities, the test sender and emitters read it. Sandbox-safe.

/** `type` of every ApplicationFailure the pipeline raises; non-retryable ones say so. */
export const FailureType = {
  /** Non-retryable: the input is not a valid event of spec section 6. */
  InvalidEvent: 'InvalidWebhookEvent',
  /** Non-retryable: the registration does not subscribe to the event type. */
  NotSubscribed: 'WebhookTypeNotSubscribed',
  /** Non-retryable: the URL resolves to a loopback/private/link-local/… address (SSRF guard). */
  TargetForbidden: 'WebhookTargetForbidden',
  /** Non-retryable: the stored URL is not an http(s) URL. */
  InvalidUrl: 'InvalidWebhookUrl',
  /** Retryable: the receiver answered a status other than 2xx (3xx included: redirects are not followed). */
  ReceiverStatus: 'WebhookReceiverStatus',
  /**
   * Not retried: the receiver answered 410 Gone. The delivery is held with every other of its registration until a
   * member resumes (the attempt hands its wait back as a `paused` deferral); a TEST fails with it.
   */
  ReceiverGone: 'WebhookReceiverGone',
  /** Retryable: timeout, refused connection, DNS failure, reset. */
  ReceiverUnreachable: 'WebhookReceiverUnreachable',
  /** Retryable: the egress proxy refused the tunnel (407, 403, 502, …) or could not be reached; not the receiver's. */
  ProxyUnavailable: 'WebhookProxyUnavailable',
  /** Retryable: the registration's secret could not be opened (wrong WEBHOOK_SECRET_KEY on this worker). */
  SecretUnavailable: 'WebhookSecretUnavailable',
  /** The workflow's own failure once retries are exhausted or a non-retryable attempt failure occurred. */
  DeliveryFailed: 'WebhookDeliveryFailed',
  /** Non-retryable: a production worker refuses an event (or activity input) not encrypted by our payload codec. */
  UnencryptedEventRefused: 'UnencryptedEventRefused',
  /**
   * Non-retryable: an input sealed for another workflow (a copy of a delivery's encrypted input, started under a new
   * id or scheduled by a foreign workflow), or, in production, one sealed for none.
   */
  InputNotBound: 'DeliveryInputNotBound',
  /** Non-retryable: a TEST event while the webhook is paused (other events are held, not failed). */
  WebhookPaused: 'WebhookPaused',
} as const;

/** Spec section 6: TEST is delivered whatever the subscription; any other type only when subscribed. */
export const isSubscribed = (types: readonly string[], webhookType: string): boolean =>
  webhookType === 'TEST' || types.includes(webhookType);

/** The spec's error text for an event type the project's webhook does not subscribe to. */
export const notSubscribedMessage = (projectId: string, webhookType: string): string =>
  `Project ${projectId} has not registered a webhook for event: ${webhookType}`;

/** Details (first element) of every attempt failure: what the receiver did, never the body or secret. */
export interface AttemptFailureDetails {
  attempt: number;
  durationMs: number;
  statusCode?: number;
  /** Node/undici error code, or TIMEOUT. */
  errorCode?: string;
  /** The wait before the next attempt when the receiver's Retry-After asked for longer than the policy. */
  retryDelayMs?: number;
}

/** Details (first element) of the workflow's WebhookDeliveryFailed failure. */
export interface DeliveryFailedDetails {
  projectId: string;
  webhookType: string;
  attempts: number;
  statusCode?: number;
  errorCode?: string;
  lastError: string;
}

/** Result of `deliverWebhookEvent`. A failed delivery is a Failed workflow (WebhookDeliveryFailed), not a result. */
export type DeliverWebhookEventResult =
  | { status: 'delivered'; webhookId: string; attempts: number; statusCode: number; durationMs: number }
  | { status: 'skipped'; webhookId: string; reason: 'no-webhook' | 'registration-deleted'; attempts: number };

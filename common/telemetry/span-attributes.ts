// What a span of a delivery may say, and nothing more: the project, the event type, X-Webhook-Id, the attempt, its
// outcome, the breaker's state, and of the receiver only scheme, host and port. Never a payload field, a secret, a
// token, or a URL's path or query (a path may carry a customer's token). Pure, so tests pin each rule.

export const ATTRIBUTE = {
  projectId: 'webhook.project_id',
  eventType: 'webhook.event_type',
  webhookId: 'webhook.id',
  attempt: 'webhook.attempt',
  outcome: 'webhook.outcome',
  failureType: 'webhook.failure_type',
  breakerState: 'webhook.breaker.state',
  waitReason: 'webhook.wait.reason',
  waitMs: 'webhook.wait.ms',
} as const;

export type SpanAttributes = Record<string, string | number | boolean>;

/** Who a delivery is for: its project, event type and X-Webhook-Id. */
export function deliverySpanAttributes(delivery: {
  projectId: string;
  webhookType: string;
  webhookId?: string;
}): SpanAttributes {
  return {
    [ATTRIBUTE.projectId]: delivery.projectId,
    [ATTRIBUTE.eventType]: delivery.webhookType,
    ...(delivery.webhookId !== undefined && { [ATTRIBUTE.webhookId]: delivery.webhookId }),
  };
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** The receiver as the HTTP semantic conventions name it: scheme, host and port, never the path or the query. */
export function receiverAttributes(url: URL): SpanAttributes {
  // The WHATWG parser keeps an IPv6 literal's brackets; server.address is the bare address.
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return {
    'http.request.method': 'POST',
    'url.scheme': url.protocol.slice(0, -1),
    'server.address': host,
    'server.port': url.port === '' ? (DEFAULT_PORTS[url.protocol] ?? 0) : Number(url.port),
  };
}

/**
 * What a workflow span carries of its workflow: its ids, type, queue and namespace. Temporal's span sink would copy
 * the whole WorkflowInfo onto every span (memo, search attributes, last failure, retry policy); this keeps the ids.
 */
export function workflowSpanAttributes(info: {
  workflowId: string;
  runId: string;
  workflowType: string;
  taskQueue: string;
  namespace: string;
}): SpanAttributes {
  return {
    temporalWorkflowId: info.workflowId,
    temporalRunId: info.runId,
    temporalWorkflowType: info.workflowType,
    temporalTaskQueue: info.taskQueue,
    temporalNamespace: info.namespace,
  };
}

/**
 * Whether a W3C traceparent (`00-<trace id>-<span id>-<flags>`) says its trace is sampled (flags bit 0). An unsampled
 * or unreadable one records nothing downstream.
 */
export function sampledTraceparent(traceparent: unknown): boolean {
  if (typeof traceparent !== 'string') return false;
  const match = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-([0-9a-f]{2})$/.exec(traceparent.trim());
  return match !== null && (parseInt(match[1]!, 16) & 1) === 1;
}

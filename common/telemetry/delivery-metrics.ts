import { Counter, Histogram, Registry } from 'prom-client';

/**
 * Delivery counters of this process, in prom-client: the API's /metrics shows them when the worker runs in the
 * same process (`npm start`); a standalone worker exports the same figures through Temporal's metric meter.
 */
export const deliveryRegistry = new Registry();

export const deliveriesTotal = new Counter({
  name: 'webhook_deliveries_total',
  help: 'Deliveries that ended, by event type and outcome (delivered, failed, skipped)',
  labelNames: ['type', 'outcome'] as const,
  registers: [deliveryRegistry],
});

export const deliveryAttemptsTotal = new Counter({
  name: 'webhook_delivery_attempts_total',
  help: 'Delivery attempts (POSTs), by event type and result (delivered, failed)',
  labelNames: ['type', 'result'] as const,
  registers: [deliveryRegistry],
});

/** Seconds, from 50 ms to a day: the worker's meter is given the same ones (its defaults are for milliseconds). */
export const DELIVERY_LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400];

export const deliveryLatencySeconds = new Histogram({
  name: 'webhook_delivery_latency_seconds',
  help: 'From the event entering the service to the receiver acknowledging it, retries included',
  labelNames: ['type'] as const,
  buckets: DELIVERY_LATENCY_BUCKETS,
  registers: [deliveryRegistry],
});

export const unencryptedRefusedTotal = new Counter({
  name: 'webhook_unencrypted_refused_total',
  help: 'Payloads refused because they were not encrypted with the payload key, by what carried them (activity input)',
  labelNames: ['what'] as const,
  registers: [deliveryRegistry],
});

export const inputRefusedTotal = new Counter({
  name: 'webhook_input_refused_total',
  help: 'Inputs refused because they were sealed for another workflow run, or for none (what: event, attempt)',
  labelNames: ['what', 'binding'] as const,
  registers: [deliveryRegistry],
});

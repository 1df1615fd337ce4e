// A process that logs a person the way a careless line would, through the service's own logger (createLogger: the
// same redaction and the same OTLP transport as the API and the worker), then exits once its records have left.
// PROBE_PERSON holds the person as JSON; the line carries it at the top, inside an event and inside an error.
import { createLogger } from '../../common/telemetry/logger';

const person = JSON.parse(process.env.PROBE_PERSON ?? '{}') as Record<string, string>;
const logger = createLogger('info', 'webhooks', undefined, { otlpService: 'webhook-log-probe' });
const rejected = Object.assign(new Error('receiver rejected the event'), {
  request: { body: JSON.stringify({ payload: person }) },
  event: { webhookType: 'FALL_DETECTION', payload: person },
});
logger.warn({ ...person, event: { payload: person }, err: rejected }, 'log probe: a line carrying a person');
// The transport's batch leaves within OTEL_BLRP_SCHEDULE_DELAY; pino flushes its worker thread on exit.
setTimeout(() => process.exit(0), 2_000);

import pino, { type DestinationStream, type Logger, type LoggerOptions, type TransportTargetOptions } from 'pino';
import type { Config } from '../config';
import { isDevelopment } from '../node-env';
import { deepRedaction, redactChildBindings } from './log-redaction';
import { telemetrySettings } from './settings';
import { traceFields, tracingEnabled } from './tracing';

export type { Logger };

/** Paths that must never reach a log line: credentials, signing secrets and event data (PHI). */
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  '*.secret',
  '*.token',
  '*.password',
  '*.payload',
  '*.email',
  '*.firstName',
  '*.lastName',
];

/**
 * Human-readable lines for a developer at a terminal: outside production, when stdout is a TTY (or LOG_PRETTY=true)
 * and pino-pretty (a development dependency) is installed. LOG_PRETTY=false keeps JSON.
 */
export function prettyLogs(
  config: Pick<Config, 'NODE_ENV' | 'LOG_PRETTY'>,
  isTerminal = Boolean(process.stdout.isTTY),
): boolean {
  if (!isDevelopment(config) || config.LOG_PRETTY === false) return false;
  if (config.LOG_PRETTY !== true && !isTerminal) return false;
  try {
    require.resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

/** Where a process's lines go besides its stdout. */
export interface LogOutputs {
  /** Human-readable lines (see prettyLogs); JSON otherwise. */
  pretty?: boolean;
  /**
   * The same lines over OTLP/HTTP too, as this service (`service.name`, unless OTEL_SERVICE_NAME names it), when the
   * OTEL_* variables ask for logs (common/telemetry/settings.ts).
   */
  otlpService?: string;
}

/**
 * pino's transport targets for `outputs`, each at `level`: stdout (pretty or JSON) and, when logs leave over OTLP,
 * pino-opentelemetry-transport, which maps a line's `trace_id`, `span_id` and `trace_flags` to the record's trace
 * context. Undefined for plain JSON to stdout (no worker thread then).
 */
export function logTargets(
  level: string,
  outputs: LogOutputs,
  env: NodeJS.ProcessEnv = process.env,
): TransportTargetOptions[] | undefined {
  const otlp = outputs.otlpService !== undefined && telemetrySettings(env).logs;
  if (!otlp && !outputs.pretty) return undefined;
  const stdout = outputs.pretty
    ? { target: 'pino-pretty', level, options: {} }
    : { target: 'pino/file', level, options: { destination: 1 } };
  if (!otlp) return [stdout];
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || outputs.otlpService!;
  return [
    stdout,
    {
      target: 'pino-opentelemetry-transport',
      level,
      options: { loggerName: 'webhook-delivery-service', resourceAttributes: { 'service.name': serviceName } },
    },
  ];
}

/** JSON lines to stdout (pretty for a developer at a terminal), with credentials and personal data redacted. */
export function createLogger(
  level = 'info',
  name = 'webhooks',
  /** Where lines go instead of stdout (tests read them back). */
  destination?: DestinationStream,
  outputs: LogOutputs = {},
): Logger {
  const options: LoggerOptions = {
    name,
    // An unknown level is left to loadConfig to report, naming LOG_LEVEL, rather than thrown from here.
    level: level in pino.levels.values || level === 'silent' ? level : 'info',
    redact: { paths: REDACT, censor: '[redacted]' },
    // The fixed paths above catch the usual places; this walks every depth (common/telemetry/log-redaction.ts).
    ...deepRedaction,
    // Lines written inside a traced context name its trace and span; without tracing no mixin runs at all.
    ...(tracingEnabled() && { mixin: traceFields }),
  };
  if (destination) return redactChildBindings(pino(options, destination));
  const targets = logTargets(options.level!, outputs);
  return redactChildBindings(pino(targets ? { ...options, transport: { targets } } : options));
}

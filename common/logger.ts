import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type { Config } from './config';
import { isDevelopment } from './node-env';
import { deepRedaction, redactChildBindings } from './log-redaction';
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

/** JSON lines to stdout (pretty for a developer at a terminal), with credentials and personal data redacted. */
export function createLogger(
  level = 'info',
  name = 'webhooks',
  /** Where lines go instead of stdout (tests read them back). */
  destination?: DestinationStream,
  /** Human-readable lines (see prettyLogs); JSON otherwise. */
  pretty = false,
): Logger {
  const options: LoggerOptions = {
    name,
    // An unknown level is left to loadConfig to report, naming LOG_LEVEL, rather than thrown from here.
    level: level in pino.levels.values || level === 'silent' ? level : 'info',
    redact: { paths: REDACT, censor: '[redacted]' },
    // The fixed paths above catch the usual places; this walks every depth (common/log-redaction.ts).
    ...deepRedaction,
    // Lines written inside a traced context name its trace and span; without tracing no mixin runs at all.
    ...(tracingEnabled() && { mixin: traceFields }),
  };
  if (destination) return redactChildBindings(pino(options, destination));
  return redactChildBindings(pino(pretty ? { ...options, transport: { target: 'pino-pretty' } } : options));
}

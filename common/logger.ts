import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';

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
function prettyWanted(): boolean {
  if (process.env.NODE_ENV === 'production' || process.env.LOG_PRETTY === 'false') return false;
  if (process.env.LOG_PRETTY !== 'true' && !process.stdout.isTTY) return false;
  try {
    require.resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

/** JSON lines to stdout (pretty for a developer at a terminal), with credentials and personal data redacted. */
export function createLogger(
  level: string = process.env.LOG_LEVEL ?? 'info',
  name = 'webhooks',
  /** Where lines go instead of stdout (tests read them back). */
  destination?: DestinationStream,
): Logger {
  const options: LoggerOptions = {
    name,
    // An unknown level is left to loadConfig to report, naming LOG_LEVEL, rather than thrown from here.
    level: level in pino.levels.values || level === 'silent' ? level : 'info',
    redact: { paths: REDACT, censor: '[redacted]' },
  };
  if (destination) return pino(options, destination);
  return pino(prettyWanted() ? { ...options, transport: { target: 'pino-pretty' } } : options);
}

import pino, { type Logger } from 'pino';

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

/** JSON to stdout; pretty only when LOG_PRETTY=true in development. */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', name = 'webhooks'): Logger {
  const pretty = process.env.LOG_PRETTY === 'true' && process.env.NODE_ENV !== 'production';
  return pino({
    name,
    level,
    redact: { paths: REDACT, censor: '[redacted]' },
    ...(pretty ? { transport: { target: 'pino-pretty' } } : {}),
  });
}

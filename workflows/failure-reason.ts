// A workflow's failure in words, for a job's record and its audit row (erasure, purge). Sandbox-safe.
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';

/** The activity's own message, never a stack. */
export function reasonOf(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof ApplicationFailure || cause instanceof Error) return cause.message;
  return String(cause);
}

import type { Db } from '../connection';

/** A project whose receiver is failing now, as endpoint_health has it (a 2xx ends the episode and drops it). */
export interface FailingEndpoint {
  projectId: string;
  consecutiveFailures: number;
  failingSeconds: number;
}

/** What Prometheus needs to alert on per project, read from the tables every worker writes. */
export interface AlertState {
  /** Projects with a breaker open or half-open (not closed), by the database's clock. */
  openBreakers: string[];
  failingEndpoints: FailingEndpoint[];
}

/**
 * Two small reads per scrape: the breaker table has a row per registration that ever failed and endpoint_health one
 * per project, and only their non-closed, failing rows come back.
 */
export async function readAlertState(db: Db): Promise<AlertState> {
  const [breakers, endpoints] = await Promise.all([
    db('webhook_circuit_breakers as b')
      .join('webhook_registrations as r', 'r.id', 'b.registration_id')
      .whereNotNull('b.open_until')
      .distinct<{ project_id: string }[]>('r.project_id'),
    db('endpoint_health')
      .whereNotNull('failing_since')
      .select<{ project_id: string; consecutive_failures: number; failing_seconds: string }[]>(
        'project_id',
        'consecutive_failures',
        db.raw('extract(epoch FROM now() - failing_since) AS failing_seconds'),
      ),
  ]);
  return {
    openBreakers: breakers.map((row) => row.project_id),
    failingEndpoints: endpoints.map((row) => ({
      projectId: row.project_id,
      consecutiveFailures: row.consecutive_failures,
      failingSeconds: Math.max(0, Number(row.failing_seconds)),
    })),
  };
}

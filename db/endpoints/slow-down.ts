import type { Db } from '../connection';

/**
 * A receiver that asks to be left alone (429, 502, 503, 504, with or without Retry-After) slows its whole endpoint
 * down, not only the delivery it answered: until `slowed_until` no delivery of the registration is attempted. Each
 * waits listed for the breaker resumer, eligible at that time, which then wakes them paced, falls first. The breaker's
 * count and state are not touched here (the failure is counted as any receiver status is).
 */

// Stryker disable next-line StringLiteral: read once at module load, which Stryker's mocha runner does not redo (a static mutant); an empty name fails every query
const REGISTRATIONS = 'webhook_registrations';

/**
 * The registration's deliveries wait `forMs` from now (the database's clock, every worker's), or longer when an earlier
 * answer asked for longer. Returns the end now set.
 */
export async function slowDownEndpoint(
  db: Db,
  registrationId: string,
  forMs: number,
  statusCode: number,
): Promise<Date | undefined> {
  const rows = await db(REGISTRATIONS)
    .where({ id: registrationId })
    .update({
      slowed_until: db.raw(`GREATEST(coalesce(slowed_until, now()), now() + ? * interval '1 millisecond')`, [
        Math.max(0, Math.ceil(forMs)),
      ]),
      slowed_status_code: statusCode,
    })
    .returning<{ slowed_until: Date }[]>('slowed_until');
  return rows[0]?.slowed_until;
}

// Suite set-up that cleans up after itself: a part that fails to start never strands the parts that did.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { createTestDatabase, type TestDatabase } from './postgres';
import { createLocalEnvironment } from './temporal';

/**
 * Starts two parts in parallel. When either fails, stops the one that started, then rethrows: a suite whose embedded
 * PostgreSQL could not start must not leave its Temporal dev server running (mocha's after hook never sees it).
 */
export async function startBoth<A, B>(
  first: Promise<A>,
  second: Promise<B>,
  stopFirst: (part: A) => Promise<unknown>,
  stopSecond: (part: B) => Promise<unknown>,
): Promise<[A, B]> {
  const [a, b] = await Promise.allSettled([first, second]);
  if (a.status === 'fulfilled' && b.status === 'fulfilled') return [a.value, b.value];
  await Promise.allSettled([
    a.status === 'fulfilled' ? stopFirst(a.value) : undefined,
    b.status === 'fulfilled' ? stopSecond(b.value) : undefined,
  ]);
  throw a.status === 'rejected' ? a.reason : (b as PromiseRejectedResult).reason;
}

/** The pair most suites run on: a Temporal dev server and a database of their own, started together (startBoth). */
export function startTemporalAndDatabase(): Promise<[TestWorkflowEnvironment, TestDatabase]> {
  return startBoth(
    createLocalEnvironment(),
    createTestDatabase(),
    (env) => env.teardown(),
    (database) => database.destroy(),
  );
}

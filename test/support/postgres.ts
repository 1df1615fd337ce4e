import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { createDb, createScratchDatabase, migrateToLatest } from '../../db';
import { startEmbeddedPostgres, type RunningPostgres } from '../../dev/postgres';
import { freePort } from '../../dev/ports';

let embedded: RunningPostgres | undefined;
let serverUrl: string | undefined;

/** The server the tests use: DATABASE_URL when set, else an embedded PostgreSQL started once for the whole run. */
export async function testServerUrl(): Promise<string> {
  if (serverUrl) return serverUrl;
  if (process.env.DATABASE_URL) {
    serverUrl = process.env.DATABASE_URL;
  } else {
    embedded = await startEmbeddedPostgres({
      dataDir: mkdtempSync(join(tmpdir(), 'webhooks-test-pg-')),
      port: await freePort(),
      persistent: false,
    });
    serverUrl = embedded.url;
  }
  return serverUrl;
}

export interface TestDatabase {
  url: string;
  db: Knex;
  destroy(): Promise<void>;
}

/** A fresh, migrated database of its own for one suite, dropped by destroy(). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const server = await testServerUrl();
  const scratch = await createScratchDatabase(server, 'webhooks_test');
  const db = createDb(scratch.url);
  await migrateToLatest(db);
  return {
    url: scratch.url,
    db,
    async destroy() {
      await db.destroy();
      await scratch.drop();
    },
  };
}

/** Mocha global teardown: stops the embedded server, if this run started one. */
export async function mochaGlobalTeardown(): Promise<void> {
  await embedded?.stop();
}

import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { createDb, migrateToLatest } from '../../db';
import { startEmbeddedPostgres, type RunningPostgres } from '../../common/embedded-postgres';
import { freePort } from '../../common/ports';

let embedded: RunningPostgres | undefined;
let serverUrl: string | undefined;

/** The server the tests use: DATABASE_URL when set, else an embedded PostgreSQL started once for the whole run. */
async function testServerUrl(): Promise<string> {
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
  const name = `webhooks_test_${randomBytes(6).toString('hex')}`;
  const admin = createDb(server, { max: 1 });
  await admin.raw('CREATE DATABASE ??', [name]);
  const url = new URL(server);
  url.pathname = `/${name}`;
  const db = createDb(url.toString());
  await migrateToLatest(db);
  return {
    url: url.toString(),
    db,
    async destroy() {
      await db.destroy();
      await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
      await admin.destroy();
    },
  };
}

/** Mocha global teardown: stops the embedded server, if this run started one. */
export async function mochaGlobalTeardown(): Promise<void> {
  await embedded?.stop();
}

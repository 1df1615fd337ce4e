// Migration 029 on a database that holds a delivery log: its rows and attempts, created over several days, are read
// back the same through the query functions from the daily partitions; down converts back with every row kept.
import assert from 'node:assert/strict';
import type { Knex } from 'knex';
import * as store from '../../db';
import { migrationSource } from '../../db/migrations';
import { createScratchDatabase } from '../../db';
import { testServerUrl } from '../support/postgres';

const DAY_MS = 86_400_000;
const dayName = (daysAgo: number) =>
  new Date(Date.now() - daysAgo * DAY_MS).toISOString().slice(0, 10).replaceAll('-', '');

/** Every row of the log as stored, in either schema (the columns both have). */
async function stored(db: Knex) {
  const deliveries = await db('deliveries')
    .orderBy('id')
    .select(
      ...['id', 'project_id', 'type', 'status', 'attempts', 'last_status_code', 'last_error', 'workflow_id'],
      ...['created_at', 'updated_at', 'run_id', 'person_hash'],
    );
  const attempts = await db('delivery_attempts').orderBy('seq').select<
    {
      seq: string;
      delivery_id: string;
      workflow_id: string;
      run_attempt: number;
      at: Date;
      status_code: number | null;
      error_code: string | null;
      duration_ms: number;
    }[]
  >('seq', 'delivery_id', 'workflow_id', 'run_attempt', 'at', 'status_code', 'error_code', 'duration_ms');
  return { deliveries, attempts };
}

/** What the API shows of a project's log: the list, and each delivery with its attempts and last attempt's time. */
async function readBack(db: Knex, projectId: string) {
  const list = await store.listDeliveries(db, projectId, { limit: 50 });
  const details = [];
  for (const item of list) {
    const row = (await store.findDelivery(db, projectId, item.id))!;
    details.push({
      row,
      attempts: await store.listDeliveryAttempts(db, row),
      page: await store.listDeliveryAttempts(db, row, { limit: 1, afterSeq: 0 }),
      lastAttemptAt: await store.lastAttemptAt(db, row),
    });
  }
  return { list, details };
}

describe('migration 029: the delivery log partitioned, on a database holding rows', function () {
  this.timeout(60_000);
  let db: Knex;
  let scratch: { url: string; drop(): Promise<void> };
  before(async () => {
    scratch = await createScratchDatabase(await testServerUrl(), 'webhooks_test');
    db = store.createDb(scratch.url);
  });
  after(async () => {
    await db?.destroy();
    await scratch?.drop();
  });

  it('migrates rows of several days from 028 and reads them back the same; down and up again keep them', async () => {
    const all = await migrationSource.getMigrations([]);
    const upTo028 = all.indexOf('028_gone') + 1;
    for (let i = 0; i < upTo028; i += 1) await db.migrate.up({ migrationSource });
    assert.deepEqual(await store.pendingMigrations(db), ['029_partitioned_delivery_log']);
    const p = 'project-029';
    const other = 'project-029-other';
    // Rows of today, of 3 and of 45 days ago, with attempts; another project's row; one with no attempt. Written as
    // 028's schema has them (the query functions of today write 029's).
    for (const [i, daysAgo] of [0, 0, 3, 45].entries()) {
      const id = `evt-${i}`;
      await db.raw(
        `INSERT INTO deliveries (id, project_id, type, status, attempts, last_status_code, workflow_id, person_hash,
                                 created_at)
         VALUES (?, ?, 'FALL_DETECTION', 'delivered', 2, 200, ?, ?,
                 date_trunc('milliseconds', now()) - make_interval(days => ?) - make_interval(secs => ?))`,
        [id, p, id, i === 1 ? 'hash-1' : null, daysAgo, i],
      );
      for (const runAttempt of [1, 2])
        await db('delivery_attempts').insert({
          delivery_id: id,
          workflow_id: id,
          run_attempt: runAttempt,
          status_code: runAttempt === 2 ? 200 : 500,
          duration_ms: 7,
        });
    }
    await db('deliveries').insert([
      { id: 'evt-none', project_id: p, type: 'TEST', status: 'skipped', workflow_id: 'evt-none' },
      { id: 'evt-x', project_id: other, type: 'TEST', status: 'failed', workflow_id: 'evt-x' },
    ]);
    const before = await stored(db);

    await db.migrate.latest({ migrationSource });

    assert.deepEqual(await stored(db), before);
    // The API's reads: the list in its order, each delivery with its attempts in order and its last attempt's time.
    const read = await readBack(db, p);
    assert.deepEqual(
      read.list.map((item) => item.id),
      ['evt-none', 'evt-0', 'evt-1', 'evt-2', 'evt-3'],
    );
    for (const { row, attempts, page, lastAttemptAt } of read.details) {
      const own = before.attempts.filter((a) => a.delivery_id === row.id);
      assert.deepEqual(
        attempts.map((a) => [a.attempt, a.seq, a.statusCode]),
        own.map((a, i) => [i + 1, Number(a.seq), a.status_code]),
      );
      // A page of one, and the one more that tells another page exists.
      assert.deepEqual(
        page.map((a) => a.attempt),
        own.slice(0, 2).map((_, i) => i + 1),
      );
      assert.deepEqual(lastAttemptAt, own.at(-1)?.at ?? null);
    }
    assert.deepEqual(
      read.list.map((item) => item.lastAttemptAt),
      read.details.map((d) => d.lastAttemptAt),
    );
    // The cross-project guard holds across partitions; the attempts' seq goes on counting.
    const taken = { id: 'evt-x', projectId: p, type: 'TEST', workflowId: 'evt-x' };
    assert.equal(await store.upsertDelivery(db, taken, 'pending'), undefined);
    assert.equal(
      await store.recordDeliveryAttempt(db, taken, { runAttempt: 1, durationMs: 1, delivered: true }),
      undefined,
    );
    assert.equal((await store.findDelivery(db, other, 'evt-x'))?.status, 'failed');
    const next = await store.recordDeliveryAttempt(
      db,
      { id: 'evt-none', projectId: p, type: 'TEST', workflowId: 'evt-none' },
      { runAttempt: 1, statusCode: 200, durationMs: 1, delivered: true },
    );
    const [fresh] = await store.listDeliveryAttempts(db, next!);
    assert.ok(fresh!.seq > Number(before.attempts.at(-1)!.seq), `${fresh!.seq} after the migrated attempts`);

    // Down converts back, every row kept (and the one written since); up again reads the same.
    const after = await stored(db);
    await db.migrate.down({ migrationSource });
    const { rows: fk } = await db.raw<{ rows: unknown[] }>(
      `SELECT 1 FROM pg_constraint WHERE conrelid = 'delivery_attempts'::regclass AND contype = 'f'`,
    );
    assert.equal(fk.length, 1, 'the foreign key of migration 003 is back');
    assert.deepEqual(await stored(db), after);
    await db.migrate.latest({ migrationSource });
    assert.deepEqual(await stored(db), after);
    assert.deepEqual(await readBack(db, p), await readBack(db, p));
    assert.deepEqual(await store.tablesWithoutGrants(db), []);
  });

  it('migrates an empty database: today through a week ahead, and DEFAULT partitions', async () => {
    const empty = await createScratchDatabase(await testServerUrl(), 'webhooks_test');
    const fresh = store.createDb(empty.url);
    try {
      await store.migrateToLatest(fresh);
      const { rows } = await fresh.raw<{ rows: { name: string }[] }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = 'deliveries'::regclass ORDER BY 1`,
      );
      assert.deepEqual(
        rows.map((r) => r.name),
        ['deliveries_default', ...[0, -1, -2, -3, -4, -5, -6, -7].map((d) => `deliveries_p${dayName(d)}`)],
      );
      // Nothing to do on the day it was made.
      assert.deepEqual(await store.maintainDeliveryLog(fresh, 30), []);
    } finally {
      await fresh.destroy();
      await empty.drop();
    }
  });
});

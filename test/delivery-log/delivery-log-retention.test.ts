// The delivery log's retention on PostgreSQL alone: the log is partitioned by day of creation, and the worker's
// maintenance drops whole days past DELIVERY_LOG_RETENTION_DAYS with their attempts, keeps a day that still holds a
// pending or held delivery, makes the days ahead, and moves rows the DEFAULT partition took into their day.
import assert from 'node:assert/strict';
import type { Knex } from 'knex';
import * as store from '../../db';
import { startDeliveryLogRetention } from '../../worker/delivery-log-retention';
import { captureLogger } from '../support/deliveries';
import { memberProject } from './fixture';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

const DAY_MS = 86_400_000;
/** The UTC day `daysAgo` days before now, as the partitions name it. */
const dayOf = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY_MS).toISOString().slice(0, 10);
const suffix = (day: string) => day.replaceAll('-', '');

/** A delivery created `daysAgo` days ago (at this time of day) with one attempt, written as the owner. */
async function pastDelivery(db: Knex, projectId: string, id: string, daysAgo: number, status: string): Promise<void> {
  await db.raw(
    `INSERT INTO deliveries (id, project_id, type, status, workflow_id, attempts, created_at, updated_at)
     VALUES (?, ?, 'FALL_DETECTION', ?, ?, 1, date_trunc('milliseconds', now()) - make_interval(days => ?), now())`,
    [id, projectId, status, id, daysAgo],
  );
  await db.raw(
    `INSERT INTO delivery_attempts (delivery_id, delivery_created_at, workflow_id, run_attempt, duration_ms)
     SELECT id, created_at, id, 1, 3 FROM deliveries WHERE id = ?`,
    [id],
  );
  await db('deliveries').where({ id }).update({ last_attempt_at: db.fn.now() });
}

const partitionOf = async (db: Knex, table: string, where: string, id: string) =>
  (
    await db.raw<{ rows: { part: string }[] }>(
      `SELECT tableoid::regclass::text AS part FROM ${table} WHERE ${where} = ?`,
      [id],
    )
  ).rows.map((row) => row.part);

const exists = async (db: Knex, name: string) =>
  (await db.raw<{ rows: { found: boolean }[] }>('SELECT to_regclass(?) IS NOT NULL AS found', [name])).rows[0]!.found;

const attemptsOf = async (db: Knex, id: string) =>
  Number((await db('delivery_attempts').where({ delivery_id: id }).count<{ count: string }[]>('* as count'))[0]!.count);

describe('delivery log retention (real PostgreSQL)', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(() => t?.destroy());

  it('drops whole days past DELIVERY_LOG_RETENTION_DAYS with their attempts; keeps today and a day holding a held delivery', async () => {
    const p = await memberProject(t.db, 'alice');
    const fresh = 'evt-retention-fresh';
    const key = { id: fresh, projectId: p, type: 'FALL_DETECTION', workflowId: fresh };
    await store.recordDeliveryAttempt(t.db, key, { runAttempt: 1, statusCode: 200, durationMs: 3, delivered: true });
    await pastDelivery(t.db, p, 'evt-retention-old', 31, 'delivered');
    await pastDelivery(t.db, p, 'evt-retention-held', 40, 'held');
    const log = captureLogger();
    const stop = startDeliveryLogRetention(t.db, 30, log.logger);
    try {
      // The first maintenance runs at start.
      for (let i = 0; i < 100 && (await store.findDelivery(t.db, p, 'evt-retention-old')); i += 1)
        await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      stop();
    }
    assert.equal(await store.findDelivery(t.db, p, 'evt-retention-old'), undefined);
    assert.equal(await attemptsOf(t.db, 'evt-retention-old'), 0);
    assert.equal(await exists(t.db, `deliveries_p${suffix(dayOf(31))}`), false);
    assert.equal(await exists(t.db, `delivery_attempts_p${suffix(dayOf(31))}`), false);
    const kept = (await store.findDelivery(t.db, p, fresh))!;
    assert.equal((await store.listDeliveryAttempts(t.db, kept)).length, 1);
    // The held delivery's day is past retention but stays, in its own partition now, until the delivery ends.
    assert.equal((await store.findDelivery(t.db, p, 'evt-retention-held'))?.status, 'held');
    assert.deepEqual(await partitionOf(t.db, 'deliveries', 'id', 'evt-retention-held'), [
      `deliveries_p${suffix(dayOf(40))}`,
    ]);
    const { lines } = log;
    const dropped = lines.find((line) => line.msg === 'delivery log days past retention dropped');
    assert.deepEqual(dropped && [dropped.days, dropped.deliveries, dropped.attempts], [[dayOf(31)], 1, 1]);
    const keptLine = lines.find((line) => String(line.msg).startsWith('delivery log days past retention kept'));
    assert.deepEqual(keptLine?.days, [{ day: dayOf(40), open: 1 }]);

    // Once it has ended, the next maintenance drops its day.
    await t.db('deliveries').where({ id: 'evt-retention-held' }).update({ status: 'delivered' });
    const days = await store.maintainDeliveryLog(t.db, 30);
    assert.deepEqual(
      days.filter((day) => day.action !== 'created'),
      [{ action: 'dropped', day: dayOf(40), deliveries: 1, attempts: 1 }],
    );
    assert.equal(await store.findDelivery(t.db, p, 'evt-retention-held'), undefined);
    assert.equal(await attemptsOf(t.db, 'evt-retention-held'), 0);
    assert.ok(await store.findDelivery(t.db, p, fresh));
  });

  it('makes the days ahead, and moves the rows the DEFAULT partition took into their own day', async () => {
    const p = await memberProject(t.db, 'bob');
    // The migration made today through a week ahead: a row of three days ago has no day of its own.
    await pastDelivery(t.db, p, 'evt-default', 3, 'failed');
    assert.deepEqual(await partitionOf(t.db, 'deliveries', 'id', 'evt-default'), ['deliveries_default']);
    assert.deepEqual(await partitionOf(t.db, 'delivery_attempts', 'delivery_id', 'evt-default'), [
      'delivery_attempts_default',
    ]);
    assert.equal(await exists(t.db, `deliveries_p${suffix(dayOf(-10))}`), false);
    const days = await store.maintainDeliveryLog(t.db, 30, 10);
    assert.deepEqual(
      days.filter((day) => day.day === dayOf(3)),
      [{ action: 'created', day: dayOf(3), deliveries: 1, attempts: 1 }],
    );
    assert.deepEqual(
      days.filter((day) => day.day > dayOf(0)).map((day) => [day.action, day.day]),
      [8, 9, 10].map((ahead) => ['created', dayOf(-ahead)]),
    );
    assert.ok(await exists(t.db, `deliveries_p${suffix(dayOf(-10))}`));
    assert.ok(await exists(t.db, `delivery_attempts_p${suffix(dayOf(-10))}`));
    assert.deepEqual(await partitionOf(t.db, 'deliveries', 'id', 'evt-default'), [`deliveries_p${suffix(dayOf(3))}`]);
    assert.deepEqual(await partitionOf(t.db, 'delivery_attempts', 'delivery_id', 'evt-default'), [
      `delivery_attempts_p${suffix(dayOf(3))}`,
    ]);
    const row = (await store.findDelivery(t.db, p, 'evt-default'))!;
    assert.equal((await store.listDeliveryAttempts(t.db, row)).length, 1);
    assert.deepEqual(
      (await store.listDeliveries(t.db, p, { limit: 10 })).map((item) => [item.id, item.lastAttemptAt !== null]),
      [['evt-default', true]],
    );
    // Run again, it has nothing to do.
    assert.deepEqual(await store.maintainDeliveryLog(t.db, 30, 10), []);
  });

  it('refuses a retention under one day', async () => {
    await assert.rejects(store.maintainDeliveryLog(t.db, 0), /retention_days must be at least 1/);
  });

  it('a second first write of one id on the same day is refused (23505), not logged as a second row', async () => {
    const p = await memberProject(t.db, 'carol');
    const id = 'evt-twice';
    await store.upsertDelivery(t.db, { id, projectId: p, type: 'FALL_DETECTION', workflowId: id }, 'pending');
    // What a concurrent first write that did not see the row would insert: the same id a millisecond apart.
    await assert.rejects(
      t.db.raw(
        `INSERT INTO deliveries (id, project_id, type, status, workflow_id, created_at)
         SELECT id, project_id, type, status, workflow_id, created_at + interval '1 millisecond'
           FROM deliveries WHERE id = ?`,
        [id],
      ),
      (error: { code?: string }) => error.code === '23505',
    );
  });

  it('two deliveries of one id on two days: each read pins its own row and attempts', async () => {
    const p = await memberProject(t.db, 'dave');
    const id = 'evt-reused';
    await pastDelivery(t.db, p, id, 2, 'delivered');
    const key = { id, projectId: p, type: 'FALL_DETECTION', workflowId: id };
    // The later write finds the existing row by id and writes to it, whatever day it was created.
    await store.recordDeliveryAttempt(t.db, key, { runAttempt: 2, statusCode: 500, durationMs: 3, delivered: false });
    assert.equal(await attemptsOf(t.db, id), 2);
    assert.equal((await t.db('deliveries').where({ id })).length, 1);
    // The id reused a day later (the two rows only retention or a race across midnight could leave).
    await t.db.raw(
      `INSERT INTO deliveries (id, project_id, type, status, workflow_id) VALUES (?, ?, 'FALL_DETECTION', 'pending', ?)`,
      [id, p, id],
    );
    const newest = (await store.findDelivery(t.db, p, id))!;
    assert.equal(newest.status, 'pending');
    assert.deepEqual(await store.listDeliveryAttempts(t.db, newest), []);
    assert.equal(await store.lastAttemptAt(t.db, newest), null);
    const listed = await store.listDeliveries(t.db, p, { limit: 10 });
    assert.deepEqual(
      listed.map((item) => [item.status, item.lastAttemptAt === null]),
      [
        ['pending', true],
        ['pending', false],
      ],
    );
    const older = listed[1]!;
    assert.deepEqual(
      (await store.listDeliveryAttempts(t.db, older)).map((attempt) => attempt.attempt),
      [1, 2],
    );
  });
});

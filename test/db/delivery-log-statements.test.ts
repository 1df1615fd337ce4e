// The delivery log's prepared statements (db/deliveries.ts) outlive a migration that adds a column: a process keeps
// the statements it prepared, and one returning `*` would fail in every process at once ("cached plan must not change
// result type") until each reconnected.
import assert from 'node:assert/strict';
import * as store from '../../db';
import { createScratchDatabase } from '../../db';
import { migrationSource } from '../../db/migrations';
import { testServerUrl } from '../support/postgres';

describe('delivery log: prepared statements across a migration that adds a column (PostgreSQL)', function () {
  this.timeout(60_000);
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let db: store.Db;

  before(async () => {
    scratch = await createScratchDatabase(await testServerUrl(), 'webhooks_test');
    // One connection: the statements prepared by the first calls are the ones the calls after the ALTER run.
    db = store.createDb(scratch.url, { max: 1 });
    await db.migrate.latest({ migrationSource });
  });
  after(async () => {
    await db.destroy();
    await scratch.drop();
  });

  it('writes, and lists, the same after a column is added to deliveries as before', async () => {
    const key = (id: string) => ({ id, projectId: 'p1', type: 'FALL_DETECTION', workflowId: id });
    const attempt = { runAttempt: 1, statusCode: 200, durationMs: 3, delivered: true };
    // Prepared more than five times, so PostgreSQL keeps the generic plan it caches.
    for (let i = 0; i < 6; i += 1) {
      await store.upsertDelivery(db, key(`before-${i}`), 'pending');
      await store.recordDeliveryAttempt(db, key(`before-${i}`), attempt);
      await store.listDeliveries(db, 'p1', { limit: 10 });
    }

    await db.raw('ALTER TABLE deliveries ADD COLUMN note text');

    assert.equal((await store.upsertDelivery(db, key('after'), 'pending'))?.status, 'pending');
    assert.equal((await store.recordDeliveryAttempt(db, key('after'), attempt))?.status, 'delivered');
    const listed = await store.listDeliveries(db, 'p1', { limit: 10 });
    assert.deepEqual(
      listed.map((row) => row.id),
      ['after', ...[5, 4, 3, 2, 1, 0].map((i) => `before-${i}`)],
    );
  });
});

// The delivery log's retention on PostgreSQL alone: the worker's purge removes entries past
// DELIVERY_LOG_RETENTION_DAYS with their attempts and keeps the rest.
import assert from 'node:assert/strict';
import * as store from '../../db';
import { startDeliveryLogRetention } from '../../worker/delivery-log-retention';
import { captureLogger } from '../support/deliveries';
import { memberProject, seedDeliveries } from './fixture';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

describe('delivery log retention (real PostgreSQL)', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(() => t?.destroy());

  it('purges log entries past DELIVERY_LOG_RETENTION_DAYS with their attempts, and keeps the rest', async () => {
    const p = await memberProject(t.db, 'alice');
    const [fresh, old] = await seedDeliveries(t.db, p, 2);
    const key = { id: old!, projectId: p, type: 'FALL_DETECTION', workflowId: old! };
    await store.recordDeliveryAttempt(t.db, key, {
      runAttempt: 1,
      statusCode: 500,
      durationMs: 3,
      delivered: false,
    });
    await t
      .db('deliveries')
      .where({ id: old })
      .update({ updated_at: new Date(Date.now() - 31 * 86_400_000) });
    const purgeLog = captureLogger();
    const stop = startDeliveryLogRetention(t.db, 30, purgeLog.logger);
    try {
      // The first purge runs at start.
      for (let i = 0; i < 100 && (await store.findDelivery(t.db, p, old!)); i += 1)
        await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      stop();
    }
    assert.equal(await store.findDelivery(t.db, p, old!), undefined);
    assert.deepEqual(await store.listDeliveryAttempts(t.db, old!), []);
    assert.ok(await store.findDelivery(t.db, p, fresh!));
    assert.equal(await store.purgeDeliveries(t.db, 30), 0);
  });
});

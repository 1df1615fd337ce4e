// A namespace without the ProjectId search attribute (a bare one, before anyone registered them): a purge cannot find
// the project's executions, fails at its first step saying why, and removes nothing; run again once ProjectId is
// registered, the same purge finishes.
import assert from 'node:assert/strict';
import { temporal } from '@temporalio/proto';
import { ProjectIdKey } from '../../common/contract';
import * as store from '../../db';
import { OPERATOR, fall, purgeEnvironment, usePurgeSuite, type PurgeReply } from './fixture';

describe('purge in a namespace without the ProjectId search attribute (Temporal dev server)', function () {
  this.timeout(120_000);
  const s = usePurgeSuite(() => purgeEnvironment(false));

  it('fails at the executions step, naming ProjectId, and removes nothing; asked again once it is registered, it finishes', async () => {
    const { projectId } = await s.project();
    await s.withWorker(
      async () => {
        const run = await s.delivered(fall(projectId));
        const before = await s.rowsOf(projectId);
        const id = await s.requestPurge(projectId);
        const failed = await s.purgeReaches(id, 'failed');
        assert.equal(failed.step, 'executions');
        assert.match(
          String(failed.failure),
          /has no ProjectId search attribute: the project's executions cannot be found/,
        );
        assert.equal(failed.counts.executionsDeleted, 0);
        assert.deepEqual(await s.rowsOf(projectId), before, 'nothing removed');
        assert.equal(await s.described(run), true);
        const [request, outcome] = await store.purgeAuditEvents(s.db(), { id, projectId });
        assert.deepEqual(
          [request?.action, outcome?.action, outcome?.outcome],
          ['purge.request', 'purge.complete', 'failed'],
        );

        // The operator registers ProjectId (docs/operators.md, search attributes) and asks again: the same purge, run
        // again. The delivery started without it stays unlisted (a search attribute is not set after the fact).
        await s.fx.env.connection.operatorService.addSearchAttributes({
          namespace: 'default',
          searchAttributes: { [ProjectIdKey.name]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD },
        });
        const resumed = await s.call<PurgeReply>('POST', '/purges', { user: OPERATOR, body: { projectId } });
        assert.deepEqual([resumed.status, resumed.body.id], [202, id]);
        const done = await s.purgeReaches(id, 'completed');
        assert.equal(done.counts.deliveryRowsDeleted, 1);
        assert.equal((await s.rowsOf(projectId)).projects, 0);
        // Started before ProjectId existed, the delivery's execution carries none: no listing finds it, and it is left
        // to Temporal's retention (docs/operators.md, "Purging a customer": not destroyed).
        assert.equal(await s.described(run), true);
        // What its start-up check would report of this namespace: deliveries do not upsert what it lacks.
      },
      { searchAttributes: false },
    );
  });
});

// The purge's record and deletions on PostgreSQL alone: one unfinished purge per project, a failed one reopened, the
// step never moved back, batch jobs and executions counted once, the project's rows deleted (and nobody else's) with
// their counts added in the same transaction, so a step run again adds nothing.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

const secretBox = createSecretBox(randomBytes(32));
const ops = { kind: 'member', subject: 'ops' } as const;

describe('purge records and deletions (PostgreSQL)', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(() => t?.destroy());

  /** A project with a registration, a member, contacts, a notice told and one queued, a portal link, and deliveries. */
  async function filled(deliveries: number): Promise<string> {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    await store.createRegistration(t.db, secretBox, {
      projectId,
      url: 'https://r.example/h',
      types: ['FALL_DETECTION'],
    });
    await store.setNotificationContacts(t.db, projectId, { url: 'https://n.example/', emails: ['ops@example.com'] });
    await store.claimNotice(t.db, projectId, 'breaker-open');
    await store.queueNotice(t.db, { projectId, condition: 'pause-started', facts: {} });
    await store.addPortalLink(
      t.db,
      { id: randomUUID(), projectId, generation: 0, expiresAt: new Date(Date.now() + 60_000) },
      50,
    );
    for (let i = 0; i < deliveries; i += 1) {
      const key = { id: `evt-${randomUUID()}`, projectId, type: 'FALL_DETECTION', workflowId: `wf-${i}` };
      await store.upsertDelivery(t.db, key, 'pending');
      for (const runAttempt of [1, 2])
        await store.recordDeliveryAttempt(t.db, key, { runAttempt, statusCode: 500, durationMs: 1, delivered: false });
    }
    return projectId;
  }

  const purge = (projectId: string) =>
    store.insertPurge(t.db, { id: randomUUID(), projectId, requestedBy: ops }) as Promise<store.PurgeRow>;

  it('records one unfinished purge per project; a second request finds it; once completed, a new one may be recorded', async () => {
    const projectId = await filled(0);
    const [first, second] = await Promise.all([purge(projectId), purge(projectId)]);
    assert.equal([first, second].filter(Boolean).length, 1, 'one of two requests at once');
    const recorded = first ?? second;
    assert.equal((await store.unfinishedPurge(t.db, projectId))?.id, recorded.id);
    assert.equal(await store.reopenPurge(t.db, recorded.id), undefined, 'only a failed purge is reopened');
    await store.closePurge(t.db, recorded.id, { status: 'failed', failure: 'x' });
    assert.equal(await purge(projectId), undefined, 'a failed purge is still the unfinished one');
    const reopened = await store.reopenPurge(t.db, recorded.id);
    assert.deepEqual([reopened?.status, reopened?.failure, reopened?.completedAt], ['pending', null, null]);
    const closed = await store.closePurge(t.db, recorded.id, { status: 'completed' });
    assert.deepEqual([closed?.status, closed?.step], ['completed', 'done']);
    assert.equal(await store.closePurge(t.db, recorded.id, { status: 'failed' }), undefined, 'closed once');
    assert.equal(await store.unfinishedPurge(t.db, projectId), undefined);
    assert.ok(await purge(projectId), 'a new purge once the last completed');
  });

  it('moves the step forward only, and counts each execution and data key once, each batch job kept with when it ended', async () => {
    const row = await purge(await filled(0));
    await store.setPurgeStep(t.db, row.id, 'data-keys');
    await store.setPurgeStep(t.db, row.id, 'rows');
    assert.equal((await store.findPurge(t.db, row.id))?.step, 'data-keys');

    const job = { jobId: 'j-1', state: 'running', total: 2, deleted: 1, failed: 0 } as const;
    await store.recordPurgeBatchJob(t.db, row.id, job);
    await store.recordPurgeBatchJob(t.db, row.id, { ...job, state: 'completed', deleted: 2, endedAt: 'first' });
    await store.recordPurgeBatchJob(t.db, row.id, { ...job, state: 'completed', deleted: 2, endedAt: 'later' });
    await store.recordPurgeExecutions(t.db, row.id, [
      { workflowId: 'a', runId: '1' },
      { workflowId: 'b', runId: '1' },
    ]);
    await store.recordPurgeExecutions(t.db, row.id, [
      { workflowId: 'b', runId: '1' },
      { workflowId: 'b', runId: '2' },
    ]);
    await store.recordPurgedDataKeys(t.db, row.id, ['dk-2', 'dk-1']);
    await store.recordPurgedDataKeys(t.db, row.id, ['dk-1']);
    const after = (await store.findPurge(t.db, row.id))!;
    assert.deepEqual(after.batchJobs, [{ ...job, state: 'completed', deleted: 2, endedAt: 'first' }]);
    assert.equal(after.executionsDeleted, 3);
    assert.deepEqual(after.dataKeysDestroyed, ['dk-1', 'dk-2']);
    assert.equal(store.purgeCounts(after).dataKeysDestroyed, 2);
  });

  it("deletes the project's rows and nobody else's, counting them in the same transaction; run again, it adds nothing", async () => {
    const projectId = await filled(5);
    const other = await filled(2);
    const row = await purge(projectId);
    const batches: number[] = [];
    for (let n; (n = await store.deleteProjectDeliveryRows(t.db, row.id, projectId, 2)) > 0;) batches.push(n);
    assert.deepEqual(batches, [2, 2, 1]);
    const deleted = await store.deleteProjectRows(t.db, row.id, projectId);
    assert.deepEqual(deleted, {
      registrations: 1,
      portalLinks: 1,
      contacts: 1,
      notices: 2,
      members: 1,
      deliveryRows: 0,
      attempts: 0,
    });
    assert.equal(await store.projectExists(t.db, projectId), false);
    assert.equal(await store.deleteProjectDeliveryRows(t.db, row.id, projectId), 0);
    await store.deleteProjectRows(t.db, row.id, projectId);
    assert.deepEqual(store.purgeCounts((await store.findPurge(t.db, row.id))!), {
      executionsDeleted: 0,
      registrationsDeleted: 1,
      portalLinksDeleted: 1,
      contactsDeleted: 1,
      noticesDeleted: 2,
      membersDeleted: 1,
      deliveryRowsDeleted: 5,
      attemptsDeleted: 10,
      dataKeysDestroyed: 0,
    });
    // The other project is whole.
    assert.equal(await store.projectExists(t.db, other), true);
    assert.ok(await store.findRegistration(t.db, other));
    assert.equal((await store.listDeliveries(t.db, other, { limit: 10 })).length, 2);
    assert.equal((await t.db('portal_links').where({ project_id: other })).length, 1);
  });
});

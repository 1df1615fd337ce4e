// The purge of a whole project on a real Temporal dev server and PostgreSQL: every workflow execution of the project
// deleted by Temporal's batch deletion (one still being retried terminated and deleted too), every row of the project
// deleted, its data key destroyed, another project's deliveries and registration untouched; a purge stopped half-way,
// failed or terminated, finishes when asked again and counts what it removed once.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import { temporal } from '@temporalio/proto';
import { PURGE_STATE_QUERY, purgeWorkflowId, type PurgeProjectInput, type PurgeState } from '../../common/purge';
import * as store from '../../db';
import { MEMBER, OPERATOR, fall, usePurgeSuite, type PurgeReply, type ProjectRows } from './fixture';

/** RECORD_HISTORIES=1 saves the first test's purge history for test/workflows/replay.test.ts. */
const HISTORY = join(__dirname, '..', 'fixtures', 'histories', 'purge-project-completed.binpb');

/** What is left of a purged project: nothing, in any table (its data key only as a tombstone). */
const NOTHING: ProjectRows = {
  projects: 0,
  project_members: 0,
  webhook_registrations: 0,
  webhook_circuit_breakers: 0,
  endpoint_health: 0,
  webhook_send_limits: 0,
  project_notification_contacts: 0,
  project_notices: 0,
  project_notice_outbox: 0,
  portal_links: 0,
  deliveries: 0,
  delivery_attempts: 0,
  live_data_keys: 0,
};

describe('purge of a whole project (Temporal dev server)', function () {
  this.timeout(180_000);
  const s = usePurgeSuite();

  it('deletes every execution of the project (one still being retried too) and all its rows; another project is untouched', async () => {
    const { projectId, dataKeyId } = await s.project();
    const other = await s.project();
    await s.withWorker(async () => {
      const runs = [await s.delivered(fall(projectId)), await s.delivered(fall(projectId))];
      const kept = await s.delivered(fall(other.projectId));
      // The receiver goes down: this fall is retried every 100-200 ms and stays open until the purge ends it.
      s.fx.receiver.fallback = { status: 503 };
      const open = await s.start(fall(projectId));
      await s.fx.receiver.waitForRequests(5);
      assert.equal((await s.fx.env.client.workflow.getHandle(open).describe()).status.name, 'RUNNING');
      const before = await s.rowsOf(projectId);
      assert.deepEqual(
        [before.deliveries, before.webhook_registrations, before.portal_links, before.project_notification_contacts],
        [3, 1, 1, 1],
      );
      assert.ok(before.delivery_attempts >= 4, JSON.stringify(before));
      const otherBefore = await s.rowsOf(other.projectId);

      const id = await s.requestPurge(projectId);
      const done = await s.purgeReaches(id, 'completed');
      const requestsAtEnd = s.fx.receiver.requests.length;

      for (const workflowId of [...runs, open]) assert.equal(await s.described(workflowId), false, workflowId);
      assert.deepEqual(await s.rowsOf(projectId), NOTHING);
      // The data key is a tombstone: its bytes gone, its id and when it was destroyed kept.
      const tombstone = await store.findDataKey(s.db(), dataKeyId);
      assert.deepEqual([tombstone?.wrapped, tombstone?.wrappingKeyId], [null, null]);
      assert.ok(tombstone?.destroyedAt);

      assert.equal(done.step, 'done');
      assert.ok(done.completedAt && done.completedAt >= done.requestedAt);
      assert.ok(done.counts.attemptsDeleted >= before.delivery_attempts, JSON.stringify(done.counts));
      assert.deepEqual(done.counts, {
        executionsDeleted: 3,
        registrationsDeleted: 1,
        portalLinksDeleted: 1,
        contactsDeleted: 1,
        noticesDeleted: before.project_notices + before.project_notice_outbox,
        membersDeleted: 1,
        deliveryRowsDeleted: 3,
        attemptsDeleted: done.counts.attemptsDeleted,
        dataKeysDestroyed: 1,
      });

      // The other project, its delivery in Temporal and in the log, its registration and everything else, as it was.
      assert.equal(await s.described(kept), true);
      assert.deepEqual(await s.rowsOf(other.projectId), otherBefore);
      assert.equal((await store.liveProjectDataKey(s.db(), other.projectId))?.id, other.dataKeyId);

      // The job's own state, queryable on its workflow (the API reads the same from its record).
      const state = await s.fx.env.client.workflow.getHandle(purgeWorkflowId(id)).query<PurgeState>(PURGE_STATE_QUERY);
      assert.deepEqual(
        { status: state.status, step: state.step, executionsDeleted: state.executionsDeleted },
        { status: 'completed', step: 'done', executionsDeleted: 3 },
      );
      if (process.env.RECORD_HISTORIES === '1') {
        const history = await s.fx.env.client.workflow.getHandle(purgeWorkflowId(id)).fetchHistory();
        writeFileSync(HISTORY, temporal.api.history.v1.History.encode(history).finish());
      }
      // The fall being retried was ended by the purge: no further attempt reached the receiver.
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(s.fx.receiver.requests.length, requestsAtEnd);
      // The project is gone: registering its webhook again finds no project.
      const again = await s.call('POST', '/webhooks/register', {
        user: MEMBER,
        body: { projectId, url: s.fx.receiver.url, types: ['FALL_DETECTION'] },
      });
      assert.equal(again.status, 404);
    });
  });

  it('a purge failed half-way (rows partly deleted) is run again by asking again: it finishes, each row counted once', async () => {
    const { projectId } = await s.project();
    let stopOnce = true;
    await s.withWorker(
      async () => {
        for (let i = 0; i < 3; i += 1) await s.delivered(fall(projectId));
        const id = await s.requestPurge(projectId);
        const failed = await s.purgeReaches(id, 'failed');
        assert.equal(failed.step, 'rows');
        assert.match(String(failed.failure), /the database went away/);
        // Half-way: Temporal's executions and one row of the log are gone, the rest is there.
        assert.deepEqual([failed.counts.executionsDeleted, failed.counts.deliveryRowsDeleted], [3, 1]);
        const left = await s.rowsOf(projectId);
        assert.deepEqual([left.deliveries, left.webhook_registrations, left.projects], [2, 1, 1]);
        // Still marked: its webhook cannot be changed while the purge is not completed.
        const patched = await s.call<{ detail: string; purgeId: string }>('PATCH', '/webhooks', {
          user: MEMBER,
          body: { projectId, types: ['FALL_DETECTION'] },
        });
        assert.equal(patched.status, 409);
        assert.equal(patched.contentType, 'application/problem+json');
        assert.equal(patched.body.purgeId, id);
        assert.match(patched.body.detail, new RegExp(`Project ${projectId} is being purged \\(purge ${id}\\)`));

        const resumed = await s.call<PurgeReply>('POST', '/purges', { user: OPERATOR, body: { projectId } });
        assert.equal(resumed.status, 202);
        assert.deepEqual([resumed.body.id, resumed.body.status], [id, 'pending']);
        const done = await s.purgeReaches(id, 'completed');
        assert.deepEqual(await s.rowsOf(projectId), NOTHING);
        assert.deepEqual(
          [done.counts.executionsDeleted, done.counts.deliveryRowsDeleted, done.counts.registrationsDeleted],
          [3, 3, 1],
        );
        assert.equal(done.failure, undefined);
        const actions = (await store.purgeAuditEvents(s.db(), { id, projectId })).map((e) => [e.action, e.outcome]);
        assert.deepEqual(actions, [
          ['purge.request', 'ok'],
          ['purge.complete', 'failed'],
          ['purge.resume', 'ok'],
          ['purge.complete', 'ok'],
        ]);
      },
      {
        // One row per transaction; the first run stops for good after the first row.
        purgeDeliveryBatch: 1,
        wrapPurgeActivities: (activities) => ({
          ...activities,
          async deletePurgedProjectRows(input) {
            if (!stopOnce) return activities.deletePurgedProjectRows(input);
            stopOnce = false;
            await store.setPurgeStep(s.db(), input.purgeId, 'rows');
            await store.deleteProjectDeliveryRows(s.db(), input.purgeId, input.projectId, 1);
            throw ApplicationFailure.create({ message: 'the database went away (a test)', nonRetryable: true });
          },
        }),
      },
    );
  });

  it('each step run twice, as after a worker lost before it reported, removes nothing more and counts nothing twice', async () => {
    const { projectId } = await s.project();
    const ranTwice = new Set<string>();
    await s.withWorker(
      async () => {
        const runs = [await s.delivered(fall(projectId)), await s.delivered(fall(projectId))];
        const id = await s.requestPurge(projectId);
        const done = await s.purgeReaches(id, 'completed');
        assert.deepEqual([...ranTwice].sort(), [
          'completePurge',
          'deleteProjectExecutions',
          'deletePurgedProjectRows',
          'destroyPurgedProjectKeys',
        ]);
        for (const run of runs) assert.equal(await s.described(run), false);
        assert.deepEqual(await s.rowsOf(projectId), NOTHING);
        assert.deepEqual(done.counts, {
          executionsDeleted: 2,
          registrationsDeleted: 1,
          portalLinksDeleted: 1,
          contactsDeleted: 1,
          noticesDeleted: 1,
          membersDeleted: 1,
          deliveryRowsDeleted: 2,
          attemptsDeleted: 2,
          dataKeysDestroyed: 1,
        });
        const actions = (await store.purgeAuditEvents(s.db(), { id, projectId })).map((e) => e.action);
        assert.deepEqual(actions, ['purge.request', 'purge.complete'], 'one outcome row');
      },
      {
        wrapPurgeActivities: (activities) => {
          // The step does its work, then the worker is lost before Temporal hears of it: the step is run again.
          const twice =
            <A extends unknown[], R>(name: string, step: (...args: A) => Promise<R>) =>
            async (...args: A): Promise<R> => {
              const result = await step(...args);
              if (ranTwice.has(name)) return result;
              ranTwice.add(name);
              throw new Error(`worker lost before ${name} reported (a test)`);
            };
          return {
            ...activities,
            deleteProjectExecutions: twice('deleteProjectExecutions', (input: PurgeProjectInput) =>
              activities.deleteProjectExecutions(input),
            ),
            deletePurgedProjectRows: twice('deletePurgedProjectRows', (input: PurgeProjectInput) =>
              activities.deletePurgedProjectRows(input),
            ),
            destroyPurgedProjectKeys: twice('destroyPurgedProjectKeys', (input: PurgeProjectInput) =>
              activities.destroyPurgedProjectKeys(input),
            ),
            completePurge: twice('completePurge', (input: PurgeProjectInput) => activities.completePurge(input)),
          };
        },
      },
    );
  });

  it('a purge whose workflow was terminated is started again by asking again (200: the same purge), and finishes', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const run = await s.delivered(fall(projectId));
      const id = await s.requestPurge(projectId);
      await s.fx.env.client.workflow.getHandle(purgeWorkflowId(id)).terminate('an operator stopped it (a test)');
      assert.equal((await s.status(id)).body.status, 'pending', 'the record still says pending');
      const again = await s.call<PurgeReply>('POST', '/purges', { user: OPERATOR, body: { projectId } });
      assert.equal(again.status, 200);
      assert.equal(again.body.id, id);
      const done = await s.purgeReaches(id, 'completed');
      assert.equal(await s.described(run), false);
      assert.deepEqual(await s.rowsOf(projectId), NOTHING);
      assert.deepEqual([done.counts.executionsDeleted, done.counts.deliveryRowsDeleted], [1, 1]);
      // Asked again once completed: the project is gone, nothing is recorded.
      const after = await s.call<{ detail: string }>('POST', '/purges', { user: OPERATOR, body: { projectId } });
      assert.equal(after.status, 404);
      assert.match(after.body.detail, new RegExp(`No project with id ${projectId} was found`));
    });
  });
});

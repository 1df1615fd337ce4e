// Erasure of one person's deliveries on a real Temporal dev server and PostgreSQL: their workflow histories deleted
// with Temporal's DeleteWorkflowExecution, their delivery log rows and attempts deleted, anyone else's untouched, a
// delivery still being retried delivered first and erased once it has ended.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { emitWebhookEvent, parsePersonHashKey, type WebhookEvent } from '../../client';
import { PersonHashKey } from '../../common/contract';
import { ERASURE_STATE_QUERY, erasureWorkflowId, type ErasureState } from '../../common/erasure';
import { TEST_PERSON_HASH_KEY } from '../support/audit-keys';
import { eventually } from '../support/eventually';
import { independentSignatureValid } from '../support/receiver';
import { erasureEnvironment, fall, hashOf, useErasureSuite, vital } from './fixture';

/** RECORD_HISTORIES=1 saves the in-flight test's erasure history for test/workflows/replay.test.ts. */
const HISTORY = join(__dirname, '..', 'fixtures', 'histories', 'erasure-waited-then-completed.binpb');

describe('erasure of one person’s deliveries (Temporal dev server)', function () {
  this.timeout(120_000);
  const s = useErasureSuite(() => erasureEnvironment());
  // Each test its own people: a person's runs are found namespace-wide, whichever test's queue ran them.
  let ADA: string;
  let BOB: string;
  beforeEach(() => {
    [ADA, BOB] = [randomUUID(), randomUUID()];
  });

  it('deletes every run of the person’s deliveries and their log rows; another person’s in the same project still show', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const adaFall = await s.delivered(fall(projectId, ADA));
      const adaVital = await s.delivered(vital(projectId, ADA));
      const bobFall = await s.delivered(fall(projectId, BOB));
      // A redelivery of Ada's fall: the log row now names the redelivery's run; the first run stays in Temporal.
      const adaRedelivery = await s.redelivered(projectId, adaFall);
      // An invalid event of Ada's (no reasons): refused before the log, so only its PersonHash finds its history.
      const invalid = fall(projectId, ADA);
      const adaInvalid = await s.start({ ...invalid, payload: { ...invalid.payload, reasons: [] } });
      await assert.rejects(s.fx.env.client.workflow.getHandle(adaInvalid).result(), (error: WorkflowFailedError) =>
        /Invalid FALL_DETECTION event/.test(String(error.cause?.message)),
      );
      assert.deepEqual(await s.logRows([adaInvalid]), { deliveries: 0, attempts: 0 });
      const adaRuns = [adaFall, adaVital, adaRedelivery, adaInvalid];

      // What the log keeps of a person: the keyed hash, never the userUUID.
      const logged = await s.fx.database
        .db('deliveries')
        .whereIn('id', [adaFall, adaVital, bobFall])
        .orderBy('id')
        .select('id', 'person_hash');
      assert.deepEqual(
        Object.fromEntries(logged.map((row: { id: string; person_hash: string }) => [row.id, row.person_hash])),
        { [adaFall]: hashOf(ADA), [adaVital]: hashOf(ADA), [bobFall]: hashOf(BOB) },
      );
      assert.doesNotMatch(JSON.stringify(await s.fx.database.db('deliveries').select()), new RegExp(ADA));
      assert.deepEqual(await s.logRows([adaFall, adaVital]), { deliveries: 2, attempts: 3 });

      const id = await s.requestErasure(ADA);
      const done = await s.erasureReaches(id, 'completed');
      assert.deepEqual(done.counts, { deliveriesFound: 4, historiesDeleted: 4, logRowsDeleted: 2, stillOpen: 0 });
      assert.equal(done.personHash, hashOf(ADA));
      assert.ok(done.completedAt && done.completedAt >= done.requestedAt);

      for (const workflowId of adaRuns) assert.equal(await s.described(workflowId), false, `${workflowId} erased`);
      assert.deepEqual(await s.logRows([adaFall, adaVital]), { deliveries: 0, attempts: 0 });
      // Bob's delivery, in the same project, is as it was: in Temporal, in the log, with its attempt.
      assert.equal(await s.described(bobFall), true);
      assert.deepEqual(await s.logRows([bobFall]), { deliveries: 1, attempts: 1 });

      // The job's own state, queryable on its workflow (the API reads the same from its record).
      const state = await s.fx.env.client.workflow
        .getHandle(erasureWorkflowId(id))
        .query<ErasureState>(ERASURE_STATE_QUERY);
      assert.deepEqual(
        { status: state.status, historiesDeleted: state.historiesDeleted, logRowsDeleted: state.logRowsDeleted },
        { status: 'completed', historiesDeleted: 4, logRowsDeleted: 2 },
      );
    });
  });

  it('a fall still being retried is not cancelled: delivered, signed, then erased', async () => {
    const { projectId, secret } = await s.project();
    // The receiver is down: the fall is retried every 100-200 ms, and stays open.
    s.fx.receiver.fallback = { status: 503 };
    await s.withWorker(async () => {
      const inFlight = await s.start(fall(projectId, ADA));
      await s.fx.receiver.waitForRequests(2);
      const id = await s.requestErasure(ADA);
      const waiting = await s.erasureReaches(id, 'waiting-for-open-deliveries');
      assert.equal(waiting.counts.stillOpen, 1);
      assert.equal(waiting.counts.historiesDeleted, 0);
      assert.equal(await s.described(inFlight), true, 'the open delivery is left to run');
      assert.equal((await s.fx.env.client.workflow.getHandle(inFlight).describe()).status.name, 'RUNNING');

      // The receiver comes back: the fall is delivered, signed with the webhook's secret, as if nothing were asked.
      s.fx.receiver.fallback = { status: 200 };
      const result = (await s.fx.env.client.workflow.getHandle(inFlight).result()) as { status: string };
      assert.equal(result.status, 'delivered');
      const last = s.fx.receiver.requests.at(-1)!;
      assert.ok(independentSignatureValid(secret, last), 'the delivered fall is signed');
      assert.equal(JSON.parse(last.rawBody.toString()).userUUID, ADA);

      const done = await s.erasureReaches(id, 'completed');
      assert.deepEqual(
        { ...done.counts, attemptsSeen: s.fx.receiver.requests.length > 2 },
        { deliveriesFound: 1, historiesDeleted: 1, logRowsDeleted: 1, stillOpen: 0, attemptsSeen: true },
      );
      assert.equal(await s.described(inFlight), false);
      assert.deepEqual(await s.logRows([inFlight]), { deliveries: 0, attempts: 0 });
      if (process.env.RECORD_HISTORIES === '1') {
        const history = await s.fx.env.client.workflow.getHandle(erasureWorkflowId(id)).fetchHistory();
        writeFileSync(HISTORY, temporal.api.history.v1.History.encode(history).finish());
      }
    });
  });

  it('a person with more deliveries than one look takes: looks again at once, batch after batch, until none is left', async () => {
    const { projectId } = await s.project();
    // Two log rows and two listed runs a look.
    await s.withWorker(
      async () => {
        const runs: string[] = [];
        for (let i = 0; i < 5; i += 1)
          runs.push(await s.delivered(i % 2 ? vital(projectId, ADA) : fall(projectId, ADA)));
        const id = await s.requestErasure(ADA);
        const done = await s.erasureReaches(id, 'completed');
        assert.deepEqual(done.counts, { deliveriesFound: 5, historiesDeleted: 5, logRowsDeleted: 5, stillOpen: 0 });
        for (const run of runs) assert.equal(await s.described(run), false, run);
        const state = await s.fx.env.client.workflow
          .getHandle(erasureWorkflowId(id))
          .query<ErasureState>(ERASURE_STATE_QUERY);
        assert.ok(state.looks >= 3, `${state.looks} looks`);
      },
      { erasureLookBatch: 2 },
    );
  });

  it('a person with no deliveries: completes with zero counts, and nothing else changes', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const bobFall = await s.delivered(fall(projectId, BOB));
      const before = await s.fx.database.db('deliveries').orderBy('id').select();
      const id = await s.requestErasure(ADA);
      const done = await s.erasureReaches(id, 'completed');
      assert.deepEqual(done.counts, { deliveriesFound: 0, historiesDeleted: 0, logRowsDeleted: 0, stillOpen: 0 });
      assert.deepEqual(await s.fx.database.db('deliveries').orderBy('id').select(), before);
      assert.equal(await s.described(bobFall), true);
    });
  });

  it('emitWebhookEvent given the key tags the run with the person’s hash (PersonHash), never the userUUID; without it, nothing', async () => {
    const { projectId } = await s.project();
    const event = fall(projectId, ADA) as WebhookEvent;
    const tagged = await emitWebhookEvent(s.fx.env.client, event, {
      taskQueue: s.taskQueue,
      personHashKey: parsePersonHashKey(TEST_PERSON_HASH_KEY),
    });
    const plain = await emitWebhookEvent(s.fx.env.client, event, { taskQueue: s.taskQueue });
    const attribute = async (workflowId: string) =>
      (await s.fx.env.client.workflow.getHandle(workflowId).describe()).typedSearchAttributes.get(PersonHashKey);
    assert.equal(await attribute(tagged), hashOf(ADA));
    assert.equal(await attribute(plain), undefined);
    for (const workflowId of [tagged, plain]) await s.fx.env.client.workflow.getHandle(workflowId).terminate('test');
  });

  it('erases the deliveries logged with the person’s hash when they carry no PersonHash (a starter without the key)', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      // Started as the monitoring system's plain client would: no PersonHash; the worker logs the hash.
      const workflowId = `webhook-event-plain-${Date.now()}`;
      const handle = await s.fx.env.client.workflow.start('deliverWebhookEvent', {
        args: [fall(projectId, ADA)],
        taskQueue: s.taskQueue,
        workflowId,
      });
      await handle.result();
      const id = await s.requestErasure(ADA.toUpperCase());
      const done = await s.erasureReaches(id, 'completed');
      assert.deepEqual(done.counts, { deliveriesFound: 1, historiesDeleted: 1, logRowsDeleted: 1, stillOpen: 0 });
      await eventually('the plain run gone', async () => !(await s.described(workflowId)));
    });
  });
});

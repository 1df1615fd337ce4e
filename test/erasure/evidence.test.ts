// The evidence of an erasure and its entry points: the request's and the outcome's audit rows (the person only as
// their keyed hash), the trail still verifying, the certificate of destruction from the API and the CLI, the CLI's
// request and status, and bad input refused without changing anything.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../cli';
import * as store from '../../db';
import { ERASE_PERSON_WORKFLOW_TYPE, erasureWorkflowId, type ErasePersonInput } from '../../common/erasure';
import { TEST_PERSON_HASH_KEY, testAuditEnv, useTestAuditTrail } from '../support/audit-keys';
import { OPERATOR, erasureEnvironment, fall, hashOf, useErasureSuite, vital, type ErasureReply } from './fixture';

interface Certificate {
  certificate: string;
  erasureId: string;
  person: { hash: string; hashedWith: string };
  requestedBy: { kind: string; subject?: string };
  requestedAt: string;
  completedAt: string;
  counts: ErasureReply['counts'];
  deletedWorkflows: { workflowId: string; runId: string }[];
  erased: string[];
  notErased: string[];
  auditEvents: { id: string; at: string; action: string; outcome: string; hash: string }[];
}

describe('erasure: audit rows, certificate, CLI and bad input (Temporal dev server)', function () {
  this.timeout(120_000);
  const s = useErasureSuite(() => erasureEnvironment());
  // Each test its own people: a person's runs are found namespace-wide, whichever test's queue ran them.
  let ADA: string;
  let BOB: string;
  beforeEach(() => {
    [ADA, BOB] = [randomUUID(), randomUUID()];
  });
  const db = () => s.fx.database.db;
  const digestDir = mkdtempSync(join(tmpdir(), 'erasure-digests-'));
  after(() => useTestAuditTrail());

  /** The operator CLI in process, on the suite's database and Temporal, with the test keys. */
  async function cli(args: string[], env: Record<string, string> = {}) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(args, {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATABASE_URL: s.fx.database.url,
        TEMPORAL_ADDRESS: s.fx.env.address,
        TEMPORAL_TASK_QUEUE: s.taskQueue,
        ERASURE_RECHECK_MS: '1000',
        ...testAuditEnv(digestDir),
        PERSON_HASH_KEY: TEST_PERSON_HASH_KEY,
        ...env,
      },
      out: (line) => void out.push(line),
      err: (line) => void err.push(line),
    });
    return { code, stdout: out.join('\n'), stderr: err.join('\n') };
  }

  const erasureRows = async (erasureId: string) =>
    (await store.listAuditEvents(db(), { action: 'erasure.request', limit: 200 }))
      .concat(await store.listAuditEvents(db(), { action: 'erasure.complete', limit: 200 }))
      .filter((row) => row.changes?.erasureId === erasureId)
      .sort((a, b) => Number(a.id) - Number(b.id));

  it('the request and the completion each leave an audit row, the person as their hash; the certificate names both', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const runs = [await s.delivered(fall(projectId, ADA)), await s.delivered(vital(projectId, ADA))];
      const id = await s.requestErasure(ADA);
      const done = await s.erasureReaches(id, 'completed');

      const [request, completion] = await erasureRows(id);
      assert.ok(request && completion, 'two rows');
      assert.deepEqual(
        { action: request.action, outcome: request.outcome, actor: request.actor.subject, changes: request.changes },
        {
          action: 'erasure.request',
          outcome: 'ok',
          actor: OPERATOR,
          changes: { erasureId: id, personHash: hashOf(ADA) },
        },
      );
      assert.equal(request.actor.kind, 'member');
      assert.deepEqual(
        {
          action: completion.action,
          outcome: completion.outcome,
          kind: completion.actor.kind,
          changes: completion.changes,
        },
        {
          action: 'erasure.complete',
          outcome: 'ok',
          kind: 'system',
          changes: {
            erasureId: id,
            personHash: hashOf(ADA),
            status: 'completed',
            deliveriesFound: 2,
            historiesDeleted: 2,
            logRowsDeleted: 2,
            stillOpen: 0,
          },
        },
      );
      // Nowhere in the trail or in the erasure's records is the person's id.
      const everything = JSON.stringify([
        await db()('audit_events').select(),
        await db()('erasures').select(),
        await db()('erasure_executions').select(),
      ]);
      assert.doesNotMatch(everything, new RegExp(ADA, 'i'));
      // The operators read them in GET /audit too.
      const audit = await s.call<{ items: { action: string }[] }>('GET', '/audit?action=erasure.complete&limit=1', {
        user: OPERATOR,
      });
      assert.equal(audit.body.items[0]?.action, 'erasure.complete');

      const certificate = await s.call<Certificate>('GET', `/erasures/${id}/certificate`, { user: OPERATOR });
      assert.equal(certificate.status, 200);
      const c = certificate.body;
      assert.equal(c.certificate, 'erasure-of-personal-data');
      assert.deepEqual(
        [c.erasureId, c.person.hash, c.requestedBy],
        [id, hashOf(ADA), { kind: 'member', subject: OPERATOR }],
      );
      assert.deepEqual([c.requestedAt, c.completedAt, c.counts], [done.requestedAt, done.completedAt, done.counts]);
      assert.deepEqual(c.deletedWorkflows.map((w) => w.workflowId).sort(), [...runs].sort());
      assert.ok(c.deletedWorkflows.every((w) => /^[0-9a-f-]{36}$/.test(w.runId)));
      assert.deepEqual(
        c.auditEvents.map((e) => [e.id, e.action, e.outcome, e.hash]),
        [request, completion].map((e) => [e.id, e.action, e.outcome, e.hash]),
      );
      assert.ok(c.notErased.some((line) => /[Bb]ackups/.test(line)));

      // The same certificate from the CLI, to export; and the trail still verifies.
      const printed = await cli(['erasure', 'certificate', id]);
      assert.equal(printed.code, 0, printed.stderr);
      assert.deepEqual(JSON.parse(printed.stdout), c);
      const verified = await cli(['audit', 'verify', '--dir', mkdtempSync(join(tmpdir(), 'no-digests-'))]);
      assert.equal(verified.code, 0, verified.stderr);
      assert.match(verified.stdout, /^Audit trail intact: \d+ rows/);
      assert.deepEqual((await store.verifyAuditChain(db())).faults, []);
    });
  });

  it('webhooks erasure request and status: the same erasure from the CLI, the operator at the terminal named', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const run = await s.delivered(fall(projectId, BOB));
      const requested = await cli(['erasure', 'request', BOB]);
      assert.equal(requested.code, 0, requested.stderr);
      const [id, status] = requested.stdout.split('\t');
      assert.equal(status, 'pending');
      const done = await s.erasureReaches(id!, 'completed');
      assert.deepEqual(done.counts, { deliveriesFound: 1, historiesDeleted: 1, logRowsDeleted: 1, stillOpen: 0 });
      assert.equal(await s.described(run), false);
      const shown = await cli(['erasure', 'status', id!]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.deepEqual(JSON.parse(shown.stdout), done);
      const [request] = await erasureRows(id!);
      assert.equal(request?.actor.kind, 'cli');
    });
  });

  it('bad input changes nothing: a malformed userUUID names the field, an unknown erasure is a 404, a member a 403', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const run = await s.delivered(fall(projectId, ADA));
      const count = async () => ({
        erasures: (await db()('erasures').count<{ count: string }[]>('* as count'))[0]!.count,
        requests: (await store.listAuditEvents(db(), { action: 'erasure.request', limit: 200 })).length,
        deliveries: (await db()('deliveries').count<{ count: string }[]>('* as count'))[0]!.count,
      });
      const before = await count();

      for (const [body, pointer, detail] of [
        [{ userUUID: 'not-a-uuid' }, '/userUUID', /must be a UUID/],
        [{ userUUID: `${ADA}0` }, '/userUUID', /must be a UUID/],
        [{ userUUID: 42 }, '/userUUID', /must be string/],
        [{}, '/', /must have required property 'userUUID'/],
        [{ userUUID: ADA, projectId }, '/', /must NOT have additional property projectId/],
        [{ userUUID: '00000000-0000-0000-0000-000000000000' }, '/userUUID', /the nil UUID names nobody/],
      ] as const) {
        const reply = await s.call<{ detail: string; errors: { pointer: string; detail: string }[] }>(
          'POST',
          '/erasures',
          {
            user: OPERATOR,
            body,
          },
        );
        assert.equal(reply.status, 400, JSON.stringify(body));
        assert.equal(reply.contentType, 'application/problem+json');
        assert.equal(reply.body.errors[0]?.pointer, pointer, JSON.stringify(reply.body));
        assert.match(reply.body.errors[0].detail, detail);
      }
      const notJson = await s.call('POST', '/erasures', { user: OPERATOR, raw: '{"userUUID":' });
      assert.equal(notJson.status, 400);

      const member = await s.call<{ detail: string }>('POST', '/erasures', { user: 'alice', body: { userUUID: ADA } });
      assert.equal(member.status, 403);
      assert.match(member.body.detail, /not an operator/);
      assert.equal((await s.call('POST', '/erasures', { body: { userUUID: ADA } })).status, 401);

      for (const path of [
        '/erasures/3f2b8c1e-0000-4c6b-8e2f-000000000000',
        '/erasures/not-an-id',
        '/erasures/3f2b8c1e-0000-4c6b-8e2f-000000000000/certificate',
      ]) {
        const unknown = await s.call<{ detail: string }>('GET', path, { user: OPERATOR });
        assert.equal(unknown.status, 404, path);
        assert.equal(unknown.contentType, 'application/problem+json');
        assert.match(unknown.body.detail, /^No erasure with id .+ was found$/);
      }
      assert.equal((await s.call('GET', '/erasures/not-an-id', { user: 'alice' })).status, 403);

      const badCli = await cli(['erasure', 'request', 'not-a-uuid']);
      assert.equal(badCli.code, 2);
      assert.match(badCli.stderr, /<userUUID> must be a UUID/);
      const unknownCli = await cli(['erasure', 'status', 'no-such-erasure']);
      assert.equal(unknownCli.code, 1);
      assert.match(unknownCli.stderr, /No erasure with id no-such-erasure was found/);

      assert.deepEqual(await count(), before, 'no erasure recorded or started, no delivery touched');
      assert.equal(await s.described(run), true);
    });
  });

  it('an erasePerson started by hand is refused unless it is a recorded request, run as its own workflow: nothing is erased', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const bobRun = await s.delivered(fall(projectId, BOB));
      const id = await s.requestErasure(ADA);
      await s.erasureReaches(id, 'completed');
      await s.fx.env.client.workflow.getHandle(erasureWorkflowId(id)).result();
      const forged = (input: Partial<ErasePersonInput>, workflowId: string) =>
        s.fx.env.client.workflow.execute(ERASE_PERSON_WORKFLOW_TYPE, {
          taskQueue: s.taskQueue,
          workflowId,
          args: [{ erasureId: id, personHash: hashOf(BOB), recheckAfterMs: 1_000, maxRecheckAfterMs: 1_000, ...input }],
        });
      const refused = (why: RegExp) => (error: { cause?: { cause?: { message?: string; type?: string } } }) =>
        error.cause?.cause?.type === 'ErasureNotRecorded' && why.test(String(error.cause.cause.message));
      // A recorded erasure's id with another person's hash, under its own workflow id (reused once it completed).
      await assert.rejects(forged({}, erasureWorkflowId(id)), refused(/was recorded for another person/));
      // Under a workflow id that is not the erasure's.
      await assert.rejects(
        forged({ personHash: hashOf(ADA) }, `erasure-by-hand-${id}`),
        refused(/runs only as workflow/),
      );
      assert.equal(await s.described(bobRun), true);
      assert.deepEqual(await s.logRows([bobRun]), { deliveries: 1, attempts: 1 });
      const record = await s.status(id);
      assert.equal(record.body.status, 'completed', 'the recorded erasure is as it was');
      assert.equal((await erasureRows(id)).length, 2, 'no further audit row');
    });
  });

  it('no certificate before completion: a 409 while the erasure waits for a delivery still being retried', async () => {
    const { projectId } = await s.project();
    s.fx.receiver.fallback = { status: 503 };
    await s.withWorker(async () => {
      const inFlight = await s.start(fall(projectId, ADA));
      await s.fx.receiver.waitForRequests(1);
      const id = await s.requestErasure(ADA);
      await s.erasureReaches(id, 'waiting-for-open-deliveries');
      const early = await s.call<{ detail: string }>('GET', `/erasures/${id}/certificate`, { user: OPERATOR });
      assert.equal(early.status, 409);
      assert.match(early.body.detail, /has not completed \(it is waiting-for-open-deliveries\)/);
      const cliEarly = await cli(['erasure', 'certificate', id]);
      assert.equal(cliEarly.code, 1);
      assert.match(cliEarly.stderr, /has not completed/);
      s.fx.receiver.fallback = { status: 200 };
      await s.fx.env.client.workflow.getHandle(inFlight).result();
      await s.erasureReaches(id, 'completed');
      assert.equal((await s.call('GET', `/erasures/${id}/certificate`, { user: OPERATOR })).status, 200);
    });
  });
});

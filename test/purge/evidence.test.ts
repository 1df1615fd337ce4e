// The evidence of a purge and its entry points: the request's and the outcome's audit rows (who, when, what was asked,
// counts; nothing of a person), the trail still verifying, the certificate of destruction from the API and the CLI,
// `webhooks project purge` with its confirmation, `purge status`, bad input refused without changing anything, and a
// `purgeProject` started by hand refused.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../cli';
import * as store from '../../db';
import { PURGE_PROJECT_WORKFLOW_TYPE, purgeWorkflowId } from '../../common/purge';
import { testAuditEnv, useTestAuditTrail } from '../support/audit-keys';
import { MEMBER, OPERATOR, fall, usePurgeSuite, type PurgeCountsReply, type PurgeReply } from './fixture';

interface Certificate {
  certificate: string;
  purgeId: string;
  projectId: string;
  requestedBy: { kind: string; subject?: string };
  requestedAt: string;
  completedAt: string;
  counts: PurgeCountsReply;
  dataKeysDestroyed: string[];
  temporalBatchJobs: { jobId: string; deleted: number; failed: number }[];
  erased: string[];
  notErased: string[];
  auditEvents: { id: string; at: string; action: string; outcome: string; hash: string }[];
}

describe('purge: audit rows, certificate, CLI and bad input (Temporal dev server)', function () {
  this.timeout(180_000);
  const s = usePurgeSuite();
  const digestDir = mkdtempSync(join(tmpdir(), 'purge-digests-'));
  after(() => useTestAuditTrail());

  /** The operator CLI in process, on the suite's database and Temporal, with the test keys; `typed` is its stdin. */
  async function cli(args: string[], typed?: string) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(args, {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATABASE_URL: s.fx.database.url,
        TEMPORAL_ADDRESS: s.fx.env.address,
        TEMPORAL_TASK_QUEUE: s.taskQueue,
        // The shortest attempt there is: the CLI's purge waits its deadline (5.1 s) before deleting the rows.
        WEBHOOK_TIMEOUT_MS: '100',
        ...testAuditEnv(digestDir),
      },
      out: (line) => void out.push(line),
      err: (line) => void err.push(line),
      readLine: (prompt) => {
        err.push(prompt);
        return Promise.resolve(typed);
      },
    });
    return { code, stdout: out.join('\n'), stderr: err.join('\n') };
  }

  const count = async (table: string) =>
    Number((await s.db()(table).count<{ count: string }[]>('* as count'))[0]!.count);

  it('the request and the completion each leave an audit row; the certificate names them, its keys and its jobs; the trail verifies', async () => {
    const { projectId, dataKeyId } = await s.project();
    await s.withWorker(async () => {
      const delivered = [await s.delivered(fall(projectId)), await s.delivered(fall(projectId))];
      const id = await s.requestPurge(projectId);
      const done = await s.purgeReaches(id, 'completed');

      const rows = (await store.listAuditEvents(s.db(), { projectId, limit: 200 }))
        .filter((row) => row.action.startsWith('purge.'))
        .sort((a, b) => Number(a.id) - Number(b.id));
      const [request, completion] = rows;
      assert.equal(rows.length, 2);
      assert.deepEqual(
        [request!.action, request!.outcome, request!.actor.kind, request!.actor.subject, request!.changes],
        ['purge.request', 'ok', 'member', OPERATOR, { purgeId: id }],
      );
      assert.deepEqual(
        [completion!.action, completion!.outcome, completion!.actor.kind, completion!.projectId],
        ['purge.complete', 'ok', 'system', projectId],
      );
      assert.deepEqual(completion!.changes, {
        purgeId: id,
        status: 'completed',
        step: 'done',
        ...done.counts,
        dataKeysDestroyed: [dataKeyId],
        batchJobs: (await store.findPurge(s.db(), id))!.batchJobs.map((job) => job.jobId),
      });
      // Nothing of the project's people in the purge's rows or its record: no userUUID, e-mail or name.
      const written = JSON.stringify([rows, await s.db()('purges').where({ id }).select()]);
      assert.doesNotMatch(written, /person@example\.com|Pat|Doe|ops@example\.com|gk-secret/);

      const certificate = await s.call<Certificate>('GET', `/purges/${id}/certificate`, { user: OPERATOR });
      assert.equal(certificate.status, 200);
      const c = certificate.body;
      assert.equal(c.certificate, 'purge-of-project-data');
      assert.deepEqual(
        [c.purgeId, c.projectId, c.requestedBy, c.requestedAt, c.completedAt, c.counts],
        [id, projectId, { kind: 'member', subject: OPERATOR }, done.requestedAt, done.completedAt, done.counts],
      );
      assert.equal(c.counts.executionsDeleted, delivered.length);
      assert.deepEqual(c.dataKeysDestroyed, [dataKeyId]);
      assert.ok(c.temporalBatchJobs.length >= 1 && c.temporalBatchJobs[0]!.jobId === `purge-${id}-1`);
      assert.deepEqual(
        c.auditEvents.map((e) => [e.id, e.action, e.outcome, e.hash]),
        [request, completion].map((e) => [e!.id, e!.action, e!.outcome, e!.hash]),
      );
      assert.ok(c.notErased.some((line) => /[Bb]ackups/.test(line)));

      // The same certificate from the CLI, to hand over; and the trail still verifies.
      const printed = await cli(['purge', 'certificate', id]);
      assert.equal(printed.code, 0, printed.stderr);
      assert.deepEqual(JSON.parse(printed.stdout), c);
      const verified = await cli(['audit', 'verify', '--dir', mkdtempSync(join(tmpdir(), 'no-digests-'))]);
      assert.equal(verified.code, 0, verified.stderr);
      assert.match(verified.stdout, /^Audit trail intact: \d+ rows/);
      assert.deepEqual((await store.verifyAuditChain(s.db())).faults, []);
    });
  });

  it('webhooks project purge: asks for the project id again, waits and prints the outcome; the operator at the terminal named', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const run = await s.delivered(fall(projectId));
      const before = await count('purges');
      const mistyped = await cli(['project', 'purge', projectId], `${projectId}x`);
      assert.equal(mistyped.code, 1);
      assert.match(mistyped.stderr, /Type the project id again to confirm/);
      assert.match(
        mistyped.stderr,
        new RegExp(`Not confirmed: what was typed is not ${projectId}; nothing was purged`),
      );
      const noInput = await cli(['project', 'purge', projectId]);
      assert.equal(noInput.code, 2);
      assert.match(noInput.stderr, /confirm by typing the project id on stdin, or pass --yes/);
      assert.equal(await count('purges'), before, 'nothing recorded unconfirmed');
      assert.equal(await s.described(run), true);

      const purged = await cli(['project', 'purge', projectId], projectId);
      assert.equal(purged.code, 0, purged.stderr);
      const [line, ...json] = purged.stdout.split('\n');
      const [id, status] = line!.split('\t');
      assert.equal(status, 'pending');
      const done = JSON.parse(json.join('\n')) as PurgeReply;
      assert.deepEqual([done.id, done.status, done.counts.executionsDeleted], [id, 'completed', 1]);
      assert.equal(await s.described(run), false);
      const shown = await cli(['purge', 'status', id!]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.deepEqual(JSON.parse(shown.stdout), done);
      const [request] = await store.purgeAuditEvents(s.db(), { id: id!, projectId });
      const row = (await store.listAuditEvents(s.db(), { projectId, limit: 10 })).find((r) => r.id === request!.id);
      assert.equal(row?.actor.kind, 'cli');
    });
  });

  it('webhooks project purge --yes --no-wait: prints the id at once; asked again while it runs, the same purge', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      await s.delivered(fall(projectId));
      const started = await cli(['project', 'purge', projectId, '--yes', '--no-wait']);
      assert.equal(started.code, 0, started.stderr);
      const [id, status] = started.stdout.split('\t');
      assert.equal(status, 'pending');
      assert.doesNotMatch(started.stderr, /Type the project id/);
      const again = await cli(['project', 'purge', projectId, '--yes', '--no-wait']);
      if (again.code === 0) {
        assert.equal(again.stdout.split('\t')[0], id, 'the same purge, not another');
        assert.match(again.stderr, /already under way/);
      } else assert.match(again.stderr, /No project with id/, 'or it had completed already');
      await s.purgeReaches(id!, 'completed');
      assert.equal((await s.db()('purges').where({ project_id: projectId })).length, 1);
    });
  });

  it('webhooks project purge run again after its purge failed: the same purge, run again from where it stopped', async () => {
    const { projectId } = await s.project();
    // No worker yet: the purge is recorded and its workflow waits; then it is made to have failed at its first step.
    const started = await cli(['project', 'purge', projectId, '--yes', '--no-wait']);
    assert.equal(started.code, 0, started.stderr);
    const [id] = started.stdout.split('\t');
    await s.fx.env.client.workflow.getHandle(purgeWorkflowId(id!)).terminate('a worker that never came (a test)');
    await store.closePurge(s.db(), id!, { status: 'failed', failure: 'stopped by a test' });
    await s.withWorker(async () => {
      const again = await cli(['project', 'purge', projectId, '--yes']);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, new RegExp(`purge ${id} had failed: run again from its step executions`));
      const [line, ...json] = again.stdout.split('\n');
      assert.equal(line, `${id}\tpending`);
      const done = JSON.parse(json.join('\n')) as PurgeReply;
      assert.deepEqual([done.id, done.status, done.failure], [id, 'completed', undefined]);
      const actions = (await store.purgeAuditEvents(s.db(), { id: id!, projectId })).map((e) => e.action);
      assert.deepEqual(actions, ['purge.request', 'purge.resume', 'purge.complete']);
    });
  });

  it('bad input changes nothing: an unknown project is a 404, a malformed id a 400, a member a 403; the CLI says the same', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const run = await s.delivered(fall(projectId));
      const snapshot = async () => ({
        purges: await count('purges'),
        audit: await count('audit_events'),
        deliveries: await count('deliveries'),
        rows: await s.rowsOf(projectId),
      });
      const before = await snapshot();
      const lastAudit = Number((await s.db()('audit_events').max<{ max: string }[]>('id as max'))[0]!.max ?? 0);

      const unknown = await s.call<{ detail: string }>('POST', '/purges', {
        user: OPERATOR,
        body: { projectId: 'no-such-project' },
      });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.contentType, 'application/problem+json');
      assert.equal(unknown.body.detail, 'No project with id no-such-project was found');
      for (const [body, pointer, detail] of [
        [{ projectId: 'has a space' }, '/projectId', /must be 1 to \d+ characters from A-Z/],
        [{ projectId: "x' OR ProjectId != '" }, '/projectId', /must be 1 to \d+ characters from A-Z/],
        [{ projectId: '' }, '/projectId', /must NOT have fewer than 1 characters/],
        [{ projectId: 42 }, '/projectId', /must be string/],
        [{}, '/', /must have required property 'projectId'/],
        [{ projectId, force: true }, '/', /must NOT have additional property force/],
      ] as const) {
        const reply = await s.call<{ errors: { pointer: string; detail: string }[] }>('POST', '/purges', {
          user: OPERATOR,
          body,
        });
        assert.equal(reply.status, 400, JSON.stringify(body));
        assert.equal(reply.contentType, 'application/problem+json');
        assert.equal(reply.body.errors[0]?.pointer, pointer, JSON.stringify(reply.body));
        assert.match(reply.body.errors[0].detail, detail);
      }
      assert.equal((await s.call('POST', '/purges', { user: OPERATOR, raw: '{"projectId":' })).status, 400);
      const member = await s.call<{ detail: string }>('POST', '/purges', { user: MEMBER, body: { projectId } });
      assert.equal(member.status, 403);
      assert.match(member.body.detail, /not an operator/);
      assert.equal((await s.call('POST', '/purges', { body: { projectId } })).status, 401);
      for (const path of [`/purges/${randomUUID()}`, '/purges/not-an-id', `/purges/${randomUUID()}/certificate`]) {
        const missing = await s.call<{ detail: string }>('GET', path, { user: OPERATOR });
        assert.equal(missing.status, 404, path);
        assert.equal(missing.contentType, 'application/problem+json');
        assert.match(missing.body.detail, /^No purge with id .+ was found$/);
      }

      const unknownCli = await cli(['project', 'purge', 'no-such-project', '--yes']);
      assert.equal(unknownCli.code, 1);
      assert.match(unknownCli.stderr, /No project with id no-such-project was found/);
      const malformedCli = await cli(['project', 'purge', 'has a space', '--yes']);
      assert.equal(malformedCli.code, 2);
      assert.match(malformedCli.stderr, /<projectId> must be 1 to/);
      const statusCli = await cli(['purge', 'status', 'no-such-purge']);
      assert.equal(statusCli.code, 1);
      assert.match(statusCli.stderr, /No purge with id no-such-purge was found/);

      // 403s are audited as refusals; nothing else was written, recorded, started or deleted.
      const after = await snapshot();
      assert.deepEqual({ ...after, audit: undefined }, { ...before, audit: undefined });
      const written = (await store.listAuditEvents(s.db(), { limit: 200 })).filter(
        (row) => Number(row.id) > lastAudit && row.action.startsWith('purge.'),
      );
      assert.deepEqual(written, [], 'no purge.* row');
      assert.equal(await s.described(run), true);
    });
  });

  it('a purgeProject started by hand is refused unless it is a recorded purge, run as its own workflow: nothing is removed', async () => {
    const victim = await s.project();
    await s.withWorker(async () => {
      const run = await s.delivered(fall(victim.projectId));
      const before = await s.rowsOf(victim.projectId);
      const forged = (input: { purgeId: string; projectId: string }, workflowId: string) =>
        s.fx.env.client.workflow.execute(PURGE_PROJECT_WORKFLOW_TYPE, {
          taskQueue: s.taskQueue,
          workflowId,
          args: [input],
        });
      const refused = (why: RegExp) => (error: { cause?: { cause?: { message?: string; type?: string } } }) =>
        error.cause?.cause?.type === 'PurgeNotRecorded' && why.test(String(error.cause.cause.message));
      // A recorded purge of another project, run for the victim; and under a workflow id that is not the purge's.
      // (An id no purge recorded is retried while a request's transaction may still commit, then fails the same way.)
      const other = await s.project();
      const id = await s.requestPurge(other.projectId);
      await s.purgeReaches(id, 'completed');
      await s.fx.env.client.workflow.getHandle(purgeWorkflowId(id)).result();
      await assert.rejects(
        forged({ purgeId: id, projectId: victim.projectId }, purgeWorkflowId(id)),
        refused(/was recorded for another project/),
      );
      await assert.rejects(
        forged({ purgeId: id, projectId: other.projectId }, `purge-by-hand-${id}`),
        refused(/runs only as workflow/),
      );
      // Run again by hand once completed (a project of that id may be another customer's by then).
      await store.addProject(s.db(), other.projectId);
      await assert.rejects(
        forged({ purgeId: id, projectId: other.projectId }, purgeWorkflowId(id)),
        refused(/has completed/),
      );
      assert.equal((await s.rowsOf(other.projectId)).projects, 1, 'the new project of that id is kept');
      assert.equal(await s.described(run), true);
      assert.deepEqual(await s.rowsOf(victim.projectId), before);
      assert.equal((await s.status(id)).body.status, 'completed', 'the recorded purge is as it was');
    });
  });
});

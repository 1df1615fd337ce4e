// Least privilege in the database: `webhooks migrate`, run as the owner, grants the API's and the workers' LOGIN roles
// what db/roles.ts lists; each process, connected as its own role over a real connection, does its work and is refused
// (SQLSTATE 42501) what it does not need, above all changing or removing audit rows.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import pino from 'pino';
import { startApi } from '../../api/server';
import { main } from '../../cli';
import { loadConfig } from '../../common/config';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { migrationSource } from '../../db/migrations';
import { testAuditEnv } from '../support/audit-keys';

// The rows' chains alone: another suite of this process may have installed a digest folder of other databases.
const emptyDigestDir = () => mkdtempSync(join(tmpdir(), 'roles-digests-'));
// What neither role may do to the trail: only the owner's prune removes rows.
const TRAIL_REWRITES = ['UPDATE audit_events SET action = action', 'DELETE FROM audit_events', 'TRUNCATE audit_events'];
import { createTestDatabase, type TestDatabase } from '../support/postgres';

const secretBox = createSecretBox(randomBytes(32));

/** Runs the operator CLI in process against `url`. */
async function cli(args: string[], url: string, env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: url, ...env },
    out: (line) => void out.push(line),
    err: (line) => void err.push(line),
  });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

/** The URL of `url`'s database with another user and password. */
function as(url: string, user: string, password: string): string {
  const parsed = new URL(url);
  parsed.username = user;
  parsed.password = password;
  return parsed.toString();
}

const refused = (error: { code?: string }) => error.code === '42501';
/** Each statement is refused with 42501 (insufficient privilege) on this role's connection. */
async function refusesEach(db: Knex, statements: string[]): Promise<void> {
  for (const statement of statements) await assert.rejects(db.raw(statement), refused, statement);
}

describe('database roles: the API and the workers connect as roles of their own', function () {
  this.timeout(60_000);
  const suffix = randomBytes(4).toString('hex');
  const apiRole = `webhooks_api_${suffix}`;
  const workerRole = `webhooks_worker_${suffix}`;
  const password = randomBytes(12).toString('hex');
  let t: TestDatabase;
  let asApi: Knex;
  let asWorker: Knex;
  const roleEnv = { DATABASE_API_ROLE: apiRole, DATABASE_WORKER_ROLE: workerRole };

  before(async () => {
    t = await createTestDatabase();
    for (const role of [apiRole, workerRole]) await t.db.raw(`CREATE ROLE ?? LOGIN PASSWORD '${password}'`, [role]); // hex: no quote to escape
    const migrated = await cli(['migrate'], t.url, roleEnv);
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, new RegExp(`Granted the api's role ${apiRole}`));
    asApi = store.createDb(as(t.url, apiRole, password), { max: 2 });
    asWorker = store.createDb(as(t.url, workerRole, password), { max: 2 });
  });
  after(async () => {
    await asApi?.destroy();
    await asWorker?.destroy();
    for (const role of [apiRole, workerRole]) {
      await t?.db.raw('DROP OWNED BY ??', [role]).catch(() => undefined);
      await t?.db.raw('DROP ROLE IF EXISTS ??', [role]);
    }
    await t?.destroy();
  });

  it('connects as the roles themselves, neither owner nor superuser', async () => {
    for (const [db, role] of [
      [asApi, apiRole],
      [asWorker, workerRole],
    ] as const) {
      const { rows } = await db.raw<{ rows: { me: string; superuser: boolean }[] }>(
        'SELECT current_user AS me, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser',
      );
      assert.deepEqual(rows[0], { me: role, superuser: false });
    }
  });

  it('the API role registers a webhook, appends and reads audit rows, but never changes or removes them', async () => {
    const projectId = `roles-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    assert.deepEqual(await store.projectAccess(asApi, projectId, 'alice'), { projectExists: true, isMember: true });
    const created = await asApi.transaction(async (trx) => {
      const made = await store.createRegistration(trx, secretBox, {
        projectId,
        url: 'https://r.example/hook',
        types: ['FALL_DETECTION'],
      });
      await store.appendAuditEvent(trx, {
        actor: { kind: 'member', subject: 'alice' },
        action: 'webhook.register',
        outcome: 'ok',
        projectId,
        registrationId: made?.row.id,
      });
      return made;
    });
    assert.ok(created);
    assert.equal((await store.findRegistration(asApi, projectId))?.id, created.row.id);
    const listed = await store.listAuditEvents(asApi, { projectId, limit: 10 });
    assert.deepEqual(
      listed.map((row) => row.action),
      ['webhook.register'],
    );
    await refusesEach(asApi, [
      ...TRAIL_REWRITES,
      // Members are the CLI's (the owner's), and so are the schema's tables.
      `INSERT INTO project_members (project_id, user_id) VALUES ('${projectId}', 'mallory')`,
      'DELETE FROM projects',
      'DELETE FROM deliveries',
    ]);
    assert.equal((await store.verifyAuditChain(t.db, { digestDir: emptyDigestDir() })).fault, undefined);
    assert.equal((await store.listAuditEvents(t.db, { projectId, limit: 10 })).length, 1);
    // Deleting a registration cascades to its breaker row as the tables' owner: the role needs no grant for it.
    await store.recordFailure(
      t.db,
      created.row.id,
      { failureThreshold: 1, openMs: 60_000, maxOpenMs: 60_000 },
      { message: 'Receiver answered HTTP 500', statusCode: 500 },
    );
    assert.equal((await store.removeRegistration(asApi, projectId))?.id, created.row.id);
    assert.equal(await store.findBreaker(t.db, created.row.id), undefined);
  });

  it('the worker role logs a delivery and its attempt, appends a system audit row, and is refused the rest', async () => {
    const projectId = `roles-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId);
    const key = { id: `webhook-event-${randomUUID()}`, projectId, type: 'FALL_DETECTION', workflowId: 'wf-roles' };
    await store.upsertDelivery(asWorker, key, 'pending');
    const logged = await store.recordDeliveryAttempt(asWorker, key, {
      runAttempt: 1,
      statusCode: 200,
      durationMs: 3,
      delivered: true,
    });
    assert.equal(logged?.status, 'delivered');
    assert.equal((await store.listDeliveryAttempts(t.db, logged)).length, 1);
    // A notice's row references its project: the key check runs as the owner, the role reads no project.
    assert.equal(await store.claimNotice(asWorker, projectId, 'breaker-open'), true);
    await asWorker.transaction((trx) =>
      store.appendAuditEvent(trx, { actor: { kind: 'system' }, action: 'breaker.open', outcome: 'ok', projectId }),
    );
    await refusesEach(asWorker, [
      ...TRAIL_REWRITES,
      `INSERT INTO project_members (project_id, user_id) VALUES ('${projectId}', 'mallory')`,
      // A purge deletes a project's rows; it never makes or changes one, nor removes a purge's record.
      `INSERT INTO projects (id) VALUES ('${projectId}-2')`,
      'UPDATE projects SET name = name',
      'INSERT INTO webhook_registrations (id) VALUES (gen_random_uuid())',
      'DELETE FROM purges',
    ]);
    await assert.rejects(store.addMember(asWorker, projectId, 'mallory'), refused);
    assert.equal((await store.verifyAuditChain(t.db, { digestDir: emptyDigestDir() })).fault, undefined);
  });

  it("the owner's commands run in production without keys, as compose's migrate service runs them; not as the API", async () => {
    const projectId = `roles-${randomUUID().slice(0, 8)}`;
    // Without the payload and secret keys; the audited commands chain and sign their rows with the audit keys.
    const production = { NODE_ENV: 'production', ...testAuditEnv() };
    for (const args of [
      ['project', 'add', projectId],
      ['member', 'add', projectId, 'bob'],
      ['audit', 'prune'],
    ]) {
      const result = await cli(args, t.url, production);
      assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
    }
    assert.deepEqual(await store.projectAccess(t.db, projectId, 'bob'), { projectExists: true, isMember: true });
    const asApiRole = await cli(['member', 'add', projectId, 'mallory'], as(t.url, apiRole, password), production);
    assert.notEqual(asApiRole.code, 0);
    assert.match(asApiRole.stderr, /permission denied for table project_members/);
    assert.deepEqual(await store.projectAccess(t.db, projectId, 'mallory'), { projectExists: true, isMember: false });
  });

  it('each role runs every query function its process calls (db/roles.ts is enough for each)', async () => {
    const projectId = `roles-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    const made = await store.createRegistration(asApi, secretBox, {
      projectId,
      url: 'https://r.example/hook',
      types: ['FALL_DETECTION'],
    });
    const registrationId = made!.row.id;
    const key = { id: `webhook-event-${randomUUID()}`, projectId, type: 'FALL_DETECTION', workflowId: 'wf-all' };
    const holder = randomUUID();
    const erasureId = randomUUID();
    const personHash = 'ab'.repeat(32);
    const purgeId = randomUUID();
    const purged = `roles-${randomUUID().slice(0, 8)}`;
    await store.addProject(t.db, purged);
    await store.addMember(t.db, purged, 'alice');
    const api: Record<string, () => Promise<unknown>> = {
      insertErasure: () =>
        store.insertErasure(asApi, { id: erasureId, personHash, requestedBy: { kind: 'member', subject: 'ops' } }),
      findErasure: () => store.findErasure(asApi, erasureId),
      registerPurgedProject: () =>
        store.createRegistration(asApi, secretBox, {
          projectId: purged,
          url: 'https://r.example/p',
          types: ['FALL_DETECTION'],
        }),
      purgedProjectContacts: () =>
        store.setNotificationContacts(asApi, purged, { url: 'https://n.example/', emails: ['ops@example.com'] }),
      insertPurge: () =>
        store.insertPurge(asApi, { id: purgeId, projectId: purged, requestedBy: { kind: 'member', subject: 'ops' } }),
      unfinishedPurge: () => store.unfinishedPurge(asApi, purged),
      reopenPurge: () => store.reopenPurge(asApi, purgeId),
      portalLinkState: () => store.portalLinkState(asApi, projectId, 'alice'),
      revokePortalLinks: () => store.revokePortalLinks(asApi, projectId),
      updateRegistration: () => store.updateRegistration(asApi, projectId, { types: ['FALL_DETECTION'] }),
      rotateRegistrationSecret: () => store.rotateRegistrationSecret(asApi, secretBox, projectId, 60),
      findRegistrationForUpdate: () =>
        asApi.transaction((trx) => store.findRegistration(trx, projectId, { forUpdate: true })),
      pauseRegistration: () => store.pauseRegistration(asApi, projectId, 60_000),
      resumeRegistration: () => store.resumeRegistration(asApi, projectId),
      admitSend: () => store.admitSend(asApi, projectId, 'test', { perWindow: 5, windowMs: 60_000, leaseMs: 5_000 }),
      extendSendSlot: () => store.extendSendSlot(asApi, projectId, 'test', holder, 5_000),
      releaseSendSlot: () => store.releaseSendSlot(asApi, projectId, 'test', holder),
      setNotificationContacts: () =>
        store.setNotificationContacts(asApi, projectId, { url: 'https://n.example/', emails: [] }),
      findNotificationContacts: () => store.findNotificationContacts(asApi, projectId),
      clearNotificationContacts: () => store.setNotificationContacts(asApi, projectId, { url: null, emails: [] }),
      readAlertState: () => store.readAlertState(asApi),
      findBreaker: () => store.findBreaker(asApi, registrationId),
      findEndpointHealth: () => store.findEndpointHealth(asApi, projectId),
      addPortalLink: () =>
        store.addPortalLink(
          asApi,
          { id: randomUUID(), projectId, generation: 0, expiresAt: new Date(Date.now() + 60_000) },
          50,
        ),
      queueNotice: () =>
        store.queueNotice(asApi, { projectId, condition: 'pause-started', facts: { pausedBy: 'member alice' } }),
      appendAuditEvent: () =>
        store.appendAuditEvent(asApi, {
          actor: { kind: 'member', subject: 'alice' },
          action: 'x',
          outcome: 'ok',
          projectId,
        }),
    };
    const worker: Record<string, () => Promise<unknown>> = {
      findRegistration: () => store.findRegistration(asWorker, projectId),
      upsertDelivery: () => store.upsertDelivery(asWorker, key, 'pending'),
      recordDeliveryAttempt: () =>
        store.recordDeliveryAttempt(asWorker, key, { runAttempt: 1, statusCode: 500, durationMs: 2, delivered: false }),
      markDeliveryFailed: () => store.markDeliveryFailed(asWorker, key, 'Receiver answered HTTP 500'),
      recordEndpointFailure: () => store.recordEndpointFailure(asWorker, projectId, 'Receiver answered HTTP 500'),
      claimEpisodeAlert: () => store.claimEpisodeAlert(asWorker, projectId),
      findEndpointHealth: () => store.findEndpointHealth(asWorker, projectId),
      admitAttempt: () => store.admitAttempt(asWorker, registrationId, 5_000),
      recordFailure: () =>
        store.recordFailure(
          asWorker,
          registrationId,
          { failureThreshold: 1, openMs: 1, maxOpenMs: 1 },
          { message: 'Receiver answered HTTP 500', statusCode: 500 },
        ),
      recordSuccess: () => store.recordSuccess(asWorker, registrationId),
      addBreakerWaiter: () => store.addBreakerWaiter(asWorker, registrationId, 'wf-waiter', 1),
      holdDelivery: () => store.holdDelivery(asWorker, registrationId, 'wf-held', 1, 0),
      takeAndForgetWaiters: async () =>
        store.forgetWokenWaiters(
          asWorker,
          await store.takeWaitersToWake(asWorker, { perSecond: 10, probeLeaseMs: 5_000, wakeLeaseMs: 5_000 }),
        ),
      eraseExpiredPreviousSecrets: () => store.eraseExpiredPreviousSecrets(asWorker),
      endExpiredPauses: () => store.endExpiredPauses(asWorker),
      expiringCertificates: () => store.expiringCertificates(asWorker, 86_400_000),
      findNotificationContacts: () => store.findNotificationContacts(asWorker, projectId),
      maintainDeliveryLog: () => store.maintainDeliveryLog(asWorker, 30),
      forgetAttemptedWaiter: () => store.forgetAttemptedWaiter(asWorker, registrationId, 'wf-waiter', 2),
      forgetUnregisteredWaiter: () => store.forgetUnregisteredWaiter(asWorker, projectId, 'wf-gone'),
      takeQueuedNotices: () => store.takeQueuedNotices(asWorker),
      queueNotice: () =>
        store.queueNotice(asWorker, { projectId, condition: 'pause-ended', facts: { endedBy: 'its end time' } }),
      appendAuditEvent: () =>
        store.appendAuditEvent(asWorker, { actor: { kind: 'system' }, action: 'x', outcome: 'ok', projectId }),
      recordAuditDigest: () =>
        asWorker('audit_digests').insert({ sequence: 1_000_000, hash: '0'.repeat(64), reason: 'schedule' }),
      erasePersonDeliveryRows: async () => {
        const erased = { ...key, id: `webhook-event-${randomUUID()}`, personHash };
        await store.upsertDelivery(asWorker, erased, 'delivered');
        await store.recordDeliveryAttempt(asWorker, erased, {
          runAttempt: 1,
          statusCode: 200,
          durationMs: 2,
          delivered: true,
        });
        const rows = await store.personDeliveryRows(asWorker, personHash);
        await store.deletePersonDeliveryRows(
          asWorker,
          personHash,
          rows.map((row) => row.id),
        );
      },
      recordErasureLook: () =>
        store.recordErasureLook(asWorker, erasureId, [{ workflowId: 'wf-erased', runId: 'r1', state: 'deleted' }], 1),
      unconfirmedErasureExecutions: () => store.unconfirmedErasureExecutions(asWorker, erasureId),
      purgeProject: async () => {
        await store.recordPurgeBatchJob(asWorker, purgeId, {
          jobId: `purge-${purgeId}-1`,
          state: 'completed',
          total: 1,
          deleted: 1,
          failed: 0,
        });
        await store.recordPurgeExecutions(asWorker, purgeId, [{ workflowId: 'wf-purged', runId: 'r1' }]);
        await store.setPurgeStep(asWorker, purgeId, 'rows');
        await store.deleteProjectDeliveryRows(asWorker, purgeId, purged);
        await store.deleteProjectRows(asWorker, purgeId, purged);
        await store.recordPurgedDataKeys(asWorker, purgeId, await store.destroyProjectDataKeys(asWorker, purged));
        await asWorker.transaction(async (trx) => {
          await store.closePurge(trx, purgeId, { status: 'completed' });
          const row = await store.appendAuditEvent(trx, { actor: { kind: 'system' }, action: 'x', outcome: 'ok' });
          await store.setPurgeOutcomeAudit(trx, purgeId, row.id);
        });
      },
      closeErasure: () =>
        asWorker.transaction(async (trx) => {
          await store.closeErasure(trx, erasureId, { status: 'completed' });
          const row = await store.appendAuditEvent(trx, { actor: { kind: 'system' }, action: 'x', outcome: 'ok' });
          await store.setErasureOutcomeAudit(trx, erasureId, row.id);
        }),
    };
    const apiAfter: Record<string, () => Promise<unknown>> = {
      listDeliveries: () => store.listDeliveries(asApi, projectId, { limit: 10 }),
      findDelivery: () => store.findDelivery(asApi, projectId, key.id),
      listDeliveryAttempts: async () =>
        store.listDeliveryAttempts(asApi, (await store.findDelivery(asApi, projectId, key.id))!),
      lastAttemptAt: async () => store.lastAttemptAt(asApi, (await store.findDelivery(asApi, projectId, key.id))!),
      failedDeliveries: () => store.failedDeliveries(asApi, projectId, new Date(0), undefined, 10),
      claimAndReleaseRedelivery: async () => {
        const claimed = await store.claimRedelivery(asApi, projectId, key.id);
        if (claimed) await store.releaseRedelivery(asApi, claimed);
      },
      removeRegistration: () => store.removeRegistration(asApi, projectId),
      purgeCertificate: async () => {
        const purge = await store.findPurge(asApi, purgeId);
        assert.equal(purge?.status, 'completed');
        assert.equal(purge?.registrationsDeleted, 1);
        await store.purgeAuditEvents(asApi, purge);
      },
      erasureCertificate: async () => {
        const erasure = await store.findErasure(asApi, erasureId);
        await store.erasureAuditEvents(asApi, erasure!);
        await store.deletedErasureExecutions(asApi, erasureId);
      },
    };
    const failures: string[] = [];
    for (const [who, calls] of [
      ['api', api],
      ['worker', worker],
      ['api', apiAfter],
    ] as const)
      for (const [name, call] of Object.entries(calls))
        await call().catch((error: Error) => failures.push(`${who} ${name}: ${error.message.split(' - ').at(-1)}`));
    assert.deepEqual(failures, []);
  });

  it("the worker role maintains the delivery log's partitions through the owner's function, and cannot drop or make one itself", async () => {
    const projectId = `roles-${randomUUID().slice(0, 8)}`;
    // A day past retention, written as the owner: its row lands in the DEFAULT partition.
    await t.db.raw(
      `INSERT INTO deliveries (id, project_id, type, status, workflow_id, created_at)
       VALUES (?, ?, 'FALL_DETECTION', 'delivered', 'wf-old', now() - interval '40 days')`,
      [`webhook-event-${randomUUID()}`, projectId],
    );
    const day = new Date(Date.now() - 40 * 86_400_000).toISOString().slice(0, 10);
    const part = `deliveries_p${day.replaceAll('-', '')}`;
    const days = await store.maintainDeliveryLog(asWorker, 30);
    assert.deepEqual(
      days.filter((d) => d.day === day).map((d) => [d.action, d.deliveries]),
      [
        ['created', 1],
        ['dropped', 1],
      ],
    );
    const today = new Date().toISOString().slice(0, 10).replaceAll('-', '');
    await refusesEach(asWorker, [
      `DROP TABLE deliveries_p${today}`,
      `DROP TABLE delivery_attempts_p${today}`,
      `ALTER TABLE deliveries DETACH PARTITION deliveries_p${today}`,
      `CREATE TABLE ${part} PARTITION OF deliveries FOR VALUES FROM ('${day}') TO ('${day}T12:00:00Z')`,
      `SELECT delivery_log_add_day(date '${day}')`,
      `SELECT count(*) FROM deliveries_p${today}`,
    ]);
    await refusesEach(asApi, ['SELECT * FROM delivery_log_maintain(30, 7)']);
    await assert.rejects(store.maintainDeliveryLog(asApi, 30), refused);
  });

  it('every table of the schema has its line in db/roles.ts', async () => {
    assert.deepEqual(await store.tablesWithoutGrants(t.db), []);
  });

  it('each `webhooks migrate` sets the grants again: a privilege granted by hand since is revoked', async () => {
    await t.db.raw('GRANT DELETE ON audit_events TO ??', [apiRole]);
    await asApi.raw('DELETE FROM audit_events WHERE false');
    const again = await cli(['migrate'], t.url, roleEnv);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /already up to date/);
    await assert.rejects(asApi.raw('DELETE FROM audit_events WHERE false'), refused);
  });
});

describe('database roles: bad input to `webhooks migrate` migrates nothing', function () {
  this.timeout(60_000);
  let scratch: { url: string; drop(): Promise<void> };
  let db: Knex;

  before(async () => {
    const t = await createTestDatabase();
    // A database of its own, not migrated, on the same server.
    const server = new URL(t.url);
    server.pathname = '/postgres';
    await t.destroy();
    scratch = await store.createScratchDatabase(server.toString(), 'webhooks_roles');
    db = store.createDb(scratch.url, { max: 1 });
  });
  after(async () => {
    await db?.destroy();
    await scratch?.drop();
  });

  for (const [what, env, message] of [
    [
      'a role that does not exist',
      { DATABASE_API_ROLE: 'webhooks_api_missing' },
      /DATABASE_API_ROLE: role webhooks_api_missing does not exist/,
    ],
    [
      'a superuser',
      { DATABASE_WORKER_ROLE: 'postgres' },
      /DATABASE_WORKER_ROLE: role postgres is (the owner|a superuser)/,
    ],
    [
      'one role for both',
      { DATABASE_API_ROLE: 'webhooks_x', DATABASE_WORKER_ROLE: 'webhooks_x' },
      /two different roles/,
    ],
    ['a name that is no role name', { DATABASE_API_ROLE: 'api; DROP TABLE x' }, /DATABASE_API_ROLE/],
  ] as const)
    it(`refuses ${what}, naming it`, async () => {
      const result = await cli(['migrate'], scratch.url, env);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr, message);
      assert.deepEqual(await store.pendingMigrations(db), await migrationSource.getMigrations([]), 'nothing migrated');
    });

  it('in production, the API refuses to start on a schema not migrated, naming `webhooks migrate`', async () => {
    const config = loadConfig(
      {
        NODE_ENV: 'production',
        PORT: '0',
        DATABASE_URL: scratch.url,
        JWT_SECRET: 'x'.repeat(32),
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
        PAYLOAD_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
        METRICS_TOKEN: randomBytes(16).toString('hex'),
        PUBLIC_BASE_URL: 'https://hooks.example.com',
        ...testAuditEnv(),
      },
      { database: true, auth: true },
    );
    await assert.rejects(
      startApi(config, pino({ level: 'silent' }), { sendTestEvent: () => Promise.reject(new Error('not used')) }),
      /schema is not current: \d+ migration\(s\) pending .*run `webhooks migrate` as the database owner/,
    );
    assert.equal(await db.schema.hasTable('audit_events'), false, 'the API migrated nothing');
  });

  it('in production, the worker refuses to start on a schema not migrated, naming `webhooks migrate`', async () => {
    const worker = spawn(process.execPath, ['--require', 'tsx/cjs', join(__dirname, '..', '..', 'worker', 'main.ts')], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        NODE_ENV: 'production',
        DATABASE_URL: scratch.url,
        // Nothing listens there: the worker must stop at the schema, before it connects to Temporal.
        TEMPORAL_ADDRESS: '127.0.0.1:9',
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
        PAYLOAD_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
        ...testAuditEnv(),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => worker.once('exit', resolve));
    assert.equal(code, 1, output);
    assert.match(output, /schema is not current: .*run `webhooks migrate` as the database owner/);
    assert.equal(await db.schema.hasTable('audit_events'), false);
  });
});

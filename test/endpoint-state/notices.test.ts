import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { createWebhookHttpClient, type ActivityConfig } from '../../activities';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createDeliveryLog } from '../../activities/delivery-log';
import { createNotifier, type ProjectNotice } from '../../activities/notices';
import { startPauseExpiry } from '../../worker/pause-expiry';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { Registrations, captureLogger, fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';

/** A real SMTP server (npm smtp-server) on 127.0.0.1, keeping every message it accepts, as received. */
async function startSmtpServer() {
  const messages: { from: string; to: string[]; raw: string }[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      let raw = '';
      stream.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
      stream.on('end', () => {
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((rcpt) => rcpt.address),
          raw,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return { url: `smtp://127.0.0.1:${port}`, messages, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** What no notice may carry: the event's person and payload. */
const PERSONAL = /Ada|Lovelace|ada@example\.com|3f2b8c1e|happenedAt|reasons/;

describe('notices to a project’s own contacts', function () {
  this.timeout(120_000);

  describe('once per condition per hour (real PostgreSQL)', () => {
    let database: TestDatabase;
    before(async () => (database = await createTestDatabase()));
    after(() => database?.destroy());

    it('claims a condition once an hour per project; another condition or project is its own', async () => {
      const [p, q] = [newProjectId(), newProjectId()];
      await store.addProject(database.db, p);
      await store.addProject(database.db, q);
      assert.equal(await store.claimNotice(database.db, p, 'breaker-open'), true);
      assert.equal(await store.claimNotice(database.db, p, 'breaker-open'), false, 'within the hour');
      assert.equal(await store.claimNotice(database.db, p, 'recovered'), true, 'another condition');
      assert.equal(await store.claimNotice(database.db, q, 'breaker-open'), true, 'another project');
      await database
        .db('project_notices')
        .where({ project_id: p, condition: 'breaker-open' })
        .update({ sent_at: database.db.raw(`now() - interval '61 minutes'`) });
      assert.equal(await store.claimNotice(database.db, p, 'breaker-open'), true, 'an hour later');
      assert.equal(await store.claimNotice(database.db, p, 'breaker-open', 60_000), false, 'just claimed');
    });

    it('claims a client certificate’s coming end once a day, not hourly', async () => {
      const p = newProjectId();
      await store.addProject(database.db, p);
      assert.equal(await store.claimNotice(database.db, p, 'certificate-expiring'), true);
      const since = async (interval: string) => {
        await database
          .db('project_notices')
          .where({ project_id: p, condition: 'certificate-expiring' })
          .update({ sent_at: database.db.raw(`now() - interval '${interval}'`) });
        return store.claimNotice(database.db, p, 'certificate-expiring');
      };
      assert.equal(await since('23 hours'), false, 'within the day');
      assert.equal(await since('25 hours'), true, 'a day later');
    });

    it('stores the contacts, and none when both are empty', async () => {
      const p = newProjectId();
      await store.addProject(database.db, p);
      assert.deepEqual(await store.findNotificationContacts(database.db, p), { url: null, emails: [] });
      const contacts = { url: 'https://oncall.example/n', emails: ['a@example.com', 'b@example.com'] };
      await store.setNotificationContacts(database.db, p, contacts);
      assert.deepEqual(await store.findNotificationContacts(database.db, p), contacts);
      await store.setNotificationContacts(database.db, p, { url: null, emails: [] });
      assert.equal(await database.db('project_notification_contacts').where({ project_id: p }).first(), undefined);
    });

    it('keeps either contact alone, and each project’s own: clearing one project’s leaves another’s', async () => {
      const [p, q, r] = [newProjectId(), newProjectId(), newProjectId()];
      for (const id of [p, q, r]) await store.addProject(database.db, id);
      const urlOnly = { url: 'https://oncall.example/p', emails: [] };
      const emailsOnly = { url: null, emails: ['q@example.com'] };
      await store.setNotificationContacts(database.db, p, urlOnly);
      await store.setNotificationContacts(database.db, q, emailsOnly);
      assert.deepEqual(await store.findNotificationContacts(database.db, p), urlOnly);
      assert.deepEqual(await store.findNotificationContacts(database.db, q), emailsOnly);
      assert.deepEqual(await store.findNotificationContacts(database.db, r), { url: null, emails: [] }, 'none set');
      await store.setNotificationContacts(database.db, r, { url: null, emails: [] });
      assert.deepEqual(await store.findNotificationContacts(database.db, p), urlOnly, 'another project’s clearing');
    });
  });

  describe('what tells them (real PostgreSQL)', () => {
    let database: TestDatabase;
    before(async () => (database = await createTestDatabase()));
    after(() => database?.destroy());

    it('a pause that ends by itself and a client certificate near its end are told by the worker’s sweep', async () => {
      const registrations = new Registrations(database.db);
      const projectId = newProjectId();
      await registrations.register(projectId, 'https://receiver.example/h', ['FALL_DETECTION']);
      await store.pauseRegistration(database.db, projectId, 1);
      const soon = new Date(Date.now() + 10 * 86_400_000);
      await database
        .db('webhook_registrations')
        .where({ project_id: projectId })
        .update({ client_certificate: 'pem', client_key_sealed: 'sealed', client_certificate_not_after: soon });
      const told: ProjectNotice[] = [];
      const stop = startPauseExpiry(database.db, captureLogger().logger, 100, (notice) => told.push(notice));
      try {
        await eventually('both told', () => told.length >= 2 && told);
      } finally {
        stop();
      }
      const mine = told.filter((notice) => notice.projectId === projectId);
      assert.deepEqual(mine.find((notice) => notice.condition === 'certificate-expiring')?.facts, {
        notAfter: soon.toISOString(),
      });
      assert.ok(mine.some((notice) => notice.condition === 'pause-ended'));
      const registrationId = (
        await database.db('webhook_registrations').where({ project_id: projectId }).first<{ id: string }>('id')
      ).id;
      assert.deepEqual(
        await store
          .expiringCertificates(database.db, 14 * 86_400_000)
          .then((all) => all.filter((c) => c.projectId === projectId)),
        [{ projectId, notAfter: soon }],
      );
      // The expiry's audit row, written with it: the service's own action, when the pause began and was to end.
      const rows = await database
        .db('audit_events')
        .where({ project_id: projectId, action: 'webhook.pause.expire' })
        .select<{ actor_kind: string; registration_id: string; changes: Record<string, string> }[]>(
          'actor_kind',
          'registration_id',
          'changes',
        );
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.actor_kind, 'system');
      assert.equal(rows[0]!.registration_id, registrationId);
      assert.deepEqual(Object.keys(rows[0]!.changes).sort(), ['pausedAt', 'pausedUntil']);
    });

    it('a delivery given up is told with its type and X-Webhook-Id only; a TEST is not', async () => {
      const projectId = newProjectId();
      await store.addProject(database.db, projectId);
      const told: ProjectNotice[] = [];
      const log = createDeliveryLog({
        db: database.db,
        logger: captureLogger().logger,
        notify: (notice) => told.push(notice),
      });
      const env = new MockActivityEnvironment({ activityId: '1' });
      const key = (type: string) => ({ id: `evt-${randomUUID()}`, projectId, type, workflowId: 'w' });
      const given = key('FALL_DETECTION');
      await env.run(() => log.gaveUp(given, 'Receiver answered HTTP 500'));
      await env.run(() => log.gaveUp(key('TEST'), 'Receiver answered HTTP 500'));
      assert.deepEqual(told, [
        {
          condition: 'delivery-gave-up',
          projectId,
          facts: { webhookType: 'FALL_DETECTION', webhookIds: [given.id] },
        },
      ]);
    });
  });

  describe('end to end (Temporal dev server, a failing then recovering receiver, a real SMTP server)', () => {
    const fx = useDeliveryFixture(createLocalEnvironment);
    let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
    let noticeReceiver: TestReceiver;
    beforeEach(async () => {
      smtp = await startSmtpServer();
      noticeReceiver = await startTestReceiver();
    });
    afterEach(async () => {
      await smtp.close();
      await noticeReceiver.close();
    });

    it('the breaker-open and recovered notices arrive once each, by e-mail and signed POST, with no personal data', async () => {
      const projectId = newProjectId();
      const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
      await store.setNotificationContacts(fx.database.db, projectId, {
        url: noticeReceiver.url,
        emails: ['oncall@hospital.example'],
      });
      const registrationId = (await store.findRegistration(fx.database.db, projectId))!.id;
      const http = createWebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true });
      const notifier = createNotifier({
        db: fx.database.db,
        secretBox: fx.registrations.secretBox,
        logger: captureLogger().logger,
        http,
        smtp: { url: smtp.url, from: 'webhooks@service.example' },
      });
      const config: ActivityConfig = {
        ...fastConfig,
        BREAKER_FAILURE_THRESHOLD: 3,
        BREAKER_OPEN_MS: 600_000,
        BREAKER_MAX_OPEN_MS: 600_000,
      };
      fx.receiver.fallback = { status: 503 };
      try {
        const results = await fx.runWorker(
          async (taskQueue) => {
            const handles = await Promise.all(
              [1, 2, 3, 4, 5].map(() =>
                fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
                  args: [fallEvent(projectId)],
                  taskQueue,
                  workflowId: `webhook-event-${randomUUID()}`,
                }),
              ),
            );
            await eventually('the breaker-open notice e-mailed', () => smtp.messages.length === 1, 30_000);
            // Still open, more failures come in meanwhile: no second notice within the hour.
            fx.receiver.fallback = { status: 200 };
            await fx.database
              .db('webhook_circuit_breakers')
              .where({ registration_id: registrationId })
              .update({ open_until: fx.database.db.fn.now() });
            const settled = await Promise.all(handles.map((handle) => handle.result()));
            await eventually('the recovered notice e-mailed', () => smtp.messages.length === 2, 30_000);
            return settled;
          },
          { config, notify: notifier.notify },
        );
        assert.ok(results.every((result) => result.status === 'delivered'));
        // Once each: a second breaker-open within the hour is not told.
        assert.equal(await notifier.send({ condition: 'breaker-open', projectId }), false);
        assert.equal(await notifier.send({ condition: 'recovered', projectId }), false);
        await new Promise((resolve) => setTimeout(resolve, 500));
        assert.equal(smtp.messages.length, 2);

        const [opened, recovered] = smtp.messages;
        assert.deepEqual([opened!.from, opened!.to], ['webhooks@service.example', ['oncall@hospital.example']]);
        assert.match(opened!.raw, new RegExp(`Subject: Webhook notice for project ${projectId}: breaker-open`));
        // Failures in flight together may count past the threshold before the breaker row says open.
        assert.match(opened!.raw, /consecutiveFailures: ([3-9]|\d{2,})\r?\n/);
        assert.match(recovered!.raw, new RegExp(`Subject: Webhook notice for project ${projectId}: recovered`));

        const posts = await noticeReceiver.waitForRequests(2);
        assert.equal(posts.length, 2);
        assert.deepEqual(
          posts.map((post) => post.headers['x-webhook-notice']),
          ['breaker-open', 'recovered'],
        );
        assert.ok(
          posts.every((post) => independentSignatureValid(secret, post)),
          'signed like a delivery',
        );
        const bodies = posts.map((post) => JSON.parse(post.rawBody.toString()) as Record<string, unknown>);
        assert.deepEqual(
          bodies.map((body) => [body.notice, body.projectId]),
          [
            ['breaker-open', projectId],
            ['recovered', projectId],
          ],
        );
        for (const text of [...smtp.messages.map((m) => m.raw), ...posts.map((p) => p.rawBody.toString())])
          assert.doesNotMatch(text, PERSONAL, 'no personal data');
      } finally {
        notifier.close();
        await http.close();
      }
    });
  });
});

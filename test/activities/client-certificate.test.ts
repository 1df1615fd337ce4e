import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createWebhookHttpClient, type ActivityConfig } from '../../activities';
import { certificateExpiryView } from '../../api/deliveries/deliveries';
import {
  certificateExpiry,
  handshakeRefusal,
  inspectClientCertificate,
  type ClientCertificateInfo,
  type ClientCertificateUpload,
} from '../../common/registration/client-certificate';
import { createSecretBox, registrationClientKeyAad, registrationSecretAad } from '../../common/crypto/secrets';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { eventually } from '../support/eventually';
import { makeCertificates } from '../support/certificates';
import { createTestDatabase } from '../support/postgres';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { startTinyproxy } from '../support/tinyproxy';
import { bearer, hsToken } from '../support/tokens';

describe('client certificates to receivers (mutual TLS)', function () {
  this.timeout(180_000);
  const certs = makeCertificates();
  const DAY = 86_400_000;

  describe('checking an upload', () => {
    it('reads subject, expiry and fingerprint of a valid pair', () => {
      const inspected = inspectClientCertificate(certs.client);
      assert.ok('info' in inspected, JSON.stringify(inspected));
      assert.equal(inspected.info.subject, 'CN=hospital-client, O=Webhook Service');
      assert.ok(Math.abs(inspected.info.notAfter.getTime() - (Date.now() + 90 * DAY)) < 2 * DAY);
      assert.match(inspected.info.fingerprint, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
      // Intermediates may follow the leaf: the leaf is the one read.
      const chained = inspectClientCertificate({ ...certs.client, certificate: certs.client.certificate + certs.ca });
      assert.ok('info' in chained && chained.info.subject === inspected.info.subject);
    });

    it('names every problem: not PEM, expired, not yet valid, key not PEM, encrypted, or not the certificate’s', () => {
      const problems = (upload: ClientCertificateUpload, now?: number) => {
        const inspected = inspectClientCertificate(upload, now);
        return 'problems' in inspected ? inspected.problems.map((p) => `${p.pointer} ${p.detail}`) : [];
      };
      assert.deepEqual(problems({ certificate: 'hello', privateKey: 'world' }), [
        '/clientCertificate/certificate must be a PEM X.509 certificate (-----BEGIN CERTIFICATE-----)',
        '/clientCertificate/privateKey must be a PEM private key (-----BEGIN PRIVATE KEY-----)',
      ]);
      assert.deepEqual(
        problems({
          certificate: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----',
          privateKey: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----',
        }),
        [
          '/clientCertificate/certificate must be a PEM X.509 certificate (-----BEGIN CERTIFICATE-----)',
          '/clientCertificate/privateKey must be a PEM private key (-----BEGIN PRIVATE KEY-----)',
        ],
      );
      assert.deepEqual(problems({ ...certs.client, privateKey: certs.stranger.privateKey }), [
        '/clientCertificate/privateKey does not match the certificate',
      ]);
      assert.deepEqual(problems({ ...certs.client, privateKey: certs.encryptedKey }), [
        '/clientCertificate/privateKey must not be encrypted: upload the key without a passphrase',
      ]);
      const [expired] = problems(certs.client, Date.now() + 100 * DAY);
      assert.match(expired!, /^\/clientCertificate\/certificate has expired \(notAfter \d{4}-.*Z\)$/);
      const [early] = problems(certs.client, Date.now() - DAY);
      assert.match(early!, /^\/clientCertificate\/certificate is not valid yet \(notBefore \d{4}-.*Z\)$/);
      // At the very end of its validity it is expired already.
      const notAfter = (inspectClientCertificate(certs.client) as { info: { notAfter: Date } }).info.notAfter;
      assert.equal(problems(certs.client, notAfter.getTime()).length, 1);
      assert.equal(problems(certs.client, notAfter.getTime() - 1).length, 0);
    });

    it('is expiring from 14 days before notAfter, expired from notAfter', () => {
      const notAfter = new Date(100 * DAY);
      assert.deepEqual(certificateExpiry(notAfter, 80 * DAY), { state: 'valid', daysLeft: 20 });
      assert.deepEqual(certificateExpiry(notAfter, 86 * DAY - 1), { state: 'valid', daysLeft: 14 });
      assert.deepEqual(certificateExpiry(notAfter, 86 * DAY), { state: 'expiring', daysLeft: 14 });
      assert.deepEqual(certificateExpiry(notAfter, 100 * DAY - 1), { state: 'expiring', daysLeft: 0 });
      assert.deepEqual(certificateExpiry(notAfter, 100 * DAY), { state: 'expired', daysLeft: 0 });
      assert.deepEqual(certificateExpiryView(notAfter, 90 * DAY), {
        state: 'expiring',
        notAfter: notAfter.toISOString(),
        daysLeft: 10,
        warning: `The client certificate expires at ${notAfter.toISOString()} (in 10 days): upload its successor before then`,
      });
      assert.equal(certificateExpiryView(notAfter, 80 * DAY).warning, null);
      assert.match(String(certificateExpiryView(notAfter, 101 * DAY).warning), /^The client certificate expired at /);
    });

    it('names a handshake refused over the certificate: none uploaded, expired, refused; nothing else', () => {
      const certificate = { subject: 'CN=hospital-client', notAfter: new Date(10 * DAY) };
      const required = 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED';
      assert.equal(
        handshakeRefusal(required, undefined),
        `Receiver refused the TLS handshake: it requires a client certificate and the webhook has none (${required})`,
      );
      assert.equal(
        handshakeRefusal('ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', undefined, 0)?.endsWith(
          'has none (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE)',
        ),
        true,
      );
      assert.equal(
        handshakeRefusal('ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED', certificate, 0),
        `Receiver refused the TLS handshake: the webhook's client certificate expired (notAfter ${certificate.notAfter.toISOString()}) (ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED)`,
      );
      assert.match(String(handshakeRefusal(required, certificate, 11 * DAY)), /client certificate expired/);
      assert.equal(
        handshakeRefusal('ERR_SSL_TLSV1_ALERT_UNKNOWN_CA', certificate, 0),
        "Receiver refused the webhook's client certificate (CN=hospital-client) (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA)",
      );
      for (const other of ['ECONNREFUSED', 'TIMEOUT', 'ERR_SSL_WRONG_VERSION_NUMBER', 'UND_ERR_SOCKET'])
        assert.equal(handshakeRefusal(other, certificate, 0), undefined, other);
    });
  });

  it('the key is sealed to its row and column, and secrets reseal moves it to the newest key (real PostgreSQL)', async () => {
    const database = await createTestDatabase();
    try {
      const oldKey = { id: 'k1', key: randomBytes(32) };
      const newKey = { id: 'k2', key: randomBytes(32) };
      const projectId = newProjectId();
      await store.addProject(database.db, projectId);
      const info = (inspectClientCertificate(certs.client) as { info: ClientCertificateInfo }).info;
      await store.createRegistration(database.db, createSecretBox([oldKey]), {
        projectId,
        url: 'https://receiver.example/h',
        types: ['FALL_DETECTION'],
        clientCertificate: { upload: certs.client, info },
      });
      const row = (await store.findRegistration(database.db, projectId))!;
      assert.deepEqual(
        { ...row.clientCertificate, keySealed: undefined },
        { ...info, pem: certs.client.certificate, keySealed: undefined },
      );
      assert.equal(registrationClientKeyAad(row.id), `webhook-registration-client-key:${row.id}`);
      // Not under the secret's AAD: a ciphertext moved to another column does not open.
      assert.throws(() =>
        createSecretBox([oldKey]).open(row.clientCertificate!.keySealed, registrationSecretAad(row.id)),
      );
      const report = await store.resealRegistrationSecrets(database.db, createSecretBox([newKey, oldKey]));
      assert.deepEqual(report, { total: 2, resealed: 2 });
      const resealed = (await store.findRegistration(database.db, projectId))!;
      assert.equal(
        store.openClientKey(createSecretBox([newKey]), { ...resealed, clientCertificate: resealed.clientCertificate! }),
        certs.client.privateKey,
      );
    } finally {
      await database.destroy();
    }
  });

  it('through the egress proxy (tinyproxy): the pair is presented inside the tunnel; without it the receiver refuses', async () => {
    const receiver = await startTestReceiver({
      ...certs.server,
      ca: certs.ca,
      requestCert: true,
      rejectUnauthorized: true,
    });
    const proxy = await startTinyproxy();
    const http = createWebhookHttpClient({
      timeoutMs: 5_000,
      allowPrivate: true,
      proxy: { httpsProxy: proxy.url },
      trustedCa: [certs.ca],
    });
    try {
      const url = new URL(receiver.url);
      const pair = {
        id: 'registration-1',
        certificate: certs.client.certificate,
        privateKey: () => certs.client.privateKey,
      };
      assert.equal(
        (await http.post(url, { 'content-type': 'application/json' }, '{}', { clientCertificate: pair })).statusCode,
        200,
      );
      assert.equal(receiver.requests.length, 1);
      assert.ok(proxy.log().includes(`CONNECT 127.0.0.1:${receiver.port} HTTP/1.1`), proxy.log());
      await assert.rejects(http.post(url, { 'content-type': 'application/json' }, '{}'));
      assert.equal(receiver.requests.length, 1, 'refused without the certificate');
    } finally {
      await http.close();
      await proxy.close();
      await receiver.close();
    }
  });

  describe('end to end (Temporal dev server, an https receiver that requires client certificates of its own CA)', () => {
    const fx = useDeliveryFixture(createLocalEnvironment);
    const api = useLocalApi(fx);
    let receiver: TestReceiver;
    beforeEach(async () => {
      receiver = await startTestReceiver({
        ...certs.server,
        ca: certs.ca,
        requestCert: true,
        rejectUnauthorized: true,
      });
    });
    afterEach(() => receiver.close());
    const config: ActivityConfig = {
      ...fastConfig,
      BREAKER_FAILURE_THRESHOLD: 3,
      BREAKER_OPEN_MS: 500,
      BREAKER_MAX_OPEN_MS: 1_000,
    };

    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${api.url}${path}`, {
        method,
        headers: { ...bearer(hsToken('alice')), ...(body !== undefined && { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, text, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
    };
    const project = async () => {
      const projectId = newProjectId();
      await store.addProject(fx.database.db, projectId);
      await store.addMember(fx.database.db, projectId, 'alice');
      return projectId;
    };
    const start = (taskQueue: string, projectId: string) =>
      fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId: `webhook-event-${randomUUID()}`,
      });

    it('without the pair the handshake is refused, named and retried; after PATCHing the pair in, delivered', async () => {
      const projectId = await project();
      const registered = await call('POST', '/webhooks/register', {
        projectId,
        url: receiver.url,
        types: ['FALL_DETECTION'],
      });
      assert.equal(registered.status, 201, registered.text);
      assert.equal(registered.body.clientCertificate, null);
      const { result, refused, breakerMessage } = await fx.runWorker(
        async (taskQueue) => {
          const handle = await start(taskQueue, projectId);
          const refused = await eventually('attempts refused in the handshake', async () => {
            const delivery = await store.findDelivery(fx.database.db, projectId, handle.workflowId);
            return delivery && delivery.attempts >= 2 && delivery;
          });
          const registrationId = (await store.findRegistration(fx.database.db, projectId))!.id;
          const breakerMessage = (await store.findBreaker(fx.database.db, registrationId))?.lastFailure?.message;
          const patched = await call('PATCH', '/webhooks', { projectId, clientCertificate: certs.client });
          assert.equal(patched.status, 200, patched.text);
          return { result: await handle.result(), refused, breakerMessage };
        },
        { config, trustedCa: [certs.ca] },
      );
      const named =
        'Receiver refused the TLS handshake: it requires a client certificate and the webhook has none ' +
        '(ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED)';
      assert.equal(refused.lastError, named);
      assert.equal(breakerMessage, named, 'the breaker’s failure message names it');
      assert.equal(result.status, 'delivered');
      assert.ok(result.attempts >= 3, `retried: ${result.attempts} attempts`);
      assert.equal(receiver.requests.length, 1, 'only the attempt with the certificate got through the handshake');
    });

    it('registered with the pair: accepted at the first attempt; shown by subject, expiry and fingerprint, never the key', async () => {
      const projectId = await project();
      const registered = await call('POST', '/webhooks/register', {
        projectId,
        url: receiver.url,
        types: ['FALL_DETECTION'],
        clientCertificate: certs.client,
      });
      assert.equal(registered.status, 201, registered.text);
      const shown = registered.body.clientCertificate as Record<string, string>;
      assert.deepEqual(Object.keys(shown).sort(), ['fingerprint', 'notAfter', 'subject']);
      assert.equal(shown.subject, 'CN=hospital-client, O=Webhook Service');
      const result = await fx.runWorker(async (taskQueue) => (await start(taskQueue, projectId)).result(), {
        config,
        trustedCa: [certs.ca],
      });
      assert.deepEqual([result.status, result.attempts], ['delivered', 1]);
      assert.equal(receiver.requests.length, 1);

      const got = await call('GET', `/webhooks/project/${projectId}`);
      assert.deepEqual(got.body.clientCertificate, shown);
      const keyBody = certs.client.privateKey.split('\n')[1]!;
      for (const text of [registered.text, got.text, (await call('GET', `/webhooks/project/${projectId}/audit`)).text])
        assert.ok(!text.includes(keyBody) && !text.includes('PRIVATE KEY'), 'the key is never shown');
      const row = await fx.database.db('webhook_registrations').where({ project_id: projectId }).first();
      assert.ok(!String(row.client_key_sealed).includes(keyBody), 'sealed at rest');
      assert.ok(!JSON.stringify(row).includes('PRIVATE KEY'));
      const health = await call('GET', `/webhooks/project/${projectId}/health`);
      assert.deepEqual((health.body.clientCertificate as { state: string; warning: null }).state, 'valid');

      // A PATCH with null removes it: the receiver refuses the next delivery's handshake.
      const removed = await call('PATCH', '/webhooks', { projectId, clientCertificate: null });
      assert.equal(removed.body.clientCertificate, null);
    });

    it('warns 14 days before expiry on the health route; a bad upload is a 400 naming the field, storing nothing', async () => {
      const projectId = await project();
      await call('POST', '/webhooks/register', { projectId, url: receiver.url, types: ['FALL_DETECTION'] });
      const mismatched = await call('PATCH', '/webhooks', {
        projectId,
        clientCertificate: { certificate: certs.client.certificate, privateKey: certs.stranger.privateKey },
      });
      assert.equal(mismatched.status, 400);
      assert.equal(
        mismatched.body.detail,
        'The request body is invalid: /clientCertificate/privateKey does not match the certificate',
      );
      const missing = await call('PATCH', '/webhooks', { projectId, clientCertificate: { certificate: 'x' } });
      assert.equal(missing.status, 400);
      assert.match(String(missing.body.detail), /\/clientCertificate must have required property 'privateKey'/);
      assert.equal(
        (await call('GET', `/webhooks/project/${projectId}`)).body.clientCertificate,
        null,
        'nothing stored',
      );

      assert.equal((await call('PATCH', '/webhooks', { projectId, clientCertificate: certs.soon })).status, 200);
      const health = (await call('GET', `/webhooks/project/${projectId}/health`)).body.clientCertificate as {
        state: string;
        daysLeft: number;
        warning: string;
      };
      assert.equal(health.state, 'expiring');
      assert.ok(health.daysLeft === 9 || health.daysLeft === 10, String(health.daysLeft));
      assert.match(health.warning, /^The client certificate expires at .* \(in (9|10) days\): upload its successor/);
      const trail = (await call('GET', `/webhooks/project/${projectId}/audit`)).body.items as {
        action: string;
        changes?: { clientCertificate?: { before: unknown; after: { subject: string } } };
      }[];
      const update = trail.find((row) => row.action === 'webhook.update' && row.changes?.clientCertificate);
      assert.equal(update?.changes?.clientCertificate?.before, null);
      assert.equal(update?.changes?.clientCertificate?.after.subject, 'CN=expiring-client');
    });
  });
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createPrivateKey, createPublicKey, randomBytes, randomUUID, verify } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { createExampleReceiver } from '../../receiver/example-receiver';
import { startSecretSweep } from '../../worker/secret-sweep';
import { createSecretBox, registrationSecretAad, registrationSigningKeyAad } from '../../common/crypto/secrets';
import { findRegistration, resealRegistrationSecrets, type RegistrationRow } from '../../db';
import { fallPayload } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { bearer, hsToken } from '../support/tokens';
import { aliceProject, deliverFall, endOverlap } from './rotation-fixture';

interface Reply {
  status: number;
  body: Record<string, unknown> & { errors?: { pointer: string; detail: string }[] };
}

interface Delivered {
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
}

const PYTHON_VERIFIER = join(__dirname, '..', 'support', 'verify_v1a.py');

/** This test's own import of a whpk_ key (not the code under test's): the raw 32 bytes under an SPKI header. */
const publicKeyOf = (whpk: string) =>
  createPublicKey({
    key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(whpk.slice(5), 'base64')]),
    format: 'der',
    type: 'spki',
  });

/** The receiver's own v1a check with node:crypto: some `v1a` entry verifies over `{id}.{timestamp}.{body}`. */
function nodeVerifies(whpk: string, { headers, rawBody }: Delivered): boolean {
  const message = Buffer.concat([
    Buffer.from(`${String(headers['webhook-id'])}.${String(headers['webhook-timestamp'])}.`),
    rawBody,
  ]);
  return String(headers['webhook-signature'])
    .split(' ')
    .filter((entry) => entry.startsWith('v1a,'))
    .some((entry) => verify(null, message, publicKeyOf(whpk), Buffer.from(entry.slice(4), 'base64')));
}

/** The independent Python verifier (`cryptography`'s Ed25519PublicKey): for each key, whether it verifies. */
async function pythonVerdict(publicKeys: string[], { headers, rawBody }: Delivered) {
  const child = spawn('python3', [PYTHON_VERIFIER], { stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  child.stdin.end(JSON.stringify({ publicKeys, headers, body: rawBody.toString('base64') }));
  const code = await exited;
  assert.equal(Buffer.concat(err).toString(), '', 'the Python verifier wrote to stderr');
  const verdict = JSON.parse(Buffer.concat(out).toString()) as { reason: string; keys: boolean[] };
  assert.equal(code, verdict.keys.some(Boolean) ? 0 : 1);
  return verdict;
}

/** A receiver on 127.0.0.1 that holds public keys only: 204 when a v1a entry verifies with one of them, else 401. */
async function startPublicKeyReceiver() {
  const received: (Delivered & { accepted: boolean })[] = [];
  const state = { publicKeys: [] as string[] };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const delivered = { headers: request.headers, rawBody: Buffer.concat(chunks) };
      const accepted = state.publicKeys.some((key) => nodeVerifies(key, delivered));
      received.push({ ...delivered, accepted });
      response.writeHead(accepted ? 204 : 401).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/v1a`,
    received,
    state,
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

describe('Ed25519 signatures, Standard Webhooks v1a (API in process, Temporal dev server, real receivers)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const api = useLocalApi(fx);
  let receiver: Awaited<ReturnType<typeof startPublicKeyReceiver>>;
  beforeEach(async () => (receiver = await startPublicKeyReceiver()));
  afterEach(() => receiver.close());

  async function call(method: string, path: string, body?: unknown, user = 'alice'): Promise<Reply> {
    const headers: Record<string, string> = { ...bearer(hsToken(user)) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(api.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Reply['body']) : {} };
  }

  const project = () => aliceProject(fx);

  /** A project whose webhook signs with v1a, to the public-key receiver; returns the register answer. */
  async function registered(scheme: 'v1' | 'v1a' = 'v1a') {
    const projectId = await project();
    const reply = await call('POST', '/webhooks/register', {
      projectId,
      url: receiver.url,
      types: ['FALL_DETECTION'],
      signatureScheme: scheme,
    });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return { projectId, secret: reply.body.secret as string, publicKey: reply.body.publicKey as string | null };
  }

  /** Delivers one FALL_DETECTION through a real worker; returns the outcome and the request the receiver got. */
  async function deliverOne(projectId: string) {
    const before = receiver.received.length;
    const result = await deliverFall(fx, projectId);
    assert.equal(result.status, 'delivered', 'the public-key receiver accepted the delivery');
    assert.equal(receiver.received.length, before + 1);
    return receiver.received[before]!;
  }

  const v1aEntries = (request: Delivered) =>
    String(request.headers['webhook-signature'])
      .split(' ')
      .filter((entry) => entry.startsWith('v1a,'));

  const auditRows = (projectId: string, action: string) =>
    fx.database
      .db('audit_events')
      .where({ project_id: projectId, action })
      .orderBy('id')
      .select<{ changes: Record<string, unknown>; actor_kind: string }[]>('changes', 'actor_kind');

  it('register with v1a: the answer and GET show the whpk_ public key; the private key is sealed under its own AAD', async () => {
    const { projectId, publicKey } = await registered();
    assert.match(publicKey!, /^whpk_[A-Za-z0-9+/]{43}=$/);
    const got = await call('GET', `/webhooks/project/${projectId}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.signatureScheme, 'v1a');
    assert.equal(got.body.publicKey, publicKey);
    assert.equal(got.body.previousPublicKey, null);
    assert.equal(got.body.previousPublicKeyExpiresAt, null);
    const row = (await findRegistration(fx.database.db, projectId))!;
    assert.doesNotMatch(JSON.stringify(got.body), /PRIVATE KEY|signingKey|v2:k0:/);
    assert.doesNotMatch(row.signingKeySealed!, /PRIVATE KEY/);
    const pem = fx.registrations.secretBox.open(row.signingKeySealed!, registrationSigningKeyAad(row.id));
    const derived = createPublicKey(createPrivateKey(pem)).export({ format: 'der', type: 'spki' });
    assert.equal(publicKey, 'whpk_' + derived.subarray(-32).toString('base64'));
    // Bound to its column: the secret's AAD does not open it.
    assert.throws(() => fx.registrations.secretBox.open(row.signingKeySealed!, registrationSecretAad(row.id)));
    const [audit] = await auditRows(projectId, 'webhook.register');
    assert.deepEqual(audit!.changes.signatureScheme, { after: 'v1a' });
    assert.deepEqual(audit!.changes.publicKey, { after: publicKey });

    // The default stays HMAC: no key pair, nothing changes for existing registrations.
    const plain = await registered('v1');
    assert.equal(plain.publicKey, null);
    const plainRow = (await findRegistration(fx.database.db, plain.projectId))!;
    assert.equal(plainRow.signatureScheme, 'v1');
    assert.equal(plainRow.signingKeySealed, null);
  });

  it('a delivery verifies with the public key alone (node:crypto receiver, Python cryptography); v1 and X-Signature stay', async () => {
    const { projectId, secret, publicKey } = await registered();
    receiver.state.publicKeys = [publicKey!];
    const request = await deliverOne(projectId);
    assert.equal(request.accepted, true);
    const entries = String(request.headers['webhook-signature']).split(' ');
    assert.equal(entries.length, 2);
    assert.match(entries[0]!, /^v1a,[A-Za-z0-9+/]{86}==$/);
    assert.match(entries[1]!, /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(await pythonVerdict([publicKey!], request), { reason: 'valid', keys: [true] });
    // Broken on purpose, each must fail: another key, another body, another id, the v1a entry dropped.
    const other = (await registered()).publicKey!;
    assert.deepEqual(await pythonVerdict([other], request), { reason: 'bad-signature', keys: [false] });
    assert.equal(nodeVerifies(other, request), false);
    const tampered = { ...request, rawBody: Buffer.from(request.rawBody.toString().replace('fall', 'fell')) };
    assert.deepEqual((await pythonVerdict([publicKey!], tampered)).keys, [false]);
    assert.equal(nodeVerifies(publicKey!, tampered), false);
    const replayed = { ...request, headers: { ...request.headers, 'webhook-id': `webhook-event-${randomUUID()}` } };
    assert.deepEqual((await pythonVerdict([publicKey!], replayed)).keys, [false]);
    const v1Only = { ...request, headers: { ...request.headers, 'webhook-signature': entries[1] } };
    assert.deepEqual((await pythonVerdict([publicKey!], v1Only)).keys, [false]);
    // A receiver still on the secret keeps verifying: the stock library (v1), and the spec's X-Signature.
    const stringHeaders = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)]));
    assert.deepEqual(new Webhook(secret).verify(request.rawBody, stringHeaders), fallPayload);
    assert.ok(independentSignatureValid(secret, { ...request, method: 'POST', path: '/', receivedAt: Date.now() }));
  });

  it('the example receiver with WEBHOOK_PUBLIC_KEY alone accepts a v1a delivery and refuses it with another key', async () => {
    const { projectId, publicKey } = await registered();
    receiver.state.publicKeys = [publicKey!];
    const request = await deliverOne(projectId);
    /** The status an example receiver holding these public keys (and a wrong secret) answers to the delivery. */
    const answer = async (keys: string[], rawBody = request.rawBody) => {
      const example = createExampleReceiver({ secret: [], publicKey: keys });
      await new Promise<void>((resolve) => example.listen(0, '127.0.0.1', resolve));
      try {
        const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)]));
        delete headers['content-length'];
        const response = await fetch(`http://127.0.0.1:${(example.address() as AddressInfo).port}/hook`, {
          method: 'POST',
          headers,
          body: rawBody,
        });
        return response.status;
      } finally {
        await new Promise((resolve) => example.close(resolve));
      }
    };
    const other = (await registered()).publicKey!;
    assert.equal(await answer([publicKey!]), 200);
    assert.equal(await answer([other, publicKey!]), 200);
    assert.equal(await answer([other]), 401);
    assert.equal(await answer([publicKey!], Buffer.from(request.rawBody.toString().replace('fall', 'fell'))), 401);
  });

  it('rotation: during the overlap both key pairs sign and GET shows both; afterwards the old one is gone and erased', async () => {
    const { projectId, publicKey: old } = await registered();
    const rotated = await call('POST', `/webhooks/project/${projectId}/signing-key/rotate`, { overlapSeconds: 3600 });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const fresh = rotated.body.publicKey as string;
    assert.match(fresh, /^whpk_/);
    assert.notEqual(fresh, old);
    assert.equal(rotated.body.previousPublicKey, old);
    const got = await call('GET', `/webhooks/project/${projectId}`);
    assert.equal(got.body.publicKey, fresh);
    assert.equal(got.body.previousPublicKey, old);
    assert.equal(got.body.previousPublicKeyExpiresAt, rotated.body.previousPublicKeyExpiresAt);
    const [audit] = await auditRows(projectId, 'webhook.signing-key.rotate');
    assert.deepEqual(audit!.changes.publicKey, { before: old, after: fresh });
    assert.equal(audit!.changes.overlapSeconds, 3600);

    // A receiver holding only the old key, and one holding only the new key, both accept.
    receiver.state.publicKeys = [old!];
    const during = await deliverOne(projectId);
    assert.equal(v1aEntries(during).length, 2);
    assert.deepEqual((await pythonVerdict([old!, fresh], during)).keys, [true, true]);
    assert.equal(nodeVerifies(fresh, during), true);

    // The hour passes: the overlap's end moved into the past, as the clock would move it.
    await endOverlap(fx, projectId, 'previous_signing_key_expires_at');
    assert.equal((await call('GET', `/webhooks/project/${projectId}`)).body.previousPublicKey, null);
    receiver.state.publicKeys = [fresh];
    const afterwards = await deliverOne(projectId);
    assert.equal(v1aEntries(afterwards).length, 1);
    assert.deepEqual(await pythonVerdict([old!, fresh], afterwards), { reason: 'valid', keys: [false, true] });
    assert.deepEqual((await pythonVerdict([old!], afterwards)).keys, [false], 'the old key is refused');
    assert.equal(nodeVerifies(old!, afterwards), false);
    const row = (await findRegistration(fx.database.db, projectId))!;
    assert.equal(row.previousSigningKeySealed, null, 'the attempt erased the expired private key');
    assert.equal(row.previousSigningPublicKey, null);
    assert.equal(row.previousSigningKeyExpiresAt, null);
    const ended = await auditRows(projectId, 'webhook.signing-key.overlap-ended');
    assert.equal(ended.length, 1);
    assert.equal(ended[0]!.actor_kind, 'system');
  });

  it("overlapSeconds 0 replaces the pair at once; the worker's sweep erases an expired previous key no delivery reads", async () => {
    const { projectId, publicKey: old } = await registered();
    const now = await call('POST', `/webhooks/project/${projectId}/signing-key/rotate`, { overlapSeconds: 0 });
    assert.equal(now.status, 200);
    assert.equal(now.body.previousPublicKey, null);
    receiver.state.publicKeys = [now.body.publicKey as string];
    const request = await deliverOne(projectId);
    assert.equal(v1aEntries(request).length, 1);
    assert.equal(nodeVerifies(old!, request), false);

    await call('POST', `/webhooks/project/${projectId}/signing-key/rotate`, { overlapSeconds: 1 });
    assert.ok((await findRegistration(fx.database.db, projectId))?.previousSigningKeySealed);
    const stop = startSecretSweep(fx.database.db, 100, pino({ level: 'silent' }));
    try {
      while ((await findRegistration(fx.database.db, projectId))?.previousSigningKeySealed) await sleep(100);
    } finally {
      stop();
    }
    assert.equal((await findRegistration(fx.database.db, projectId))?.previousSigningKeyExpiresAt, null);
  });

  it('PATCH chooses the scheme: v1a makes a key pair, v1 erases it; both audited; rotating a v1 webhook is a 409', async () => {
    const { projectId } = await registered('v1');
    const refused = await call('POST', `/webhooks/project/${projectId}/signing-key/rotate`, {});
    assert.equal(refused.status, 409);
    assert.match(String(refused.body.detail), /signatureScheme v1a/);
    assert.equal((await findRegistration(fx.database.db, projectId))?.signingKeySealed, null);

    const chosen = await call('PATCH', '/webhooks', { projectId, signatureScheme: 'v1a' });
    assert.equal(chosen.status, 200, JSON.stringify(chosen.body));
    assert.equal(chosen.body.signatureScheme, 'v1a');
    const publicKey = chosen.body.publicKey as string;
    assert.match(publicKey, /^whpk_/);
    receiver.state.publicKeys = [publicKey];
    assert.equal(nodeVerifies(publicKey, await deliverOne(projectId)), true);
    // The same scheme again changes nothing: the pair stays, no audit row.
    assert.equal((await call('PATCH', '/webhooks', { projectId, signatureScheme: 'v1a' })).body.publicKey, publicKey);

    await call('POST', `/webhooks/project/${projectId}/signing-key/rotate`, { overlapSeconds: 600 });
    const back = await call('PATCH', '/webhooks', { projectId, signatureScheme: 'v1' });
    assert.equal(back.status, 200);
    assert.equal(back.body.publicKey, null);
    assert.equal(back.body.previousPublicKey, null);
    const row = (await findRegistration(fx.database.db, projectId)) as RegistrationRow;
    assert.equal(row.signingKeySealed, null);
    assert.equal(row.previousSigningKeySealed, null, 'the previous pair goes too');
    const updates = await auditRows(projectId, 'webhook.update');
    assert.equal(updates.length, 2);
    assert.deepEqual(updates[0]!.changes.signatureScheme, { before: 'v1', after: 'v1a' });
    assert.deepEqual(updates[0]!.changes.publicKey, { before: null, after: publicKey });
    assert.deepEqual(updates[1]!.changes.signatureScheme, { before: 'v1a', after: 'v1' });
    assert.equal((updates[1]!.changes.publicKey as { after: unknown }).after, null);
  });

  it('an unknown scheme is a 400 naming signatureScheme, and stores or changes nothing', async () => {
    const projectId = await project();
    for (const signatureScheme of ['ed25519', 'V1A', 'v2', '', null, 1]) {
      const reply = await call('POST', '/webhooks/register', {
        projectId,
        url: receiver.url,
        types: ['FALL_DETECTION'],
        signatureScheme,
      });
      assert.equal(reply.status, 400, JSON.stringify(signatureScheme));
      assert.ok(
        reply.body.errors?.some((e) => e.pointer === '/signatureScheme'),
        JSON.stringify(reply.body),
      );
    }
    assert.equal(await findRegistration(fx.database.db, projectId), undefined);
    const { projectId: existing } = await registered('v1');
    const before = await findRegistration(fx.database.db, existing);
    const patched = await call('PATCH', '/webhooks', { projectId: existing, signatureScheme: 'ed25519' });
    assert.equal(patched.status, 400);
    assert.deepEqual(
      patched.body.errors?.map((e) => e.pointer),
      ['/signatureScheme'],
    );
    assert.deepEqual(await findRegistration(fx.database.db, existing), before);
    assert.equal((await auditRows(existing, 'webhook.update')).length, 0);
  });

  it('secrets reseal moves the private keys, current and previous, to the newest key; they still sign', async () => {
    const { projectId, publicKey: old } = await registered();
    const fresh = (await call('POST', `/webhooks/project/${projectId}/signing-key/rotate`, { overlapSeconds: 3600 }))
      .body.publicKey as string;
    const ring = createSecretBox([
      { id: 'k9', key: randomBytes(32) },
      { id: 'k0', key: Buffer.from(fx.registrations.key, 'hex') },
    ]);
    const report = await resealRegistrationSecrets(fx.database.db, ring);
    assert.ok(report.resealed >= 4, JSON.stringify(report));
    const row = (await findRegistration(fx.database.db, projectId))!;
    for (const [sealed, whpk] of [
      [row.signingKeySealed!, fresh],
      [row.previousSigningKeySealed!, old!],
    ] as const) {
      assert.match(sealed, /^v2:k9:/);
      const pem = ring.open(sealed, registrationSigningKeyAad(row.id));
      assert.equal(
        'whpk_' + createPublicKey(pem).export({ format: 'der', type: 'spki' }).subarray(-32).toString('base64'),
        whpk,
      );
    }
  });
});

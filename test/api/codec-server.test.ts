import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { emitWebhookEvent } from '../../client';
import { loadConfig, type Config } from '../../common/config';
import {
  DATA_KEY_ID_METADATA_KEY,
  EncryptionCodec,
  parsePayloadKeyRing,
  payloadToJson,
  type JsonPayload,
} from '../../common/crypto/payload-codec';
import { connectTemporalClient } from '../../common/temporal/connection';
import { ProjectDataKeys } from '../../common/crypto/data-keys';
import { dataKeyStore, findDataKey } from '../../db';
import { temporalCliPath } from '../../dev/temporal-binaries';
import { startWorker, type RunningWorker } from '../../worker/start';
import type { deliverWebhookEvent } from '../../workflows';
import { captureLogger, fallEvent, fallPayload, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { bearer, hsToken } from '../support/tokens';
import * as store from '../../db';

const run = promisify(execFile);
/** The personal fields of fallPayload, as they would appear if stored in plain text. */
const PERSONAL = [fallPayload.email, fallPayload.lastName, `"firstName":"${fallPayload.firstName}"`];
const UI_ORIGIN = 'http://localhost:8080';
/**
 * The headers the Temporal UI (2.54.1, the version compose pins and the `temporal` CLI embeds) sets on its codec
 * requests with TEMPORAL_CODEC_PASS_ACCESS_TOKEN over https: the access token, and the ID token beside it.
 */
const UI_CODEC_HEADERS = (accessToken: string, idToken: string) => ({
  'Content-Type': 'application/json',
  'X-Namespace': 'default',
  Authorization: `Bearer ${accessToken}`,
  'Authorization-Extras': idToken,
});

/** A browser's CORS check of a preflight answer (Fetch standard, "CORS-preflight fetch"), for a credentialed call. */
function preflightLets(response: Response, origin: string, method: string, requestHeaders: string[]): string[] {
  const failures: string[] = [];
  if (response.status < 200 || response.status > 299) failures.push(`status ${response.status}`);
  if (response.headers.get('access-control-allow-origin') !== origin) failures.push('origin not allowed');
  if (response.headers.get('access-control-allow-credentials') !== 'true') failures.push('credentials not allowed');
  const list = (name: string) =>
    (response.headers.get(name) ?? '')
      .split(',')
      .map((item) => item.trim().toLowerCase())
      .filter(Boolean);
  if (!list('access-control-allow-methods').includes(method.toLowerCase())) failures.push(`method ${method}`);
  // With credentials a `*` is a header name, not a wildcard; Authorization is never covered by one anyway.
  const allowed = list('access-control-allow-headers');
  for (const header of requestHeaders) if (!allowed.includes(header)) failures.push(`header ${header}`);
  return failures;
}
const OPERATOR = 'ops-anna';
const keyEntry = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;

/** Every string and byte array of a history, as text: what anyone reading it without the codec can read. */
function readableText(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (value instanceof Uint8Array) out.push(Buffer.from(value).toString('utf8'));
  else if (Array.isArray(value)) for (const item of value) readableText(item, out);
  else if (value && typeof value === 'object') for (const item of Object.values(value)) readableText(item, out);
  return out;
}

const leaked = (texts: string[]) => PERSONAL.filter((field) => texts.some((text) => text.includes(field)));

/**
 * The payloads a history stores that come from our code: workflow input, activity inputs and results, the workflow
 * result. Left out: the SDK's own local-activity marker bookkeeping (`details.data`: sequence number, activity type).
 */
function historyPayloads(history: unknown): Payload[] {
  const found: Payload[] = [];
  const walk = (value: unknown, key = '') => {
    if (!value || typeof value !== 'object' || value instanceof Uint8Array || key === 'data') return;
    if (Array.isArray(value)) return value.forEach((item) => walk(item));
    const record = value as Record<string, unknown>;
    if (Array.isArray(record.payloads)) found.push(...(record.payloads as Payload[]));
    else for (const [name, item] of Object.entries(record)) walk(item, name);
  };
  walk(history);
  return found;
}

/** What `temporal workflow show --output json` lets a reader see: its text and every payload's data, decoded. */
function cliReadableText(stdout: string): string[] {
  const texts = [stdout];
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(walk);
    if (!value || typeof value !== 'object') return;
    const record = value as Record<string, unknown>;
    if (typeof record.data === 'string' && record.metadata) texts.push(Buffer.from(record.data, 'base64').toString());
    Object.values(record).forEach(walk);
  };
  walk(JSON.parse(stdout));
  return texts;
}

describe('payload encryption and the codec server (Temporal dev server, Postgres, receiver on 127.0.0.1)', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const k1 = keyEntry('k1');
  const k2 = keyEntry('k2');
  const k9 = keyEntry('k9');
  const workers: RunningWorker[] = [];
  const clients: Client[] = [];
  const api = useLocalApi(fx, () => ({
    codec: {
      // The API after rotation: k2 encrypts, k1 still decrypts; each project's payloads under its data key.
      codec: new EncryptionCodec(parsePayloadKeyRing(`${k2},${k1}`), {
        dataKeys: new ProjectDataKeys(parsePayloadKeyRing(`${k2},${k1}`), dataKeyStore(fx.database.db)),
      }),
      operators: { subjects: new Set([OPERATOR]), role: 'webhook-operator' },
      corsOrigins: [UI_ORIGIN],
    },
  }));
  afterEach(async () => {
    await Promise.allSettled(workers.splice(0).map((worker) => worker.shutdown()));
    await Promise.allSettled(clients.splice(0).map((client) => client.connection.close()));
  });

  function configWith(keys: string, taskQueue: string): Config {
    return loadConfig(
      {
        DATABASE_URL: fx.database.url,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        WEBHOOK_SECRET_KEY: fx.registrations.key,
        ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
        PAYLOAD_ENCRYPTION_KEYS: keys,
      },
      { database: true },
    );
  }
  async function worker(config: Config, log = captureLogger()): Promise<RunningWorker> {
    const running = await startWorker(config, log.logger);
    workers.push(running);
    return running;
  }
  async function client(config: Config): Promise<Client> {
    const connected = await connectTemporalClient(config);
    clients.push(connected);
    return connected;
  }
  /** Delivers one FALL_DETECTION through emitWebhookEvent with key ring `keys`; returns the workflow id and secret. */
  async function deliverEncrypted(keys: string) {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const config = configWith(keys, uniqueTaskQueue('encrypted'));
    await worker(config);
    const emitter = await client(config);
    const workflowId = await emitWebhookEvent(emitter, fallEvent(projectId), { taskQueue: config.TEMPORAL_TASK_QUEUE });
    const result = await emitter.workflow.getHandle(workflowId).result();
    return { workflowId, secret, result, config, projectId };
  }
  const rawHistory = (workflowId: string) => fx.env.client.workflow.getHandle(workflowId).fetchHistory();
  async function decode(token: string | undefined, payloads: JsonPayload[], headers: Record<string, string> = {}) {
    const response = await fetch(`${api.url}/codec/decode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token && bearer(token)), ...headers },
      body: JSON.stringify({ payloads }),
    });
    return {
      status: response.status,
      headers: response.headers,
      body: (await response.json()) as Record<string, unknown>,
    };
  }

  it('delivers byte for byte as before while the raw history holds no personal field', async () => {
    const { workflowId, secret, result } = await deliverEncrypted(k1);
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
    assert.equal(fx.receiver.requests[0]!.rawBody.toString('utf8'), JSON.stringify(fallPayload));
    assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));

    const history = await rawHistory(workflowId);
    const stored = historyPayloads(history);
    assert.ok(stored.length >= 3, 'workflow input, activity input and results are stored');
    for (const payload of stored)
      assert.equal(Buffer.from(payload.metadata!.encoding!).toString(), 'binary/encrypted', 'every payload sealed');
    assert.deepEqual(leaked(readableText(history)), []);
  });

  it('control: a history written without the codec does show the personal fields (the check above can fail)', async () => {
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const workflowId = `webhook-event-${randomUUID()}`;
    await fx.runWorker(async (taskQueue) => {
      const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
        args: [fallEvent(projectId)],
        taskQueue,
        workflowId,
      });
      return handle.result();
    });
    assert.deepEqual(leaked(readableText(await rawHistory(workflowId))), PERSONAL);
  });

  it('an operator decodes the history through /codec/decode (after a key rotation); others get 401/403', async () => {
    const { workflowId } = await deliverEncrypted(k1);
    const payloads = historyPayloads(await rawHistory(workflowId)).map(payloadToJson);

    const operator = await decode(hsToken(OPERATOR), payloads, { origin: UI_ORIGIN, 'x-namespace': 'default' });
    assert.equal(operator.status, 200);
    assert.equal(operator.headers.get('access-control-allow-origin'), UI_ORIGIN);
    const decoded = operator.body.payloads as JsonPayload[];
    assert.equal(decoded.length, payloads.length);
    const plain = decoded.map((p) => Buffer.from(p.data ?? '', 'base64').toString('utf8'));
    assert.deepEqual(leaked(plain), PERSONAL, 'the decoded history holds the event');
    assert.ok(decoded.every((p) => Buffer.from(p.metadata!.encoding!, 'base64').toString() === 'json/plain'));

    const byRole = await decode(hsToken('someone-else', { claims: { roles: ['webhook-operator'] } }), payloads);
    assert.equal(byRole.status, 200);

    const none = await decode(undefined, payloads, { origin: UI_ORIGIN });
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('access-control-allow-origin'), UI_ORIGIN, 'the UI can read the refusal');
    const member = await decode(hsToken('alice'), payloads);
    assert.equal(member.status, 403);
    assert.match(String(member.body.detail), /not an operator/);
    assert.equal(JSON.stringify(member.body).includes(fallPayload.email), false);
    const forged = await decode(hsToken(OPERATOR, { secret: 'x'.repeat(40) }), payloads);
    assert.equal(forged.status, 401);
  });

  it('accounts an operator’s decode in the trail of the project whose event it opened, naming the workflow', async () => {
    const { workflowId, projectId } = await deliverEncrypted(k1);
    const history = await rawHistory(workflowId);
    const other = newProjectId();
    await fx.registrations.register(other, fx.receiver.url, ['FALL_DETECTION']);
    for (const [project, member] of [
      [projectId, 'alice'],
      [other, 'bob'],
    ] as const)
      await store.addMember(fx.database.db, project, member);
    // As the Temporal UI asks: the started event's input alone, then the whole history.
    const input = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads!.map(payloadToJson);
    const one = await decode(hsToken(OPERATOR), input, { 'x-namespace': 'default' });
    assert.equal(one.status, 200);
    assert.equal((await decode(hsToken(OPERATOR), historyPayloads(history).map(payloadToJson))).status, 200);

    type Page = { items: { action: string; projectId?: string; actor: Record<string, unknown>; changes?: object }[] };
    const trail = async (path: string, token: string) => {
      const reply = await fetch(`${api.url}${path}`, { headers: bearer(token) });
      assert.equal(reply.status, 200, path);
      return ((await reply.json()) as Page).items.filter((item) => item.action === 'codec.decode');
    };
    const asOperator = await trail(`/audit?projectId=${projectId}`, hsToken(OPERATOR));
    const asMember = await trail(`/webhooks/project/${projectId}/audit`, hsToken('alice'));
    for (const rows of [asOperator, asMember]) {
      assert.equal(rows.length, 2, 'one row in the project’s trail per decode that opened its events');
      for (const row of rows) {
        assert.equal(row.projectId, projectId);
        assert.equal(row.actor.subject, OPERATOR, 'who read');
        assert.equal(row.actor.callerAddress, undefined, 'never the operator’s address');
        assert.deepEqual((row.changes as { workflowIds: string[] }).workflowIds, [workflowId]);
      }
      const dataKey = await store.liveProjectDataKey(fx.database.db, projectId);
      assert.deepEqual(rows[1]!.changes, {
        workflowIds: [workflowId],
        payloads: 1,
        // The project's data key (wrapped by k1, the ring key the worker ran with).
        keyIds: [dataKey?.id],
        namespace: 'default',
      });
    }
    assert.deepEqual(await trail(`/webhooks/project/${other}/audit`, hsToken('bob')), [], 'another project: nothing');
    assert.deepEqual(await trail(`/audit?projectId=${other}`, hsToken(OPERATOR)), []);
  });

  it('answers the UI preflight for its origin only', async () => {
    const preflight = (origin: string) =>
      fetch(`${api.url}/codec/decode`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' },
      });
    const ui = await preflight(UI_ORIGIN);
    assert.equal(ui.status, 204);
    assert.equal(ui.headers.get('access-control-allow-origin'), UI_ORIGIN);
    assert.match(ui.headers.get('access-control-allow-headers') ?? '', /Authorization/);
    const other = await preflight('https://evil.example');
    assert.equal(other.headers.get('access-control-allow-origin'), null);
  });

  it('lets the pinned Temporal UI decode: its preflight with Authorization-Extras passes, then its request', async () => {
    const { workflowId } = await deliverEncrypted(k1);
    const payloads = historyPayloads(await rawHistory(workflowId)).map(payloadToJson);
    const headers = UI_CODEC_HEADERS(hsToken(OPERATOR), 'an-id-token');
    // The UI calls `${endpoint}/decode?preserveStorageRefs=true`; the browser first asks for every header that is not
    // CORS-safelisted (application/json is not), by lower-case name, sorted.
    const url = `${api.url}/codec/decode?preserveStorageRefs=true`;
    const requested = Object.keys(headers)
      .map((name) => name.toLowerCase())
      .sort();
    const preflight = await fetch(url, {
      method: 'OPTIONS',
      headers: {
        origin: UI_ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': requested.join(','),
      },
    });
    assert.deepEqual(preflightLets(preflight, UI_ORIGIN, 'POST', requested), []);
    const decoded = await fetch(url, {
      method: 'POST',
      headers: { ...headers, origin: UI_ORIGIN },
      body: JSON.stringify({ payloads }),
    });
    assert.equal(decoded.status, 200);
    assert.equal(decoded.headers.get('access-control-allow-origin'), UI_ORIGIN);
    const plain = ((await decoded.json()) as { payloads: JsonPayload[] }).payloads.map((p) =>
      Buffer.from(p.data ?? '', 'base64').toString('utf8'),
    );
    assert.deepEqual(leaked(plain), PERSONAL, 'the UI reads the event');
  });

  it('`temporal workflow show` reads ciphertext without the codec and the event through --codec-endpoint', async function () {
    const cli = temporalCliPath();
    assert.ok(cli, 'the Temporal CLI is installed (TEMPORAL_CLI_PATH)');
    const { workflowId } = await deliverEncrypted(k1);
    const show = (...extra: string[]) =>
      run(cli, ['workflow', 'show', '-w', workflowId, '--address', fx.env.address, '--output', 'json', ...extra]);
    const without = await show();
    assert.deepEqual(leaked(cliReadableText(without.stdout)), []);
    const withCodec = await show('--codec-endpoint', `${api.url}/codec`, '--codec-auth', `Bearer ${hsToken(OPERATOR)}`);
    assert.deepEqual(leaked(cliReadableText(withCodec.stdout)), PERSONAL, 'the operator reads the event');
    const member = await show(
      '--codec-endpoint',
      `${api.url}/codec`,
      '--codec-auth',
      `Bearer ${hsToken('alice')}`,
    ).then(
      (r) => r.stdout,
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`,
    );
    assert.deepEqual(leaked([member]), [], 'a member who is no operator reads nothing');
  });

  it('`temporal workflow start --codec-endpoint` (a foreign client) stores ciphertext through the codec', async () => {
    const cli = temporalCliPath();
    assert.ok(cli, 'the Temporal CLI is installed (TEMPORAL_CLI_PATH)');
    const projectId = newProjectId();
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const config = configWith(`${k2},${k1}`, uniqueTaskQueue('foreign'));
    await worker(config);
    const workflowId = `webhook-event-${randomUUID()}`;
    await run(cli, [
      'workflow',
      'start',
      '--type',
      'deliverWebhookEvent',
      '--task-queue',
      config.TEMPORAL_TASK_QUEUE,
      '--workflow-id',
      workflowId,
      '--input',
      JSON.stringify(fallEvent(projectId)),
      '--address',
      fx.env.address,
      '--codec-endpoint',
      `${api.url}/codec`,
      '--codec-auth',
      `Bearer ${hsToken(OPERATOR)}`,
    ]);
    const result = await (await client(config)).workflow.getHandle(workflowId).result();
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests[0]!.rawBody.toString('utf8'), JSON.stringify(fallPayload));
    assert.deepEqual(leaked(readableText(await rawHistory(workflowId))), []);
  });

  it('after rotation a client still reads old results and encrypts new events under a data key wrapped by the new key', async () => {
    const { workflowId } = await deliverEncrypted(k1);
    const rotated = await client(configWith(`${k2},${k1}`, uniqueTaskQueue('rotated')));
    const old = await rotated.workflow.getHandle(workflowId).result();
    assert.equal((old as { status: string }).status, 'delivered');
    const { workflowId: fresh } = await deliverEncrypted(`${k2},${k1}`);
    const keyIds = new Set(
      historyPayloads(await rawHistory(fresh)).map((p) =>
        Buffer.from(p.metadata![DATA_KEY_ID_METADATA_KEY]!).toString(),
      ),
    );
    assert.equal(keyIds.size, 1, [...keyIds].join());
    const stored = await findDataKey(fx.database.db, [...keyIds][0]!);
    assert.equal(stored?.wrappingKeyId, 'k2');
  });

  it('a worker without the key fails the workflow task with a clear, non-leaking error, and delivers once given it', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const taskQueue = uniqueTaskQueue('missing-key');
    const log = captureLogger();
    const keyless = await worker(configWith(k9, taskQueue), log);
    // The emitter knows k9 too, so it can read the result the key-holding worker writes with k9.
    const emitter = await client(configWith(`${k1},${k9}`, taskQueue));
    const workflowId = await emitWebhookEvent(emitter, fallEvent(projectId), { taskQueue });

    let encoded: Payload | undefined;
    for (let i = 0; i < 200 && !encoded; i++) {
      const history = await rawHistory(workflowId);
      const failed = history.events?.find((e) => e.workflowTaskFailedEventAttributes);
      const attributes = failed?.workflowTaskFailedEventAttributes?.failure;
      if (attributes) assert.equal(attributes.message, 'Encoded failure', 'no plain message in the history');
      encoded = attributes?.encodedAttributes ?? undefined;
      if (!encoded) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(encoded, 'the workflow task failed');
    // The message is sealed with the worker's key (encodeCommonAttributes): an operator with it reads it.
    const [opened] = await new EncryptionCodec(parsePayloadKeyRing(k9)).decode([encoded]);
    const failure = defaultPayloadConverter.fromPayload<{ message: string }>(opened!).message;
    assert.match(failure, /key "k1", which is not in this process's PAYLOAD_ENCRYPTION_KEYS/);
    assert.deepEqual(leaked([failure, ...log.raw]), []);
    assert.equal(fx.receiver.requests.length, 0, 'nothing delivered without the key');

    await keyless.shutdown();
    await worker(configWith(`${k9},${k1}`, taskQueue));
    const result = await emitter.workflow.getHandle(workflowId).result();
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
    assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
  });

  describe('development: npm start opens /codec to callers on this machine (DEV_CODEC_WITHOUT_TOKEN)', () => {
    const ring = parsePayloadKeyRing(k1);
    const local = useLocalApi(fx, () => ({
      codec: {
        codec: new EncryptionCodec(ring),
        operators: { subjects: new Set() },
        corsOrigins: [UI_ORIGIN],
        localCallersWithoutToken: true,
      },
    }));
    let sealed: JsonPayload[];
    before(async () => {
      const plain = {
        metadata: { encoding: Buffer.from('json/plain') },
        data: Buffer.from(JSON.stringify(fallPayload)),
      };
      sealed = (await new EncryptionCodec(ring).encode([plain])).map(payloadToJson);
    });

    /** POST /codec/decode over node:http, which sends the Host header given (fetch always sends the URL's). */
    function decodeAs(
      headers: Record<string, string>,
    ): Promise<{ status: number; body: string; allowOrigin?: string }> {
      const body = JSON.stringify({ payloads: sealed });
      return new Promise((resolve, reject) => {
        const request = httpRequest(`${local.url}/codec/decode`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-namespace': 'default', ...headers },
        });
        request.once('error', reject);
        request.once('response', (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.once('end', () =>
            resolve({
              status: response.statusCode ?? 0,
              body: Buffer.concat(chunks).toString('utf8'),
              allowOrigin: response.headers['access-control-allow-origin'],
            }),
          );
        });
        request.end(body);
      });
    }

    it('decodes for the UI in the browser (its origin, a loopback host) without a token', async () => {
      const host = new URL(local.url).host;
      const ui = await decodeAs({ origin: UI_ORIGIN, host });
      assert.equal(ui.status, 200, ui.body);
      assert.equal(ui.allowOrigin, UI_ORIGIN);
      const [decoded] = (JSON.parse(ui.body) as { payloads: JsonPayload[] }).payloads;
      assert.equal(Buffer.from(decoded!.data!, 'base64').toString(), JSON.stringify(fallPayload));
      assert.equal(
        (await decodeAs({ host: `localhost:${new URL(local.url).port}` })).status,
        200,
        'curl on the machine',
      );
    });

    it('still asks a token of another origin, and of a page whose name was rebound to 127.0.0.1', async () => {
      const host = new URL(local.url).host;
      assert.equal((await decodeAs({ origin: 'https://evil.example', host })).status, 401);
      assert.equal(
        (await decodeAs({ origin: 'http://rebound.example:8233', host: 'rebound.example:8233' })).status,
        401,
      );
      assert.equal((await decodeAs({ host: 'rebound.example' })).status, 401);
    });

    it('is closed without the setting, and the setting is refused in production', async () => {
      assert.equal((await decode(undefined, sealed, { origin: UI_ORIGIN })).status, 401, 'the API above, not opened');
      const production = {
        NODE_ENV: 'production',
        WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
        PAYLOAD_ENCRYPTION_KEYS: k1,
      };
      assert.equal(loadConfig(production).DEV_CODEC_WITHOUT_TOKEN, false);
      assert.throws(
        () => loadConfig({ ...production, DEV_CODEC_WITHOUT_TOKEN: 'true' }),
        /DEV_CODEC_WITHOUT_TOKEN must not be set in production/,
      );
      assert.equal(
        loadConfig({ DEV_CODEC_WITHOUT_TOKEN: 'true' }).DEV_CODEC_WITHOUT_TOKEN,
        true,
        'development allows it',
      );
    });
  });
});

// The egress proxy (HTTPS_PROXY / HTTP_PROXY / NO_PROXY) through a real forward proxy, Debian's tinyproxy: deliveries
// leave through it, the SSRF guard still refuses a private target before the proxy is asked anything, and a proxy
// that refuses or is down fails the attempt as the proxy's failure (retried), never the receiver's breaker's.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities, createWebhookHttpClient, egressProxy, type ActivityConfig } from '../../activities';
import { egressRoutes } from '../../activities/http/client';
import { ConfigError, loadConfig } from '../../common/config';
import { FailureType, type AttemptFailureDetails } from '../../common/contract';
import type { deliverWebhookEvent } from '../../workflows';
import { findBreaker } from '../../db';
import { freePort } from '../../dev/ports';
import { makeCertificates } from '../support/certificates';
import { Registrations, captureLogger, fallEvent, fallPayload, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { startTinyproxy, type Tinyproxy } from '../support/tinyproxy';

/**
 * A port on which no connection is ever accepted or refused: its listen queue (backlog 0) is kept full, so the kernel
 * drops every further SYN, as a host that silently drops packets does. Python's socket API, since Node's servers accept
 * every connection themselves.
 */
async function startBlackhole(): Promise<{ port: number; close(): void }> {
  const script = [
    'import socket, time',
    'server = socket.socket()',
    "server.bind(('127.0.0.1', 0))",
    'server.listen(0)',
    'port = server.getsockname()[1]',
    'held = []',
    'for _ in range(4):',
    "    c = socket.socket(); c.setblocking(False); c.connect_ex(('127.0.0.1', port)); held.append(c)",
    'time.sleep(0.3)',
    'print(port, flush=True)',
    'time.sleep(3600)',
  ].join('\n');
  const child = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (data: Buffer) => resolve(Number(String(data).trim())));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the blackhole exited with ${code}`)));
  });
  return { port, close: () => void child.kill() };
}

/** The proxy's log line for a tunnel it was asked to open to host:port. */
const connectLine = (hostPort: string) => `CONNECT ${hostPort} HTTP/1.1`;
/** The proxy's log line for every client connection it accepts. */
const ACCEPTED = /Connect \(file descriptor \d+\)/;

describe('egress proxy: deliveries through a real forward proxy (tinyproxy, Temporal dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  let proxy: Tinyproxy;
  beforeEach(async () => (proxy = await startTinyproxy()));
  afterEach(() => proxy.close());

  async function deliver(config: ActivityConfig) {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const result = await fx.runWorker(
      async (taskQueue) => {
        const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
          args: [fallEvent(projectId)],
          taskQueue,
          workflowId: `webhook-event-${randomUUID()}`,
        });
        return handle.result();
      },
      { config },
    );
    return { result, secret };
  }

  it('HTTP_PROXY: the signed delivery reaches the receiver through the proxy', async () => {
    const { result, secret } = await deliver({ ...fastConfig, HTTP_PROXY: proxy.url });
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
    const [request] = fx.receiver.requests;
    assert.equal(request!.rawBody.toString('utf8'), JSON.stringify(fallPayload));
    assert.ok(independentSignatureValid(secret, request!), 'signed as without a proxy');
    // The proxy opened the tunnel to the receiver: the delivery left from the proxy, not from the worker.
    assert.ok(proxy.log().includes(connectLine(`127.0.0.1:${fx.receiver.port}`)), proxy.log());
  });

  it('NO_PROXY: a listed receiver host is reached directly, the proxy is not asked', async () => {
    const { result } = await deliver({ ...fastConfig, HTTP_PROXY: proxy.url, NO_PROXY: 'localhost,127.0.0.1' });
    assert.equal(result.status, 'delivered');
    assert.equal(fx.receiver.requests.length, 1);
    assert.doesNotMatch(proxy.log(), ACCEPTED);
  });

  it('without a proxy configured, nothing goes through it (the default)', async () => {
    const { result } = await deliver(fastConfig);
    assert.equal(result.status, 'delivered');
    assert.doesNotMatch(proxy.log(), ACCEPTED);
  });
});

describe('egress proxy: the SSRF guard and proxy failures, attempt by attempt (real PostgreSQL, tinyproxy)', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  let registrations: Registrations;
  let receiver: TestReceiver;
  before(async () => {
    database = await createTestDatabase();
    registrations = new Registrations(database.db);
  });
  after(() => database?.destroy());
  beforeEach(async () => (receiver = await startTestReceiver()));
  afterEach(() => receiver.close());

  /**
   * Attempts of one fall delivery to `url`, run as the worker runs the activity, with this config's proxy; `client`
   * gives the worker's resolver and the CAs it trusts.
   */
  async function deliveryTo(
    url: string,
    config: ActivityConfig,
    client: { lookup?: LookupFunction; trustedCa?: string[] } = {},
  ) {
    const projectId = newProjectId();
    const secret = await registrations.register(projectId, url, ['FALL_DETECTION']);
    const { id } = await database.db('webhook_registrations').where({ project_id: projectId }).first<{ id: string }>();
    const logs = captureLogger();
    const http = createWebhookHttpClient({
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: config.ALLOW_PRIVATE_WEBHOOK_URLS,
      proxy: egressProxy(config),
      ...client,
    });
    const { deliverWebhookAttempt } = createActivities({
      db: database.db,
      secretBox: registrations.secretBox,
      logger: logs.logger,
      config,
      http,
    });
    const workflowId = `webhook-event-${randomUUID()}`;
    let attempt = 0;
    return {
      registrationId: id,
      secret,
      logs: logs.lines,
      close: () => http.close(),
      attempt: () => {
        attempt += 1;
        const env = new MockActivityEnvironment(
          { attempt, workflowExecution: { workflowId, runId: randomUUID() }, activityId: '1' },
          { logger: new DefaultLogger('ERROR', () => undefined) },
        );
        return env
          .run(deliverWebhookAttempt, {
            projectId,
            webhookType: 'FALL_DETECTION' as const,
            body: JSON.stringify(fallPayload),
            waitToken: attempt,
          })
          .then(
            (outcome) => outcome,
            (error: unknown) => error,
          );
      },
    };
  }

  it('reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY, and refuses a proxy that is not an http(s) URL, naming it', () => {
    const config = loadConfig({
      HTTPS_PROXY: 'http://proxy.internal:3128',
      HTTP_PROXY: 'HTTP://user:pass@proxy.internal:3128',
      NO_PROXY: '.internal,10.0.0.0',
    });
    assert.deepEqual(egressProxy(config), {
      httpsProxy: 'http://proxy.internal:3128',
      httpProxy: 'HTTP://user:pass@proxy.internal:3128',
      noProxy: '.internal,10.0.0.0',
    });
    assert.deepEqual(egressProxy(loadConfig({})), { httpsProxy: undefined, httpProxy: undefined, noProxy: undefined });
    for (const name of ['HTTPS_PROXY', 'HTTP_PROXY'])
      assert.throws(
        () => loadConfig({ [name]: 'socks5://proxy.internal:1080' }),
        (error: unknown) => error instanceof ConfigError && new RegExp(`- ${name} must match`).test(error.message),
      );
  });

  it('routes as undici’s EnvHttpProxyAgent did: NO_PROXY names, domains, ports and *; HTTPS_PROXY falls back to HTTP_PROXY', () => {
    /** What undici's Client hands its connector for a URL: the host with its port, the name without brackets. */
    const to = (url: string) => {
      const { protocol, host, hostname, port } = new URL(url);
      return { protocol, host, hostname: hostname.replace(/^\[(.*)\]$/, '$1'), port };
    };
    const proxy = 'http://proxy.internal:3128';
    const route = egressRoutes({
      httpProxy: proxy,
      noProxy: '.internal.example, exact.example:8443,[::1] *.wild.example',
    });
    for (const [url, expected] of [
      ['https://receiver.example.org/hooks', proxy],
      ['http://receiver.example.org/hooks', proxy],
      ['https://internal.example/hooks', undefined],
      ['https://deep.sub.INTERNAL.example/hooks', undefined],
      ['https://notinternal.example/hooks', proxy],
      ['https://exact.example:8443/hooks', undefined],
      ['https://exact.example/hooks', proxy],
      ['http://[::1]:8080/hooks', undefined],
      ['https://a.wild.example/hooks', undefined],
    ] as const)
      assert.equal(route(to(url)), expected, url);
    assert.equal(egressRoutes({ httpProxy: proxy, noProxy: '*' })(to('https://receiver.example.org/')), undefined);
    // HTTPS_PROXY alone carries https:// receivers only.
    const httpsOnly = egressRoutes({ httpsProxy: proxy });
    assert.equal(httpsOnly(to('https://receiver.example.org/')), proxy);
    assert.equal(httpsOnly(to('http://receiver.example.org/')), undefined);
  });

  const guarded: ActivityConfig = { ...fastConfig, ALLOW_PRIVATE_WEBHOOK_URLS: false, BREAKER_FAILURE_THRESHOLD: 2 };

  for (const [name, url] of [
    ['a private address', 'http://10.1.2.3:8080/hooks'],
    ['a name that resolves to loopback', 'http://localhost:8080/hooks'],
    ['the metadata address over https', 'https://169.254.169.254/latest'],
  ] as const) {
    it(`refuses ${name} with the proxy set: not retried, nothing sent to the proxy`, async () => {
      const proxy = await startTinyproxy();
      const delivery = await deliveryTo(url, { ...guarded, HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url });
      try {
        const thrown = await delivery.attempt();
        assert.ok(thrown instanceof ApplicationFailure, String(thrown));
        assert.equal(thrown.type, FailureType.TargetForbidden);
        assert.equal(thrown.nonRetryable, true);
        assert.match(thrown.message, /Refused to deliver: the webhook URL leads to a (private|loopback|link-local)/);
        assert.doesNotMatch(proxy.log(), ACCEPTED, 'the proxy was never connected to');
      } finally {
        await delivery.close();
        await proxy.close();
      }
    });
  }

  /** Three attempts that each fail as the proxy's failure: retried, and the receiver's breaker counts none of them. */
  async function assertProxyFailures(delivery: Awaited<ReturnType<typeof deliveryTo>>, code: RegExp) {
    for (let i = 1; i <= 3; i += 1) {
      const thrown = await delivery.attempt();
      assert.ok(thrown instanceof ApplicationFailure, `attempt ${i}: ${String(thrown)}`);
      assert.equal(thrown.type, FailureType.ProxyUnavailable, `attempt ${i}: ${thrown.message}`);
      assert.equal(thrown.nonRetryable, false, 'retried');
      assert.match((thrown.details?.[0] as AttemptFailureDetails).errorCode ?? '', code);
    }
    const breaker = await findBreaker(database.db, delivery.registrationId);
    assert.equal(breaker?.consecutiveFailures ?? 0, 0, 'not counted against the receiver');
    assert.equal(breaker?.openUntil ?? null, null, 'the breaker (threshold 2) stays closed');
    const logged = delivery.logs.filter((line) => line.msg === 'webhook delivery attempt failed: egress proxy');
    assert.equal(logged.length, 3);
    assert.equal(logged[0]!.level, 40);
    assert.equal(receiver.requests.length, 0);
  }

  it('a proxy that answers 407 (credentials missing): logged, retried, not the receiver breaker’s failure', async () => {
    const proxy = await startTinyproxy({ basicAuth: { user: 'worker', password: 'proxy-pass' } });
    const delivery = await deliveryTo(receiver.url, {
      ...fastConfig,
      BREAKER_FAILURE_THRESHOLD: 2,
      HTTP_PROXY: proxy.url,
    });
    try {
      await assertProxyFailures(delivery, /^PROXY_407$/);
      const thrown = (await delivery.attempt()) as ApplicationFailure;
      assert.match(thrown.message, /^Egress proxy refused the tunnel: HTTP 407$/);
    } finally {
      await delivery.close();
      await proxy.close();
    }
  });

  it('with the credentials in the proxy URL, the same proxy carries the delivery', async () => {
    const proxy = await startTinyproxy({ basicAuth: { user: 'worker', password: 'proxy-pass' } });
    const delivery = await deliveryTo(receiver.url, {
      ...fastConfig,
      HTTP_PROXY: `http://worker:proxy-pass@127.0.0.1:${proxy.port}`,
    });
    try {
      const outcome = await delivery.attempt();
      assert.equal((outcome as { status?: string }).status, 'delivered', String(outcome));
      assert.equal(receiver.requests.length, 1);
      assert.ok(proxy.log().includes(connectLine(`127.0.0.1:${receiver.port}`)), proxy.log());
    } finally {
      await delivery.close();
      await proxy.close();
    }
  });

  it('a proxy that is down (connection refused): logged, retried, not the receiver breaker’s failure', async () => {
    const delivery = await deliveryTo(receiver.url, {
      ...fastConfig,
      BREAKER_FAILURE_THRESHOLD: 2,
      HTTP_PROXY: `http://127.0.0.1:${await freePort()}`,
    });
    try {
      await assertProxyFailures(delivery, /^PROXY_ECONNREFUSED$/);
    } finally {
      await delivery.close();
    }
  });

  it('a proxy host that drops the connection’s packets: the proxy’s connect timeout, not the receiver breaker’s failure', async () => {
    const blackhole = await startBlackhole();
    const delivery = await deliveryTo(receiver.url, {
      ...fastConfig,
      // The proxy's connection has 1 s of it: a second of margin before the attempt's own timeout.
      WEBHOOK_TIMEOUT_MS: 2_000,
      BREAKER_FAILURE_THRESHOLD: 2,
      HTTP_PROXY: `http://127.0.0.1:${blackhole.port}`,
    });
    try {
      await assertProxyFailures(delivery, /^PROXY_UND_ERR_CONNECT_TIMEOUT$/);
    } finally {
      await delivery.close();
      blackhole.close();
    }
  });

  it('a receiver that is down behind a working proxy: the proxy’s 5xx to CONNECT is its own failure too', async () => {
    const proxy = await startTinyproxy();
    const delivery = await deliveryTo(`http://127.0.0.1:${await freePort()}/hooks`, {
      ...fastConfig,
      BREAKER_FAILURE_THRESHOLD: 2,
      HTTP_PROXY: proxy.url,
    });
    try {
      await assertProxyFailures(delivery, /^PROXY_5\d\d$/);
    } finally {
      await delivery.close();
      await proxy.close();
    }
  });

  describe('the tunnel goes to the address the worker resolved and checked, never to a name the proxy resolves again', () => {
    const certs = makeCertificates();
    /** The receiver on 127.0.0.1, over http or over https with a certificate for the name `localhost` only. */
    const receiverFor = (protocol: 'http' | 'https') =>
      protocol === 'https' ? startTestReceiver(certs.namedServer) : startTestReceiver();
    /** The worker's resolver, answering `localhost` with this address and nothing else. */
    const answering =
      (address: string, family: 4 | 6): LookupFunction =>
      (hostname, options, callback) => {
        if (hostname !== 'localhost') return callback(Object.assign(new Error(hostname), { code: 'ENOTFOUND' }), []);
        if (options.all) callback(null, [{ address, family }]);
        else callback(null, address, family);
      };

    for (const protocol of ['http', 'https'] as const)
      for (const [address, family, authority] of [
        ['1.2.3.4', 4, '1.2.3.4'],
        ['100:0:0:1::1', 6, '[100:0:0:1::1]'],
      ] as const)
        it(`a name the proxy resolves to an internal address (rebinding, split-horizon DNS), ${protocol}, IPv${family}: CONNECT ${authority}:port, the internal receiver gets nothing`, async () => {
          // For the worker `localhost` is a public address the guard accepts; tinyproxy resolves it itself, to
          // 127.0.0.1, where the internal receiver listens. The proxy refuses the public addresses, so that nothing
          // leaves this machine.
          const internal = await receiverFor(protocol);
          const proxy = await startTinyproxy({ refusedHosts: ['^1\\.2\\.3\\.4$', '^\\[?100:0:0:1::1\\]?$'] });
          const delivery = await deliveryTo(
            `${protocol}://localhost:${internal.port}/hooks/receive`,
            { ...guarded, HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url },
            { lookup: answering(address, family), trustedCa: [certs.ca] },
          );
          try {
            const thrown = await delivery.attempt();
            assert.equal(internal.requests.length, 0, 'the internal receiver got the delivery');
            assert.ok(thrown instanceof ApplicationFailure, String(thrown));
            assert.equal(thrown.type, FailureType.ProxyUnavailable, thrown.message);
            assert.equal((thrown.details?.[0] as AttemptFailureDetails).errorCode, 'PROXY_403');
            assert.ok(proxy.log().includes(connectLine(`${authority}:${internal.port}`)), proxy.log());
            assert.ok(!proxy.log().includes(connectLine(`localhost:${internal.port}`)), proxy.log());
          } finally {
            await delivery.close();
            await proxy.close();
            await internal.close();
          }
        });

    /** The system's resolver, IPv4 only: tinyproxy finds the receiver on 127.0.0.1 whatever order the system lists. */
    const systemIpv4: LookupFunction = (hostname, options, callback) =>
      dnsLookup(hostname, { ...options, family: 4 }, callback);

    for (const protocol of ['http', 'https'] as const)
      it(`a name both resolve alike, ${protocol}: delivered, signed, Host the name, CONNECT the address${protocol === 'https' ? ', the certificate checked against the name' : ''}`, async () => {
        const receiver = await receiverFor(protocol);
        const proxy = await startTinyproxy();
        const config = { ...fastConfig, HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url };
        const client = { lookup: systemIpv4, trustedCa: [certs.ca] };
        const delivery = await deliveryTo(`${protocol}://localhost:${receiver.port}/hooks/receive`, config, client);
        // The same receiver by its address: its certificate names `localhost` only, so over https it is refused.
        const byAddress = await deliveryTo(`${protocol}://127.0.0.1:${receiver.port}/hooks/receive`, config, client);
        try {
          const outcome = await delivery.attempt();
          assert.equal((outcome as { status?: string }).status, 'delivered', String(outcome));
          assert.equal(receiver.requests.length, 1);
          const [request] = receiver.requests;
          assert.equal(request!.headers.host, `localhost:${receiver.port}`);
          assert.equal(request!.rawBody.toString('utf8'), JSON.stringify(fallPayload));
          assert.ok(independentSignatureValid(delivery.secret, request!), 'signed as without a proxy');
          assert.equal(request!.servername, protocol === 'https' ? 'localhost' : undefined, 'SNI the name');
          assert.ok(proxy.log().includes(connectLine(`127.0.0.1:${receiver.port}`)), proxy.log());
          assert.ok(!proxy.log().includes(connectLine(`localhost:${receiver.port}`)), proxy.log());
          if (protocol === 'https') {
            const thrown = await byAddress.attempt();
            assert.ok(thrown instanceof ApplicationFailure, String(thrown));
            assert.match(
              String((thrown.details?.[0] as AttemptFailureDetails).errorCode),
              /ERR_TLS_CERT_ALTNAME_INVALID/,
            );
            assert.equal(receiver.requests.length, 1);
          }
        } finally {
          await delivery.close();
          await byAddress.close();
          await proxy.close();
          await receiver.close();
        }
      });
  });
});

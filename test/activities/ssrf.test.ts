import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { ForbiddenTargetError, createWebhookHttpClient, forbiddenRange } from '../../activities';
import { guardedLookup } from '../../activities/http/ssrf';
import { eventually } from '../support/eventually';
import { startTestReceiver, type TestReceiver } from '../support/receiver';

describe('SSRF guard', () => {
  it('refuses every non-public range, IPv4 and IPv6, including IPv4-mapped forms', () => {
    const refused = [
      '127.0.0.1',
      '127.255.0.9',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.100.100.200',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd00:ec2::254',
      '::ffff:127.0.0.1',
      '::ffff:169.254.169.254',
      '::ffff:10.0.0.1',
      '::127.0.0.1',
      'ff02::1',
    ];
    for (const address of refused) assert.ok(forbiddenRange(address), `${address} must be refused`);
    const publicAddresses = [
      '93.184.215.14',
      '8.8.8.8',
      '2606:4700:4700::1111',
      '2a00:1450:4001:82a:1:2:3:4',
      '::ffff:8.8.8.8',
      '::8.8.8.8',
      '::808:808',
      '172.32.0.1',
    ];
    for (const address of publicAddresses) assert.equal(forbiddenRange(address), undefined, `${address} is public`);
  });

  it('names the category of a refused address, never the address', () => {
    for (const [address, category] of [
      ['10.1.2.3', 'private address'],
      ['127.0.0.1', 'loopback address'],
      ['::1', 'loopback address'],
      ['0:0:0:0:0:0:0:1', 'loopback address'],
      ['::127.0.0.1', 'loopback address'],
      ['::10.0.0.1', 'private address'],
      // IPv4-compatible ::a.b.c.d written in hex (ipaddr.js reads the dotted form as IPv4-mapped).
      ['::7f00:1', 'loopback address'],
      ['::a9fe:a9fe', 'link-local address'],
      ['169.254.169.254', 'link-local address'],
      ['::ffff:169.254.169.254', 'link-local address'],
      ['100.100.100.200', 'carrier-grade NAT address'],
      ['fd00:ec2::254', 'unique-local address'],
      ['224.0.0.1', 'multicast address'],
      ['0.0.0.0', 'unspecified address'],
      ['::', 'unspecified address'],
      ['255.255.255.255', 'broadcast address'],
      ['not an address', 'unparseable address'],
      ['2002:a00:1::', 'reserved address'],
    ] as const) {
      const error = new ForbiddenTargetError(address, forbiddenRange(address)!);
      assert.equal(error.category, category, address);
      assert.ok(error.message.includes(`leads to a ${category}`), error.message);
      assert.match(error.message, /set ALLOW_PRIVATE_WEBHOOK_URLS=true for local development\)$/);
      // The test-event endpoint tells a refused target apart by this code.
      assert.equal(error.code, 'ERR_WEBHOOK_TARGET_FORBIDDEN');
      assert.equal(error.name, 'ForbiddenTargetError');
      assert.ok(!error.message.includes(address), `${address} is not in: ${error.message}`);
    }
  });

  describe('name resolution (IP-literal names, answered without a DNS query)', () => {
    const resolve = (hostname: string, all: boolean) =>
      new Promise<{ error: NodeJS.ErrnoException | null; address: unknown; family?: number }>((done) =>
        guardedLookup(hostname, { all }, (error, address, family) => done({ error, address, family })),
      );

    it('answers a public address as dns.lookup does, one or all', async () => {
      assert.deepEqual(await resolve('8.8.8.8', false), { error: null, address: '8.8.8.8', family: 4 });
      assert.deepEqual(await resolve('2606:4700:4700::1111', false), {
        error: null,
        address: '2606:4700:4700::1111',
        family: 6,
      });
      assert.deepEqual(await resolve('8.8.8.8', true), {
        error: null,
        address: [{ address: '8.8.8.8', family: 4 }],
        family: undefined,
      });
    });

    it('refuses a name that resolves to a forbidden address, naming its category', async () => {
      for (const [hostname, category] of [
        ['10.0.0.1', 'private address'],
        ['localhost', 'loopback address'],
      ] as const) {
        const { error } = await resolve(hostname, false);
        assert.ok(error instanceof ForbiddenTargetError, `${hostname}: ${String(error)}`);
        assert.equal(error.category, category);
      }
    });
  });

  describe('on the wire', () => {
    let receiver: TestReceiver;
    beforeEach(async () => (receiver = await startTestReceiver()));
    afterEach(() => receiver.close());

    const post = async (url: string, allowPrivate: boolean) => {
      const http = createWebhookHttpClient({ timeoutMs: 1_000, allowPrivate });
      try {
        return await http.post(new URL(url), { 'content-type': 'application/json' }, '{}');
      } finally {
        await http.close();
      }
    };

    it('refuses IP literals and names resolving to loopback before sending a byte', async () => {
      const port = receiver.port;
      for (const url of [
        `http://127.0.0.1:${port}/`,
        `http://localhost:${port}/`,
        `http://[::ffff:127.0.0.1]:${port}/`,
      ]) {
        await assert.rejects(post(url, false), (error: unknown) => {
          assert.ok(error instanceof ForbiddenTargetError, `${url}: ${String(error)}`);
          assert.match(error.message, /^Refused to deliver: the webhook URL leads to a loopback address/);
          assert.doesNotMatch(error.message, /127\.0\.0\.1|::1|::ffff/, 'the message names no address');
          return true;
        });
      }
      assert.equal(receiver.requests.length, 0);
    });

    it('opens no connection at all to a forbidden literal or a name resolving to one', async () => {
      // A bare TCP listener: a refused target must not even see a connection (no port probing through the service).
      for (const [host, urls] of [
        ['127.0.0.1', (port: number) => [`http://127.0.0.1:${port}/`, `http://localhost:${port}/`]],
        ['::1', (port: number) => [`http://[::1]:${port}/`]],
      ] as const) {
        let connections = 0;
        const listener = createTcpServer((socket) => {
          connections += 1;
          socket.destroy();
        });
        await new Promise<void>((resolve) => listener.listen(0, host, resolve));
        try {
          for (const url of urls((listener.address() as AddressInfo).port))
            await assert.rejects(post(url, false), ForbiddenTargetError, url);
          await new Promise((resolve) => setTimeout(resolve, 50));
          assert.equal(connections, 0, `connections to ${host}`);
        } finally {
          await new Promise((resolve) => listener.close(resolve));
        }
      }
    });

    it('lets local receivers through when ALLOW_PRIVATE_WEBHOOK_URLS=true', async () => {
      const response = await post(receiver.url, true);
      assert.equal(response.statusCode, 200);
      assert.equal(receiver.requests.length, 1);
    });

    it('reads at most 64 kB of a large answer, then drops the connection', async () => {
      // 64 MB streamed with backpressure: far more than loopback buffers hold, so only a reader that stops early
      // leaves the answer unfinished.
      let sent = 0;
      let finished: boolean | undefined;
      const big = createServer((_request, response) => {
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(64 * 1024, 'x');
        const pump = () => {
          while (sent < 64 * 1024 * 1024) {
            sent += chunk.length;
            if (!response.write(chunk)) return void response.once('drain', pump);
          }
          response.end();
        };
        response.once('close', () => (finished = response.writableFinished));
        pump();
      });
      await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = big.address() as AddressInfo;
        assert.equal((await post(`http://127.0.0.1:${port}/`, true)).statusCode, 200);
        await eventually('the receiver’s answer closed', () => finished !== undefined);
        assert.equal(finished, false, 'the receiver could not finish its answer');
        assert.ok(sent < 32 * 1024 * 1024, `the client stopped reading early (${sent} bytes written)`);
      } finally {
        big.closeAllConnections();
        await new Promise((resolve) => big.close(resolve));
      }
    });

    it('does not follow redirects', async () => {
      receiver.script({ status: 301, headers: { location: '/x' } });
      assert.equal((await post(receiver.url, true)).statusCode, 301);
      assert.equal(receiver.requests.length, 1);
    });
  });
});

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { freePort } from '../../dev/ports';
import { loadConfig } from '../../common/config';
import { payloadCodecFromConfig } from '../../common/crypto/payload-codec';
import * as store from '../../db';
import { fastConfig } from '../support/deliveries';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

/** TEST_DELIVERY_WAIT_MS of the API processes; the TEST slot's lease is a second longer. */
const WAIT_MS = 15_000;
const LEASE_MS = WAIT_MS + 1_000;

interface ApiProcess {
  url: string;
  child: ChildProcess;
  output: string[];
}

/**
 * The limits are held in PostgreSQL: two API processes (`node --import tsx api/server.ts`, ports of their own) on
 * one database share them, with real Temporal, a real worker and a real receiver.
 */
describe('send limits across two API processes on one database', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  const taskQueue = uniqueTaskQueue('limits');
  const processes: ApiProcess[] = [];
  let a: ApiProcess;
  let b: ApiProcess;

  async function startApiProcess(): Promise<ApiProcess> {
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'api/server.ts'], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        // The development payload key ring in .data, which the test's worker reads too.
        NODE_ENV: 'development',
        LOG_LEVEL: 'warn',
        LOG_PRETTY: 'false',
        PORT: String(port),
        DATABASE_URL: fx.database.url,
        TEMPORAL_ADDRESS: fx.env.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        JWT_SECRET: TEST_JWT_SECRET,
        WEBHOOK_SECRET_KEY: fx.registrations.key,
        TEST_DELIVERY_WAIT_MS: String(WAIT_MS),
        TEST_EVENTS_PER_MINUTE: '3',
        REDELIVER_CALLS_PER_MINUTE: '2',
        RECOVER_CALLS_PER_MINUTE: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const started: ApiProcess = { url: `http://127.0.0.1:${port}`, child, output: [] };
    processes.push(started);
    child.stdout?.on('data', (chunk: Buffer) => started.output.push(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => started.output.push(chunk.toString()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const up = await fetch(`${started.url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) return started;
      if (child.exitCode !== null || Date.now() > deadline)
        assert.fail(`the API process did not start:\n${started.output.join('').slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  before(async () => {
    // The key ring exists before three processes could each create one.
    payloadCodecFromConfig(loadConfig({ NODE_ENV: 'development' }));
    [a, b] = await Promise.all([startApiProcess(), startApiProcess()]);
  });
  after(async () => {
    const running = processes.filter(({ child }) => child.exitCode === null && child.signalCode === null);
    await Promise.all(
      running.map(({ child }) => new Promise((resolve) => child.once('exit', resolve).kill('SIGKILL'))),
    );
  });

  const withWorker = <T>(work: () => Promise<T>) =>
    fx.runWorker(work, { taskQueue, config: { ...fastConfig, WEBHOOK_TIMEOUT_MS: 10_000 } });

  async function project(): Promise<string> {
    const projectId = `p-${randomUUID().slice(0, 8)}`;
    await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    await store.addMember(fx.database.db, projectId, 'alice');
    return projectId;
  }

  const post = (api: ApiProcess, path: string) =>
    fetch(`${api.url}${path}`, { method: 'POST', headers: bearer(hsToken('alice')) });
  const test = (api: ApiProcess, p: string) => post(api, `/webhooks/test/project/${p}`);

  async function detailOf(reply: Response): Promise<string> {
    return ((await reply.json()) as { detail: string }).detail;
  }
  const inFlight = (p: string) => `A test event for project ${p} is already in flight: one at a time per project`;

  it('one test in flight and TEST_EVENTS_PER_MINUTE for the project, whichever process is asked', async () => {
    const p = await project();
    await withWorker(async () => {
      // The receiver takes 2 s to answer the first test: it is in flight meanwhile.
      fx.receiver.script({ status: 200, delayMs: 2_000 });
      const first = test(a, p);
      await fx.receiver.waitForRequests(1);
      const other = await test(b, p);
      assert.equal(other.status, 429);
      assert.equal(await detailOf(other), inFlight(p));
      assert.equal((await first).status, 200);

      assert.equal((await test(b, p)).status, 200, 'process A released the slot for process B');
      assert.equal((await test(a, p)).status, 200);
      for (const api of [b, a]) {
        const limited = await test(api, p);
        assert.equal(limited.status, 429);
        assert.equal(
          await detailOf(limited),
          `At most 3 test events a minute per project: project ${p} reached the limit`,
        );
      }
      assert.equal(fx.receiver.requests.length, 3, 'three tests sent by two processes, then none');
    });
  });

  it('a send the receiver refuses frees the slot at once: the next test, through the other process, is sent', async () => {
    const p = await project();
    await withWorker(async () => {
      fx.receiver.script({ status: 503 }, { status: 503 });
      const refused = await test(a, p);
      assert.equal(refused.status, 502, await refused.clone().text());
      assert.match(await detailOf(refused), /The receiver answered HTTP 503/);
      assert.equal((await test(b, p)).status, 502, 'not 429: the failed send released the slot');
      assert.equal((await test(a, p)).status, 200);
      assert.equal(fx.receiver.requests.length, 3);
    });
  });

  it('a TEST redelivery through one process holds the slot the other checks, until its attempt ends', async () => {
    const p = await project();
    await withWorker(async () => {
      assert.equal((await test(a, p)).status, 200);
      const [logged] = await store.listDeliveries(fx.database.db, p, { type: 'TEST', limit: 1 });
      assert.ok(logged, 'the TEST delivery is in the log');

      fx.receiver.script({ status: 200, delayMs: 2_000 });
      const redeliveredAt = Date.now();
      assert.equal((await post(b, `/webhooks/project/${p}/deliveries/${logged.id}/redeliver`)).status, 202);
      const refused = await test(a, p);
      assert.equal(refused.status, 429);
      assert.equal(await detailOf(refused), inFlight(p));
      // Released when the attempt ended (process B watched the workflow), well before the lease would end.
      let accepted: Response;
      while ((accepted = await test(a, p)).status === 429) await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(accepted.status, 200);
      assert.ok(Date.now() - redeliveredAt < LEASE_MS - 4_000, `freed after ${Date.now() - redeliveredAt} ms`);
      assert.equal(fx.receiver.requests.length, 3);
    });
  });

  it('REDELIVER_CALLS_PER_MINUTE and RECOVER_CALLS_PER_MINUTE count the calls made to either process', async () => {
    const p = await project();
    const ids = [];
    for (let i = 0; i < 3; i += 1) {
      const id = `webhook-event-${randomUUID()}`;
      await store.upsertDelivery(
        fx.database.db,
        { id, projectId: p, type: 'FALL_DETECTION', workflowId: id },
        'failed',
      );
      ids.push(id);
    }
    // No workflow history behind these rows: each started redelivery finds its event gone (410), and counts.
    assert.equal((await post(a, `/webhooks/project/${p}/deliveries/${ids[0]}/redeliver`)).status, 410);
    assert.equal((await post(b, `/webhooks/project/${p}/deliveries/${ids[1]}/redeliver`)).status, 410);
    const redeliver = await post(a, `/webhooks/project/${p}/deliveries/${ids[2]}/redeliver`);
    assert.equal(redeliver.status, 429);
    assert.equal(
      await detailOf(redeliver),
      `At most 2 redeliveries a minute per project: project ${p} reached the limit`,
    );

    const recover = (api: ApiProcess) =>
      fetch(`${api.url}/webhooks/project/${p}/deliveries/recover`, {
        method: 'POST',
        headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
        body: JSON.stringify({ since: '2000-01-01T00:00:00Z' }),
      });
    assert.equal((await recover(b)).status, 202);
    const again = await recover(a);
    assert.equal(again.status, 429);
    assert.equal(await detailOf(again), `At most 1 recover calls a minute per project: project ${p} reached the limit`);
  });

  it('a process killed while its test is in flight holds the slot only until the lease ends', async () => {
    const p = await project();
    await withWorker(async () => {
      fx.receiver.script({ status: 200, delayMs: 2_000 });
      const admittedBy = Date.now();
      const first = test(a, p).catch(() => undefined);
      await fx.receiver.waitForRequests(1);
      a.child.kill('SIGKILL');
      await first;
      const refused = await test(b, p);
      assert.equal(refused.status, 429);
      assert.equal(await detailOf(refused), inFlight(p));
      // The TEST attempt ends in the worker 2 s later, but nobody is left to release the slot: the lease ends it.
      let accepted: Response;
      while ((accepted = await test(b, p)).status === 429) {
        assert.equal(await detailOf(accepted), inFlight(p));
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      assert.equal(accepted.status, 200, await accepted.clone().text());
      const heldMs = Date.now() - admittedBy;
      assert.ok(heldMs >= LEASE_MS - 1_000 && heldMs < LEASE_MS + 20_000, `held ${heldMs} ms`);
    });
  });
});

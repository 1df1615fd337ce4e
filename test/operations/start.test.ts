import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { isAlive } from '../../dev/stack';
import { freePort } from '../../dev/ports';
import { independentSignatureValid, startTestReceiver, type TestReceiver } from '../support/receiver';

const run = promisify(execFile);

/** `npm start` as a newcomer runs it: no DATABASE_URL, TEMPORAL_ADDRESS or JWT_SECRET; only ports and a data folder. */
describe('npm start: the whole stack from nothing', function () {
  this.timeout(240_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let api: string;
  let temporalPort: number;
  let receiver: TestReceiver;
  let current: { child: ChildProcess; output: string[]; exited: Promise<number | null> } | undefined;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-start-'));
    chmodSync(dataDir, 0o755); // as root, PostgreSQL runs as the postgres user, which must reach its folder
    const port = await freePort();
    temporalPort = await freePort();
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...(process.env.TEMPORAL_CLI_PATH && { TEMPORAL_CLI_PATH: process.env.TEMPORAL_CLI_PATH }),
      DATA_DIR: dataDir,
      PORT: String(port),
      DEV_POSTGRES_PORT: String(await freePort()),
      DEV_TEMPORAL_PORT: String(temporalPort),
      DEV_TEMPORAL_UI_PORT: String(await freePort()),
      LOG_LEVEL: 'warn',
    };
    api = `http://127.0.0.1:${port}`;
    receiver = await startTestReceiver();
  });

  after(async () => {
    // The whole group: npm and the node process it runs (its orphan guard then stops PostgreSQL and Temporal).
    if (current?.child.pid && current.child.exitCode === null) process.kill(-current.child.pid, 'SIGKILL');
    await receiver?.close();
  });

  async function start(): Promise<void> {
    // A process group of its own, as a terminal gives it: Ctrl-C signals the whole group.
    const child = spawn('npm', ['start'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const output: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    current = { child, output, exited };
    const deadline = Date.now() + 180_000;
    for (;;) {
      const ready = await fetch(`${api}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (child.exitCode !== null || Date.now() > deadline)
        assert.fail(`npm start did not become ready:\n${output.join('').slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.match(output.join(''), /Temporal UI\s+http:\/\/127\.0\.0\.1:\d+/);
  }

  /** The pids of the embedded PostgreSQL and Temporal dev server that serve this data folder. */
  async function servicePids(): Promise<number[]> {
    const postmaster = Number(readFileSync(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const { stdout } = await run('pgrep', ['-f', join(dataDir, 'temporal.db')]);
    return [postmaster, ...stdout.trim().split('\n').map(Number)];
  }

  /** SIGTERM to npm, as a supervisor sends it; or Ctrl-C, SIGINT to the whole group (npm forwards it again). */
  async function stop(how: 'SIGTERM' | 'Ctrl-C'): Promise<void> {
    const pids = await servicePids();
    assert.ok(pids.length >= 2 && pids.every(isAlive), `services running: ${pids.join(', ')}`);
    if (how === 'SIGTERM') current!.child.kill('SIGTERM');
    else process.kill(-current!.child.pid!, 'SIGINT');
    assert.equal(await current!.exited, 0, current!.output.join('').slice(-3000));
    current = undefined;
    assert.deepEqual(pids.filter(isAlive), [], 'no postgres or temporal process is left behind');
  }

  /** A client of the stack's Temporal, without the codec: it reads what the server stores. */
  async function withTemporal<T>(use: (client: Client) => Promise<T>): Promise<T> {
    const connection = await Connection.connect({ address: `127.0.0.1:${temporalPort}` });
    try {
      return await use(new Client({ connection }));
    } finally {
      await connection.close();
    }
  }

  async function cli(...args: string[]): Promise<string> {
    const { stdout } = await run('node', ['dist/cli/index.js', ...args], { env });
    return stdout.trim().split('\n').at(-1) ?? '';
  }

  let registrationId: string;
  let testWorkflowId: string;

  it('serves the API, delivers a signed test event to a local receiver, and stops cleanly on SIGTERM', async () => {
    await start();
    await cli('project', 'add', 'p1');
    await cli('member', 'add', 'p1', 'alice');
    const token = await cli('token', 'alice');
    const auth = { authorization: `Bearer ${token}` };

    const registered = await fetch(`${api}/webhooks/register`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ projectId: 'p1', url: receiver.url, types: ['FALL_DETECTION'] }),
    });
    assert.equal(registered.status, 201);
    const registration = (await registered.json()) as { _id: string; secret: string };
    registrationId = registration._id;

    const tested = await fetch(`${api}/webhooks/test/project/p1`, { method: 'POST', headers: auth });
    const outcome = (await tested.json()) as { delivered: boolean; statusCode: number; workflowId: string };
    assert.equal(tested.status, 200, JSON.stringify(outcome));
    assert.equal(outcome.delivered, true);
    testWorkflowId = outcome.workflowId;
    // The API shares the process and the NativeConnection with the worker: Temporal handed the test's first workflow
    // task straight to it in the start response (eager start), not through the task queue.
    const history = await withTemporal((client) => client.workflow.getHandle(testWorkflowId).fetchHistory());
    assert.equal(history.events?.[0]?.workflowExecutionStartedEventAttributes?.eagerExecutionAccepted, true);
    const [delivery] = await receiver.waitForRequests(1);
    assert.ok(independentSignatureValid(registration.secret, delivery!), 'signature verifies over the raw bytes');
    assert.equal(typeof (JSON.parse(delivery!.rawBody.toString()) as { test: unknown }).test, 'string');

    await stop('SIGTERM');
  });

  it('starts again on the same data: the registration and the workflow history survived; Ctrl-C stops it cleanly', async () => {
    await start();
    const token = await cli('token', 'alice');
    const found = await fetch(`${api}/webhooks/project/p1`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(found.status, 200);
    assert.equal(((await found.json()) as { _id: string })._id, registrationId);

    const described = await withTemporal((client) => client.workflow.getHandle(testWorkflowId).describe());
    assert.equal(described.status.name, 'COMPLETED');
    await stop('Ctrl-C');
  });
});

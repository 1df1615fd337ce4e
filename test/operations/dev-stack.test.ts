import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Client as PgClient } from 'pg';
import { loadConfig, type Config } from '../../common/config';
import {
  DEV_DATABASE_NAME,
  devJwtSecret,
  isAlive,
  readRunningStack,
  startDevStack,
  type DevStack,
} from '../../dev/stack';
import { createLogger } from '../../common/telemetry/logger';
import { freePort } from '../../dev/ports';
import { temporalCliPath } from '../../dev/temporal-binaries';

const logger = createLogger('silent');
const WORKFLOW_ID = 'dev-stack-survives-restart';
const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

interface Started {
  env: { DATABASE_URL: string; TEMPORAL_ADDRESS: string; JWT_SECRET: string };
  pids: { postgres: number; temporal: number };
}

async function query<T>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new PgClient({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

async function withTemporal<T>(address: string, use: (client: TemporalClient) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address });
  try {
    return await use(new TemporalClient({ connection }));
  } finally {
    await connection.close();
  }
}

async function eventually(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

/** Runs the stack in a child Node process, as `npm start` would, with a SIGTERM handler that calls stop(). */
function startInChild(env: NodeJS.ProcessEnv): { child: ChildProcess; started: Promise<Started> } {
  const script = `
    const { startDevStack } = require(${JSON.stringify(resolve(__dirname, '../../dev/stack'))});
    const { loadConfig } = require(${JSON.stringify(resolve(__dirname, '../../common/config'))});
    const { createLogger } = require(${JSON.stringify(resolve(__dirname, '../../common/telemetry/logger'))});
    startDevStack({ config: loadConfig(), logger: createLogger('silent') }).then((stack) => {
      process.once('SIGTERM', () => stack.stop().then(() => process.exit(0)));
      console.log('DEVSTACK ' + JSON.stringify({ env: stack.env, pids: stack.pids }));
    }, (error) => { console.error(error); process.exit(1); });`;
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', '-e', script], {
    cwd: resolve(__dirname, '../..'),
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const started = new Promise<Started>((done, fail) => {
    let stdout = '';
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split('\n').find((l) => l.startsWith('DEVSTACK '));
      if (line) done(JSON.parse(line.slice('DEVSTACK '.length)) as Started);
    });
    child.once('exit', (code) => fail(new Error(`dev stack child exited (${code}) before it was ready:\n${stderr}`)));
  });
  return { child, started };
}

const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((done) =>
    child.exitCode !== null || child.signalCode !== null
      ? done(child.exitCode)
      : child.once('exit', (code) => done(code)),
  );

describe('dev stack (npm start with nothing configured)', function () {
  this.timeout(120_000);
  // The stages share one data folder and run in order: first start, restart, hard kill.
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let config: Config;
  let stack: DevStack | undefined;
  const children: ChildProcess[] = [];

  before(async function () {
    // A missing CLI is a failure, never a quiet skip (npm test installs it first: scripts/ensure-temporal-binaries.sh).
    if (!temporalCliPath()) throw new Error('no temporal CLI: set TEMPORAL_CLI_PATH or put temporal on PATH');
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-dev-stack-'));
    chmodSync(dataDir, 0o755); // run as root, PostgreSQL runs as the postgres user and must reach DATA_DIR/postgres
    env = {
      ...process.env,
      NODE_ENV: 'development',
      DATA_DIR: dataDir,
      DEV_POSTGRES_PORT: String(await freePort()),
      DEV_TEMPORAL_PORT: String(await freePort()),
      DEV_TEMPORAL_UI_PORT: String(await freePort()),
    };
    for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'JWT_SECRET', 'JWT_JWKS_URI', 'TEMPORAL_NAMESPACE'])
      delete env[name];
    config = loadConfig(env);
  });

  after(async () => {
    await stack?.stop();
    for (const child of children) {
      // SIGTERM runs the child's stop(); its stack must not outlive a failed test.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exitOf(child);
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts PostgreSQL with the webhooks database and Temporal with the search attributes, then stops both', async () => {
    const uiCodecEndpoint = 'http://127.0.0.1:3999/codec';
    stack = await startDevStack({ config, logger, env, uiCodecEndpoint });
    const { DATABASE_URL, TEMPORAL_ADDRESS, JWT_SECRET } = stack.env;
    assert.equal(DATABASE_URL, `postgres://postgres:postgres@127.0.0.1:${env.DEV_POSTGRES_PORT}/${DEV_DATABASE_NAME}`);
    assert.equal(TEMPORAL_ADDRESS, `127.0.0.1:${env.DEV_TEMPORAL_PORT}`);
    assert.equal(stack.uiUrl, `http://127.0.0.1:${env.DEV_TEMPORAL_UI_PORT}`);
    assert.match(JWT_SECRET ?? '', /^[0-9a-f]{64}$/);
    assert.equal(readFileSync(join(dataDir, 'jwt-secret'), 'utf8').trim(), JWT_SECRET, 'kept in DATA_DIR');
    assert.equal(devJwtSecret(config), JWT_SECRET, 'the CLI token command reads the same secret');

    const [row] = await query<{ db: string }>(DATABASE_URL, 'SELECT current_database() AS db');
    assert.equal(row?.db, 'webhooks');
    await query(DATABASE_URL, 'CREATE TABLE dev_stack_probe (note text)');
    await query(DATABASE_URL, 'INSERT INTO dev_stack_probe VALUES ($1)', ['written in the first run']);

    await withTemporal(TEMPORAL_ADDRESS, async (client) => {
      const { customAttributes } = await client.connection.operatorService.listSearchAttributes({
        namespace: 'default',
      });
      assert.equal(customAttributes.ProjectId, KEYWORD);
      assert.equal(customAttributes.WebhookType, KEYWORD);
      assert.equal(customAttributes.PersonHash, KEYWORD);
      // Nobody polls this queue: the execution stays open, which is enough to find it again after a restart.
      await client.workflow.start('deliverWebhookEvent', {
        taskQueue: 'dev-stack-test-nobody-polls',
        workflowId: WORKFLOW_ID,
        args: [{ projectId: 'p1', webhookType: 'TEST', userUUID: 'u', payload: { test: 'x' } }],
        searchAttributes: { ProjectId: ['p1'], WebhookType: ['TEST'] },
      });
    });
    assert.ok(existsSync(join(dataDir, 'temporal.db-wal')), 'Temporal persists to SQLite in WAL mode under DATA_DIR');
    assert.ok(existsSync(join(dataDir, 'postgres', 'PG_VERSION')), 'PostgreSQL keeps its data under DATA_DIR/postgres');
    const ui = await fetch(stack.uiUrl);
    assert.equal(ui.status, 200, 'the Temporal Web UI answers');
    const uiSettings = (await (await fetch(`${stack.uiUrl}/api/v1/settings`)).json()) as {
      Codec?: { Endpoint?: string };
    };
    assert.equal(uiSettings.Codec?.Endpoint, uiCodecEndpoint, "the UI decodes through the API's codec endpoint");
    assert.equal(
      stack.env.CODEC_CORS_ORIGINS,
      `http://127.0.0.1:${env.DEV_TEMPORAL_UI_PORT},http://localhost:${env.DEV_TEMPORAL_UI_PORT}`,
      'the API lets the UI call it from the browser',
    );
    assert.deepEqual(readRunningStack(dataDir), { DATABASE_URL, TEMPORAL_ADDRESS }, 'recorded for the CLI');

    const { postgres, temporal: temporalPid } = stack.pids;
    assert.ok(postgres && isAlive(postgres) && temporalPid && isAlive(temporalPid));
    await stack.stop();
    stack = undefined;
    assert.equal(isAlive(postgres), false, 'postgres is gone after stop()');
    assert.equal(isAlive(temporalPid), false, 'temporal is gone after stop()');
    assert.equal(existsSync(join(dataDir, 'dev-stack.json')), false, 'the record goes with the stack');
  });

  it('a second start reuses the data; SIGTERM to the process stops everything it started', async () => {
    const run = startInChild(env);
    const child = run.child;
    children.push(child);
    const { env: second, pids } = await run.started;
    assert.equal(second.JWT_SECRET, devJwtSecret(config), 'same development JWT secret');

    const rows = await query<{ note: string }>(second.DATABASE_URL, 'SELECT note FROM dev_stack_probe');
    assert.deepEqual(rows, [{ note: 'written in the first run' }]);
    await withTemporal(second.TEMPORAL_ADDRESS, async (client) => {
      const described = await client.workflow.getHandle(WORKFLOW_ID).describe();
      assert.equal(described.status.name, 'RUNNING');
      const found: string[] = [];
      for await (const execution of client.workflow.list({ query: 'ProjectId="p1" AND WebhookType="TEST"' }))
        found.push(execution.workflowId);
      assert.deepEqual(found, [WORKFLOW_ID], 'visibility (search attributes) survived the restart');
    });

    child.kill('SIGTERM');
    assert.equal(await exitOf(child), 0);
    assert.equal(isAlive(pids.postgres), false, 'no postgres left behind');
    assert.equal(isAlive(pids.temporal), false, 'no temporal left behind');
  });

  it('a hard-killed process leaves no orphaned postgres or temporal (the guard stops them)', async () => {
    const run = startInChild(env);
    const child = run.child;
    children.push(child);
    const { pids, env: started } = await run.started;
    assert.ok(isAlive(pids.postgres) && isAlive(pids.temporal));
    assert.equal(readRunningStack(dataDir)?.TEMPORAL_ADDRESS, started.TEMPORAL_ADDRESS);
    child.kill('SIGKILL');
    await exitOf(child);
    assert.ok(existsSync(join(dataDir, 'dev-stack.json')), 'a hard kill leaves the record behind');
    assert.equal(readRunningStack(dataDir), undefined, 'and the CLI does not take it for a running stack');
    await eventually(() => !isAlive(pids.postgres) && !isAlive(pids.temporal), 20_000, 'the orphan guard');
  });
});

describe('dev stack with configuration', () => {
  let dataDir: string;
  beforeEach(() => (dataDir = mkdtempSync(join(tmpdir(), 'webhooks-dev-stack-config-'))));
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it('uses whatever is configured instead of the embedded parts, and starts nothing', async () => {
    const config = loadConfig({
      DATA_DIR: dataDir,
      DATABASE_URL: 'postgres://app:pw@127.0.0.1:1/app',
      TEMPORAL_ADDRESS: '127.0.0.1:1',
      JWT_SECRET: 's'.repeat(32),
    });
    const stack = await startDevStack({ config, logger, env: {} });
    assert.deepEqual(stack.env, {});
    assert.deepEqual(stack.pids, {});
    assert.equal(stack.uiUrl, undefined);
    assert.equal(existsSync(join(dataDir, 'postgres')), false);
    assert.equal(devJwtSecret(config), 's'.repeat(32));
    await stack.stop();
  });

  it('in production embeds nothing and generates no JWT secret', async () => {
    const production = {
      NODE_ENV: 'production',
      DATA_DIR: dataDir,
      WEBHOOK_SECRET_KEY: 'a'.repeat(64),
      PAYLOAD_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
      TEMPORAL_ADDRESS: '127.0.0.1:1',
    };
    await assert.rejects(startDevStack({ config: loadConfig(production), logger, env: {} }), /DATABASE_URL/);
    const config = loadConfig({ ...production, DATABASE_URL: 'postgres://app:pw@127.0.0.1:1/app' });
    const stack = await startDevStack({ config, logger, env: {} });
    assert.deepEqual(stack.env, {});
    assert.equal(devJwtSecret(config), undefined);
    assert.equal(existsSync(join(dataDir, 'jwt-secret')), false);
  });

  it('refuses a taken port instead of talking to whatever listens there, naming the variable to change', async () => {
    const config = loadConfig({ DATA_DIR: dataDir, DATABASE_URL: 'postgres://app:pw@127.0.0.1:1/app' });
    const busy = createServer().listen(0, '127.0.0.1');
    await once(busy, 'listening');
    try {
      const env = { ...process.env, DEV_TEMPORAL_PORT: String((busy.address() as AddressInfo).port) };
      await assert.rejects(startDevStack({ config, logger, env }), /not available.*DEV_TEMPORAL_PORT/s);
    } finally {
      busy.close();
    }
  });

  it('names TEMPORAL_CLI_PATH when the temporal CLI cannot run', async () => {
    const config = loadConfig({ DATA_DIR: dataDir, DATABASE_URL: 'postgres://app:pw@127.0.0.1:1/app' });
    const env = { TEMPORAL_CLI_PATH: join(dataDir, 'no-such-temporal'), DEV_TEMPORAL_PORT: String(await freePort()) };
    await assert.rejects(startDevStack({ config, logger, env }), /TEMPORAL_CLI_PATH/);
  });
});

// `npm run bench [-- --quick] [-- --profile]`: delivery throughput and latency against the engine's own limit,
// raw send limit, growth and API throughput, in one run on this machine. Exits 1 when an event is unaccounted for.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, platform, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import jwt from 'jsonwebtoken';
import { temporalConnectionOptions } from '../common/temporal-connection';
import { loadConfig } from '../common/config';
import { freePort } from '../dev/ports';
import { createSecretBox, generateWebhookSecret } from '../common/secrets';
import { temporalCliPath } from '../dev/temporal-binaries';
import { addMember, addProject, createDb, createRegistration, migrateToLatest } from '../db';
import {
  CpuMeter,
  RssSampler,
  startEmptyWorker,
  startNodeService,
  startReceiver,
  type Accounting,
  type BenchProcess,
} from './processes';
import { NeighbourReceiver, floodStage, neighbourStage, type NeighbourFault, type NeighbourRow } from './neighbour';
import { evaluateTargets, formatReport, writeReport, type BenchReport, type GrowthRow } from './report';
import { DEV_SERVER_SQLITE_PRAGMAS, startBenchStack, type BenchStack } from './stack';
import {
  apiGet,
  apiRegisterDeleteCycle,
  engineLimit,
  pipelineSaturation,
  pipelineSteady,
  rawSendLimit,
  type StageContext,
} from './stages';

interface Plan {
  mode: 'full' | 'quick';
  n: number;
  sizes: number[];
  warmup: number;
  steadyRate: number;
  steadySeconds: number;
  apiSeconds: number;
  /** Neighbour stage: seconds of load per fault, latency window, the failing and the healthy project's rates. */
  neighbourSeconds: number;
  windowSeconds: number;
  neighbourRate: number;
  healthyRate: number;
  recoveryDeadlineSeconds: number;
  /** Flood stage: seconds of vitals at this multiple of the engine's limit (at most floodMaxRate), falls alongside. */
  floodSeconds: number;
  floodFactor: number;
  floodMaxRate: number;
  /** Worker settings of the run (quick mode shortens the breaker so its stages finish in seconds). */
  workerEnv: Record<string, string>;
}

const FULL: Plan = {
  mode: 'full',
  n: 2_000,
  sizes: [500, 2_000, 5_000],
  warmup: 50,
  steadyRate: 20,
  steadySeconds: 30,
  apiSeconds: 10,
  neighbourSeconds: 120,
  windowSeconds: 15,
  neighbourRate: 20,
  healthyRate: 2,
  recoveryDeadlineSeconds: 360,
  floodSeconds: 60,
  floodFactor: 1.5,
  floodMaxRate: 500,
  workerEnv: {},
};
const QUICK: Plan = {
  mode: 'quick',
  n: 20,
  sizes: [10, 20],
  warmup: 5,
  steadyRate: 10,
  steadySeconds: 2,
  apiSeconds: 1,
  neighbourSeconds: 3,
  windowSeconds: 1,
  neighbourRate: 10,
  healthyRate: 2,
  recoveryDeadlineSeconds: 60,
  floodSeconds: 2,
  floodFactor: 1.5,
  floodMaxRate: 30,
  workerEnv: {
    WEBHOOK_TIMEOUT_MS: '1000',
    BREAKER_OPEN_MS: '1000',
    BREAKER_MAX_OPEN_MS: '2000',
    BREAKER_RESUME_SPREAD_MS: '500',
  },
};

const NEIGHBOUR_FAULTS: NeighbourFault[] = ['hang', 'refuse', '503'];

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

function parsePlan(argv: string[]): { plan: Plan; out: string; profile: boolean; keep: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      n: { type: 'string' },
      sizes: { type: 'string' },
      'steady-seconds': { type: 'string' },
      'api-seconds': { type: 'string' },
      out: { type: 'string', default: join(__dirname, 'results', 'latest.json') },
      profile: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const plan = { ...(values.quick ? QUICK : FULL) };
  const positive = (text: string, name: string) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
    return value;
  };
  if (values.n) plan.n = positive(values.n, 'n');
  if (values.sizes) plan.sizes = values.sizes.split(',').map((size) => positive(size, 'sizes'));
  if (values['steady-seconds']) plan.steadySeconds = positive(values['steady-seconds'], 'steady-seconds');
  if (values['api-seconds']) plan.apiSeconds = positive(values['api-seconds'], 'api-seconds');
  if (!plan.sizes.includes(plan.n)) plan.sizes = [...plan.sizes, plan.n].sort((a, b) => a - b);
  return { plan, out: resolve(values.out), profile: values.profile, keep: values.keep };
}

function versions() {
  const cli = temporalCliPath();
  let temporalCli = 'configured server';
  if (cli) {
    try {
      temporalCli = execFileSync(cli, ['--version'], { encoding: 'utf8' })
        .trim()
        .replace(/^temporal version /, '');
    } catch {
      temporalCli = 'unknown';
    }
  }
  const sdk = JSON.parse(readFileSync(require.resolve('@temporalio/worker/package.json'), 'utf8')) as {
    version: string;
  };
  return { node: process.version, temporalCli, temporalSdk: sdk.version };
}

const BENCH_USER = 'bench-user';

async function main(): Promise<number> {
  const began = Date.now();
  const loadBefore = Math.round(loadavg()[0]! * 100) / 100;
  const { plan, out, profile, keep } = parsePlan(process.argv.slice(2));
  const config = loadConfig(process.env);
  const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-bench-'));
  const logDir = join(dataDir, 'logs');
  mkdirSync(logDir);
  const cpuProfDir = profile ? join(dataDir, 'profiles') : undefined;
  log(`data and logs in ${dataDir}`);

  const jwtSecret = randomBytes(32).toString('hex');
  const processes: BenchProcess[] = [];
  let stack: BenchStack | undefined;
  let connection: Connection | undefined;
  try {
    stack = await startBenchStack({ dataDir, config: { ...config, JWT_SECRET: jwtSecret } });
    log(`Postgres ${stack.postgres}, Temporal ${stack.temporal} at ${stack.temporalAddress}`);

    const runId = randomBytes(4).toString('hex');
    const secretKey = randomBytes(32).toString('hex');
    const secret = generateWebhookSecret();
    const projectId = `bench-project-${runId}`;
    const cycleProjects = Array.from({ length: 256 }, (_, i) => `bench-cycle-${runId}-${i}`);

    const receiver = await startReceiver(secret, logDir);
    processes.push(receiver);
    // The neighbour stage's failing receiver lives in this process; its port stays the same when it refuses.
    const neighbour = new NeighbourReceiver();
    await neighbour.start();
    const isolationProjects = {
      failing: `bench-neighbour-a-${runId}`,
      healthy: `bench-neighbour-b-${runId}`,
      flood: `bench-flood-${runId}`,
    };

    const db = createDb(stack.databaseUrl, { max: 2 });
    try {
      await migrateToLatest(db);
      for (const id of [projectId, ...cycleProjects]) {
        await addProject(db, id);
        await addMember(db, id, BENCH_USER);
      }
      const secretBox = createSecretBox(Buffer.from(secretKey, 'hex'));
      await createRegistration(db, secretBox, { projectId, url: receiver.url, types: ['FALL_DETECTION'] }, secret);
      const both = ['FALL_DETECTION', 'VITAL_THRESHOLD'] as const;
      for (const [id, url] of [
        [isolationProjects.failing, neighbour.url],
        [isolationProjects.healthy, receiver.url],
        [isolationProjects.flood, receiver.url],
      ] as const) {
        await addProject(db, id);
        await createRegistration(db, secretBox, { projectId: id, url, types: [...both] }, secret);
      }
    } finally {
      await db.destroy();
    }

    const apiPort = await freePort();
    const deliveryTaskQueue = `bench-deliveries-${runId}`;
    const emptyTaskQueue = `bench-empty-${runId}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'production',
      DATA_DIR: dataDir,
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_TASK_QUEUE: deliveryTaskQueue,
      WEBHOOK_SECRET_KEY: secretKey,
      JWT_SECRET: jwtSecret,
      PORT: String(apiPort),
      ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      // The bench receiver is plain http on 127.0.0.1; payloads are encrypted as in production.
      ALLOW_HTTP_WEBHOOK_URLS: 'true',
      PAYLOAD_ENCRYPTION_KEYS: `bench:${randomBytes(32).toString('base64')}`,
      LOG_PRETTY: 'false',
      ...plan.workerEnv,
    };
    const [worker, api, emptyWorker] = await Promise.all([
      startNodeService({ name: 'worker', env, logDir, cpuProfDir }),
      startNodeService({ name: 'api', env, logDir, cpuProfDir }),
      startEmptyWorker({ ...env, BENCH_EMPTY_TASK_QUEUE: emptyTaskQueue }, logDir),
    ]);
    processes.push(worker, api, emptyWorker);
    log('worker, API and engine-limit worker running');

    connection = await Connection.connect(
      temporalConnectionOptions({ ...config, TEMPORAL_ADDRESS: stack.temporalAddress }),
    );
    const ctx: StageContext = {
      client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }),
      ledger: receiver.ledger,
      receiverUrl: receiver.url,
      secret,
      projectId,
      deliveryTaskQueue,
      emptyTaskQueue,
      runId,
    };
    const problems: string[] = [];
    const check = (stage: string, accounting: Accounting) => {
      const { sent, lost, badSignatures, wrongBodies, duplicates, duplicateIds, lostIds } = accounting;
      if (lost) problems.push(`${stage}: ${lost} of ${sent} lost (${lostIds.slice(0, 5).join(', ')}…)`);
      if (badSignatures) problems.push(`${stage}: ${badSignatures} bad signature(s)`);
      if (wrongBodies) problems.push(`${stage}: ${wrongBodies} body mismatch(es)`);
      if (duplicates) problems.push(`${stage}: ${duplicates} duplicate(s): ${duplicateIds.join(', ')}`);
      if (receiver.ledger.unexpected) problems.push(`${stage}: ${receiver.ledger.unexpected} unexpected request(s)`);
      receiver.ledger.unexpected = 0;
    };

    log(`warm-up: ${plan.warmup} empty workflows and ${plan.warmup} deliveries`);
    await engineLimit(ctx, plan.warmup, 'warmup');
    check('warm-up', (await pipelineSaturation(ctx, plan.warmup, 'warmup')).accounting);

    const cpu = new CpuMeter([
      ...(stack.temporalPid ? [{ name: 'temporal', pid: stack.temporalPid }] : []),
      { name: 'worker', pid: worker.pid },
      { name: 'empty-worker', pid: emptyWorker.pid },
      ...(stack.postgresPid ? [{ name: 'postgres', pid: stack.postgresPid, withChildren: true }] : []),
      { name: 'bench', pid: process.pid },
      { name: 'receiver', pid: receiver.pid },
      { name: 'api', pid: api.pid },
    ]);
    log(`engine limit: ${plan.n} empty workflows`);
    await cpu.start();
    const engine = { ...(await engineLimit(ctx, plan.n, 'engine')), cpuSeconds: await cpu.stop() };
    log(`raw send limit: ${plan.n} signed POSTs`);
    const rawSend = await rawSendLimit(ctx, plan.n);
    check('raw send', rawSend.accounting);
    log(`steady load: ${plan.steadyRate}/s for ${plan.steadySeconds} s`);
    const steady = await pipelineSteady(ctx, plan.steadyRate, plan.steadySeconds, 'steady');
    check('steady', steady.accounting);

    const sampler = new RssSampler([worker.pid, api.pid, ...(stack.temporalPid ? [stack.temporalPid] : [])]);
    const growth: GrowthRow[] = [];
    for (const size of plan.sizes) {
      log(`pipeline at saturation: N = ${size}`);
      sampler.start();
      await cpu.start();
      const result = await pipelineSaturation(ctx, size, `saturation-${size}`);
      const cpuSeconds = await cpu.stop();
      const peaks = await sampler.stop();
      check(`saturation N=${size}`, result.accounting);
      growth.push({
        ...result,
        peakRssMb: {
          worker: peaks.get(worker.pid) ?? NaN,
          api: peaks.get(api.pid) ?? NaN,
          ...(stack.temporalPid && { temporal: peaks.get(stack.temporalPid) }),
        },
        cpuSeconds,
      });
    }
    const saturation = growth.find((row) => row.n === plan.n)!;

    const token = jwt.sign({ sub: BENCH_USER }, jwtSecret, { algorithm: 'HS256', expiresIn: 3600 });
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    log(`API: GET for ${plan.apiSeconds} s`);
    const get = await apiGet(apiUrl, token, projectId, plan.apiSeconds);
    log(`API: register/DELETE cycle for ${plan.apiSeconds} s`);
    const registerDelete = await apiRegisterDeleteCycle(apiUrl, token, cycleProjects, plan.apiSeconds);
    for (const [name, result] of [
      ['API GET', get],
      ['API register/DELETE', registerDelete],
    ] as const) {
      if (result.non2xx || result.errors)
        problems.push(
          `${name}: ${result.non2xx} non-2xx response(s), ${result.errors} error(s); statuses ${JSON.stringify(result.statusCodes)}`,
        );
    }

    const neighbourRows: NeighbourRow[] = [];
    for (const fault of NEIGHBOUR_FAULTS) {
      log(
        `neighbour: project A's receiver ${fault === '503' ? 'answers 503 with Retry-After: 0' : `${fault}s`} for ${plan.neighbourSeconds} s`,
      );
      const row = await neighbourStage(ctx, neighbour, isolationProjects, fault, {
        ...plan,
        seconds: plan.neighbourSeconds,
      });
      check(`neighbour ${fault}`, row.healthyAccounting);
      if (row.neighbourDelivered < row.neighbourSent)
        problems.push(
          `neighbour ${fault}: ${row.neighbourSent - row.neighbourDelivered} of A's ${row.neighbourSent} events did not arrive after recovery`,
        );
      if (row.neighbourUnderTwoIds)
        problems.push(`neighbour ${fault}: ${row.neighbourUnderTwoIds} of A's events arrived under two ids`);
      neighbourRows.push(row);
    }
    await neighbour.stop();
    const vitalRate = Math.min(
      plan.floodMaxRate,
      Math.max(1, Math.round(engine.completedPerSecond * plan.floodFactor)),
    );
    log(
      `flood: VITAL_THRESHOLD at ${vitalRate}/s and FALL_DETECTION at ${plan.healthyRate}/s for ${plan.floodSeconds} s`,
    );
    const flood = await floodStage(
      ctx,
      { vitals: isolationProjects.flood, falls: isolationProjects.healthy },
      { seconds: plan.floodSeconds, windowSeconds: plan.windowSeconds, vitalRate, fallRate: plan.healthyRate },
    );
    check('flood', flood.accounting);

    const cores = cpus();
    const partial: Omit<BenchReport, 'targets'> = {
      startedAt: new Date(began).toISOString(),
      mode: plan.mode,
      command: `npm run bench${plan.mode === 'quick' ? ' -- --quick' : ''}`,
      machine: {
        cores: cores.length,
        cpuModel: cores[0]?.model.trim() ?? 'unknown',
        memoryGiB: Math.round(totalmem() / 2 ** 30),
        platform: `${platform()} ${process.arch}`,
        loadAverage: { before: loadBefore, after: Math.round(loadavg()[0]! * 100) / 100 },
      },
      versions: versions(),
      stack: {
        postgres: stack.postgres,
        temporal:
          stack.temporal === 'configured' && stack.temporalPid
            ? `configured (pid ${stack.temporalPid})`
            : stack.temporal,
        sqlitePragmas: stack.temporal === 'dev-server' ? DEV_SERVER_SQLITE_PRAGMAS : [],
      },
      workerOptions: {
        WORKER_MAX_CONCURRENT_ACTIVITIES: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
        WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: config.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES,
        WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
        WORKER_MAX_CACHED_WORKFLOWS: config.WORKER_MAX_CACHED_WORKFLOWS,
        ...Object.fromEntries(Object.entries(plan.workerEnv).map(([key, value]) => [key, Number(value)])),
      },
      engine,
      rawSend,
      saturation,
      steady,
      growth,
      api: { get, registerDelete },
      neighbour: neighbourRows,
      flood,
      accountedFor: problems.length === 0,
      problems,
      durationSeconds: Math.round((Date.now() - began) / 1000),
    };
    const report: BenchReport = { ...partial, targets: evaluateTargets(partial) };
    writeReport(out, report);
    process.stdout.write(formatReport(report) + '\n');
    log(`figures written to ${out}`);
    return report.accountedFor ? 0 : 1;
  } finally {
    const stopping = Date.now();
    await connection?.close();
    await Promise.all(processes.map((child) => child.stop()));
    await stack?.stop();
    log(`stopped in ${((Date.now() - stopping) / 1000).toFixed(1)} s`);
    if (cpuProfDir) log(`CPU profiles kept in ${cpuProfDir}`);
    if (!keep && !cpuProfDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);

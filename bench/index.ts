// `npm run bench [-- --quick] [-- --stages a,b] [-- --faults f,g] [-- --engine-search] [-- --profile]
// [-- --dashboard docs/dashboard-bench.png]`: delivery throughput and latency against the engine's own limit, raw send
// limit, growth, API throughput, isolation, and on request a search of the engine settings, in one run on this machine;
// with --dashboard, also the shipped Grafana dashboard's panels over the run (bench/dashboard.ts), drawn into a PNG.
// Exits 1 when an event is unaccounted for.
import type { Knex } from 'knex';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, platform, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import jwt from 'jsonwebtoken';
import {
  temporalConnectionOptions,
  temporalTokenRefresher,
  tracingClientInterceptors,
} from '../common/temporal/connection';
import type { TokenRefresher } from '../common/temporal/token';
import { installTracing } from '../common/telemetry/tracing-sdk';
import { loadConfig, type Config } from '../common/config';
import { ENCRYPTED_ENCODING, payloadCodecFromConfig } from '../common/crypto/payload-codec';
import { eventWorkflowId } from '../client/emit';
import { freePort } from '../dev/ports';
import { createSecretBox, generateWebhookSecret } from '../common/crypto/secrets';
import { auditTrailKeysFromConfig, generateAuditSigningKey } from '../common/crypto/audit-keys';
import { configureAuditTrail } from '../db';
import { temporalCliPath } from '../dev/temporal-binaries';
import {
  addMember,
  addProject,
  createDb,
  createRegistration,
  dataKeyStore,
  migrateToLatest,
  type OAuthClientChange,
} from '../db';
import { auditStage, auditStageProblems } from './audit';
import { trailStage, trailStageProblems } from './trail';
import { QUICK_SEARCH_GRID, SEARCH_GRID, engineSearch } from './engine-search';
import { NeighbourReceiver, floodStage, neighbourStage, type NeighbourRow } from './neighbour';
import { SCRAPE_INTERVAL_SECONDS, startDashboardCapture, type DashboardCapture } from './dashboard';
import { WORKER_STAGES, commandOf, parseArgsToPlan, type Plan } from './plan';
import {
  CpuMeter,
  RssSampler,
  startEmptyWorker,
  startNodeService,
  startReceiver,
  type Accounting,
  type BenchProcess,
} from './processes';
import { evaluateTargets, formatReport, writeReport, type BenchReport, type GrowthRow } from './report';
import { DEV_SERVER_SQLITE_PRAGMAS, benchTemporalPid, startBenchStack, type BenchStack } from './stack';
import { ResourceMeter, type MeteredProcess } from './resources';
import {
  apiGet,
  apiRegisterDeleteCycle,
  apiTestRoundTrip,
  engineLimit,
  pipelineSaturation,
  pipelineSteady,
  rawSendLimit,
  type StageContext,
} from './stages';

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

function versions() {
  const cli = temporalCliPath();
  let temporalCli = 'none found';
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

type StageFigures = Pick<
  BenchReport,
  | 'stack'
  | 'engine'
  | 'rawSend'
  | 'saturation'
  | 'steady'
  | 'growth'
  | 'api'
  | 'audit'
  | 'trail'
  | 'neighbour'
  | 'flood'
  | 'resources'
> & { temporalServer?: string };

interface RunInputs {
  plan: Plan;
  config: Config;
  dataDir: string;
  logDir: string;
  cpuProfDir?: string;
  payloadKeys: string;
  problems: string[];
  /** What the run starts, stopped at the end whatever happens (stopAll). */
  processes: BenchProcess[];
  connection?: Connection;
  /** The bench client's access tokens for the cluster's authorizer (`--engine cluster`). */
  tokens?: TokenRefresher;
  resourceMeter?: ResourceMeter;
  /** The emitting client's reads of the projects' data keys. */
  keysDb?: Knex;
  neighbour?: NeighbourReceiver;
  /** `--options oauth`: the token endpoint, and how many tokens it issued. */
  tokenEndpoint?: Server;
  tokensIssued?: number;
  stack?: BenchStack;
  /** `--dashboard`: the PNG to write, and the Prometheus scraping the run for it. */
  dashboard?: { pngPath: string; command: string; capture?: DashboardCapture };
}

/** Raw PayloadCodec-free look at what the server stored: is the workflow's input encrypted? */
async function storedEncrypted(client: Client, workflowId: string): Promise<boolean> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  const encoding = payload?.metadata?.encoding;
  return encoding !== undefined && encoding !== null && Buffer.from(encoding).toString() === ENCRYPTED_ENCODING;
}

/**
 * The measured registration's options (`--options`): Ed25519 signatures, an OAuth client of a token endpoint served by
 * this process (a token an hour, so the worker's cache answers nearly every delivery, as in production), a rate limit
 * no stage reaches.
 */
async function registrationOptions(
  plan: Plan,
  inputs: RunInputs,
): Promise<Partial<Parameters<typeof createRegistration>[2]>> {
  const chosen = new Set(plan.options);
  let oauth: OAuthClientChange | undefined;
  if (chosen.has('oauth')) {
    const endpoint = createServer((request, response) => {
      inputs.tokensIssued = (inputs.tokensIssued ?? 0) + 1;
      request.resume().on('end', () => {
        const token = randomBytes(24).toString('base64url');
        response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        response.end(JSON.stringify({ access_token: token, token_type: 'Bearer', expires_in: 3600 }));
      });
    });
    await new Promise<void>((done) => endpoint.listen(0, '127.0.0.1', done));
    inputs.tokenEndpoint = endpoint;
    const { port } = endpoint.address() as AddressInfo;
    oauth = {
      info: {
        tokenUrl: `http://127.0.0.1:${port}/token`,
        clientId: 'bench',
        clientAuthentication: 'client_secret_basic',
        scope: null,
        keyId: null,
      },
      credential: randomBytes(16).toString('hex'),
    };
  }
  return {
    ...(chosen.has('v1a') && { signatureScheme: 'v1a' as const }),
    ...(oauth && { oauth }),
    ...(chosen.has('rate') && { rateLimitPerSecond: 1000 }),
  };
}

/** The stages on the bench stack: everything but the engine search. */
async function runStages(inputs: RunInputs): Promise<StageFigures> {
  const { plan, config, dataDir, logDir, cpuProfDir, problems, processes } = inputs;
  const selected = new Set(plan.stages);
  const jwtSecret = randomBytes(32).toString('hex');
  if (plan.engine === 'cluster') log('starting the Temporal cluster (8 hosts, HAProxy, mTLS, authorizer)');
  const stack: BenchStack = await startBenchStack({
    dataDir,
    config: { ...config, JWT_SECRET: jwtSecret },
    engine: plan.engine,
  });
  inputs.stack = stack;
  log(`Postgres ${stack.postgres}, Temporal ${stack.temporal} at ${stack.temporalAddress}`);

  const runId = randomBytes(4).toString('hex');
  const secretKey = randomBytes(32).toString('hex');
  const secret = generateWebhookSecret();
  const projectId = `bench-project-${runId}`;
  const cycleProjects = Array.from({ length: 256 }, (_, i) => `bench-cycle-${runId}-${i}`);

  const receiver = await startReceiver(secret, logDir);
  processes.push(receiver);
  // The test button's receiver: the same verifying receiver (2xx to a valid signature), its own ledger.
  const testReceiver = selected.has('api') ? await startReceiver(secret, logDir, 'test-receiver') : undefined;
  if (testReceiver) processes.push(testReceiver);
  // The neighbour stage's failing receiver lives in this process; its port stays the same when it refuses.
  const neighbour = new NeighbourReceiver();
  await neighbour.start();
  inputs.neighbour = neighbour;
  const testProject = `bench-test-${runId}`;
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
    await createRegistration(
      db,
      secretBox,
      {
        projectId,
        url: receiver.url,
        types: ['FALL_DETECTION'],
        ...(await registrationOptions(plan, inputs)),
      },
      secret,
    );
    if (testReceiver) {
      await addProject(db, testProject);
      await addMember(db, testProject, BENCH_USER);
      await createRegistration(
        db,
        secretBox,
        { projectId: testProject, url: testReceiver.url, types: ['FALL_DETECTION'] },
        secret,
      );
    }
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
  const appPort = await freePort();
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
    // Production's audit keys and digest directory, the run's own.
    AUDIT_HMAC_KEYS: `bench:${randomBytes(32).toString('hex')}`,
    AUDIT_SIGNING_KEY: generateAuditSigningKey('bench'),
    AUDIT_DIGEST_DIR: join(dataDir, 'audit-digests'),
    PERSON_HASH_KEY: randomBytes(32).toString('hex'),
    JWT_SECRET: jwtSecret,
    // Production requires a bearer token for /metrics; the bench does not scrape it.
    METRICS_TOKEN: randomBytes(24).toString('hex'),
    PUBLIC_BASE_URL: 'https://hooks.example.com',
    PORT: String(apiPort),
    ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
    // The bench receiver is plain http on 127.0.0.1; payloads are encrypted as in production.
    ALLOW_HTTP_WEBHOOK_URLS: 'true',
    PAYLOAD_ENCRYPTION_KEYS: inputs.payloadKeys,
    LOG_PRETTY: 'false',
    // The API stage's register/DELETE cycles are one caller writing far faster than a person does.
    AUDITED_WRITES_PER_MINUTE: '1000000',
    ...stack.clientEnv,
    ...plan.workerEnv,
  };
  // Stages that need the delivery worker; the API stage needs the API; the engine stage the empty worker.
  const needsWorker = WORKER_STAGES.some((stage) => selected.has(stage));
  // The dashboard reads the worker's metrics endpoint and the API's /metrics (per-project breaker gauges).
  const workerMetricsPort = inputs.dashboard ? await freePort() : undefined;
  const needsApi = selected.has('api') || inputs.dashboard !== undefined;
  // The test button as `npm start` serves it: API and worker in one process, its starts eager on the worker's connection.
  const appEnv: NodeJS.ProcessEnv = {
    ...env,
    PORT: String(appPort),
    TEMPORAL_TASK_QUEUE: `bench-app-${runId}`,
    TEST_EVENTS_PER_MINUTE: '10000',
  };
  const [worker, api, app, emptyWorker] = await Promise.all([
    needsWorker
      ? startNodeService({
          name: 'worker',
          env: { ...env, ...(workerMetricsPort && { WORKER_METRICS_PORT: String(workerMetricsPort) }) },
          logDir,
          cpuProfDir,
        })
      : undefined,
    needsApi ? startNodeService({ name: 'api', env, logDir, cpuProfDir }) : undefined,
    selected.has('api') ? startNodeService({ name: 'app', env: appEnv, logDir, cpuProfDir }) : undefined,
    selected.has('engine') ? startEmptyWorker({ ...env, BENCH_EMPTY_TASK_QUEUE: emptyTaskQueue }, logDir) : undefined,
  ]);
  for (const child of [worker, api, app, emptyWorker]) if (child) processes.push(child);
  log(
    `running: ${[worker, api, app, emptyWorker].flatMap((child) => (child ? [child.name] : [])).join(', ') || 'no service'}`,
  );

  if (inputs.dashboard && workerMetricsPort) {
    log(`dashboard: Prometheus scraping the API's /metrics and the worker's port ${workerMetricsPort}`);
    inputs.dashboard.capture = await startDashboardCapture({
      dir: join(dataDir, 'prometheus'),
      apiPort,
      metricsToken: env.METRICS_TOKEN!,
      workerMetricsPort,
    });
  }

  // On the cluster: mTLS with the workers' certificate, and an access token for the authorizer, as a monitoring
  // system connects.
  const clientConfig = { ...config, TEMPORAL_ADDRESS: stack.temporalAddress, ...stack.clientEnv };
  const tokens = stack.clientEnv ? await temporalTokenRefresher(clientConfig) : undefined;
  inputs.tokens = tokens;
  const connection = await Connection.connect({
    ...temporalConnectionOptions(clientConfig),
    ...(tokens && { apiKey: () => tokens.current() }),
  });
  inputs.connection = connection;
  const keysDb = createDb(stack.databaseUrl, { max: 2 });
  inputs.keysDb = keysDb;
  const temporalServer = await connection.workflowService
    .getClusterInfo({})
    .then((info) => info.serverVersion || undefined)
    // Behind the cluster's authorizer GetClusterInfo is a cluster-wide call a `default:write` token may not make;
    // GetSystemInfo answers every caller.
    .catch(() =>
      connection.workflowService
        .getSystemInfo({})
        .then((info) => info.serverVersion || undefined)
        .catch(() => undefined),
    );
  // With OTEL_* set, the bench's emits start the traces, sampled here (OTEL_TRACES_SAMPLER), as a monitoring system's.
  installTracing('webhooks-bench');
  const ctx: StageContext = {
    // Encrypting like every production client, so the server stores and the worker decodes what it would in production:
    // each event under its project's data key, as a monitoring system given the data keys seals it.
    client: new Client({
      ...tracingClientInterceptors(),
      connection,
      namespace: config.TEMPORAL_NAMESPACE,
      dataConverter: {
        payloadCodecs: [
          payloadCodecFromConfig(
            { PAYLOAD_ENCRYPTION_KEYS: inputs.payloadKeys, DATA_DIR: dataDir, NODE_ENV: 'production' },
            undefined,
            dataKeyStore(keysDb),
          ),
        ],
      },
    }),
    ledger: receiver.ledger,
    receiverUrl: receiver.url,
    secret,
    projectId,
    deliveryTaskQueue,
    emptyTaskQueue,
    runId,
  };
  const check = (stage: string, accounting: Accounting) => {
    const { sent, lost, badSignatures, wrongBodies, duplicates, duplicateIds, lostIds } = accounting;
    if (lost) problems.push(`${stage}: ${lost} of ${sent} lost (${lostIds.slice(0, 5).join(', ')}…)`);
    if (badSignatures) problems.push(`${stage}: ${badSignatures} bad signature(s)`);
    if (wrongBodies) problems.push(`${stage}: ${wrongBodies} body mismatch(es)`);
    if (duplicates) problems.push(`${stage}: ${duplicates} duplicate(s): ${duplicateIds.join(', ')}`);
    if (receiver.ledger.unexpected) problems.push(`${stage}: ${receiver.ledger.unexpected} unexpected request(s)`);
    receiver.ledger.unexpected = 0;
  };

  if (emptyWorker) {
    log(`warm-up: ${plan.warmup} empty workflows`);
    await engineLimit(ctx, plan.warmup, 'warmup');
  }
  if (worker) {
    log(`warm-up: ${plan.warmup} deliveries`);
    check('warm-up', (await pipelineSaturation(ctx, plan.warmup, 'warmup')).accounting);
    if (!(await storedEncrypted(ctx.client, eventWorkflowId(`bench-${runId}-warmup-0`))))
      problems.push(`warm-up: the server stored an event's input without ${ENCRYPTED_ENCODING}`);
  }

  // A configured server's process: counted with its children (a wrapper script or container init may start it).
  const configuredTemporal = stack.temporal === 'configured';
  const temporalHosts = (stack.temporalProcesses ?? []).map(({ name, pid }) => ({ name, pid }));
  const cpu = new CpuMeter([
    ...(stack.temporalPid ? [{ name: 'temporal', pid: stack.temporalPid, withChildren: configuredTemporal }] : []),
    ...temporalHosts,
    ...(worker ? [{ name: 'worker', pid: worker.pid }] : []),
    ...(emptyWorker ? [{ name: 'empty-worker', pid: emptyWorker.pid }] : []),
    ...(stack.postgresPid ? [{ name: 'postgres', pid: stack.postgresPid, withChildren: true }] : []),
    { name: 'bench', pid: process.pid },
    { name: 'receiver', pid: receiver.pid },
    ...(api ? [{ name: 'api', pid: api.pid }] : []),
    ...(app ? [{ name: 'app', pid: app.pid }] : []),
  ]);
  // Each part of the system on its own, for the per-delivery figures (docs/capacity.md): a cluster's hosts summed
  // per service, PostgreSQL split by database.
  const metered: MeteredProcess[] = [
    ...(stack.temporalProcesses ?? []).map(({ service, pid }) => ({
      part: service === 'haproxy' ? 'haproxy' : `temporal ${service}`,
      pid,
    })),
    ...(stack.temporalPid
      ? [{ part: 'temporal (dev server)', pid: stack.temporalPid, withChildren: configuredTemporal }]
      : []),
    ...(worker ? [{ part: 'worker', pid: worker.pid }] : []),
    ...(api ? [{ part: 'api', pid: api.pid }] : []),
    { part: 'bench (load generator)', pid: process.pid },
    { part: 'receiver', pid: receiver.pid },
  ];
  const meter = new ResourceMeter({
    processes: metered,
    ...(stack.postgres === 'embedded' && { databaseUrl: stack.databaseUrl }),
    postgresPid: stack.postgresPid,
    sqliteFiles: stack.sqliteFiles,
    ...(stack.temporal === 'cluster' && { balancerPort: Number(stack.temporalAddress.split(':').at(-1)) }),
  });
  inputs.resourceMeter = meter;
  const figures: StageFigures = {
    temporalServer,
    stack: {
      postgres: stack.postgres,
      temporal: stack.temporal,
      ...(stack.historyShards && { historyShards: stack.historyShards }),
      ...(stack.temporalPid && configuredTemporal && { temporalPid: stack.temporalPid }),
      sqlitePragmas: stack.temporal === 'dev-server' ? DEV_SERVER_SQLITE_PRAGMAS : [],
    },
  };

  if (emptyWorker) {
    log(`engine limit: ${plan.n} empty workflows`);
    await cpu.start();
    figures.engine = { ...(await engineLimit(ctx, plan.n, 'engine')), cpuSeconds: withTemporalTotal(await cpu.stop()) };
  }
  if (selected.has('raw')) {
    log(`raw send limit: ${plan.n} signed POSTs`);
    figures.rawSend = await rawSendLimit(ctx, plan.n);
    check('raw send', figures.rawSend.accounting);
  }
  if (selected.has('steady')) {
    log(`steady load: ${plan.steadyRate}/s for ${plan.steadySeconds} s`);
    await meter.start();
    figures.steady = await pipelineSteady(ctx, plan.steadyRate, plan.steadySeconds, 'steady');
    figures.resources = { steady: await meter.stop(figures.steady.accounting.delivered) };
    check('steady', figures.steady.accounting);
  }
  if (selected.has('saturation') && worker) {
    const sampler = new RssSampler([
      worker.pid,
      ...(api ? [api.pid] : []),
      ...(stack.temporalPid ? [stack.temporalPid] : []),
    ]);
    const growth: GrowthRow[] = [];
    for (const size of plan.sizes) {
      log(`pipeline at saturation: N = ${size}`);
      sampler.start();
      await cpu.start();
      if (size === plan.n) await meter.start();
      const result = await pipelineSaturation(ctx, size, `saturation-${size}`);
      if (size === plan.n)
        figures.resources = { ...figures.resources, saturation: await meter.stop(result.accounting.delivered) };
      const cpuSeconds = withTemporalTotal(await cpu.stop());
      const peaks = await sampler.stop();
      check(`saturation N=${size}`, result.accounting);
      growth.push({
        ...result,
        peakRssMb: {
          worker: peaks.get(worker.pid) ?? NaN,
          ...(api && { api: peaks.get(api.pid) ?? NaN }),
          ...(stack.temporalPid && { temporal: peaks.get(stack.temporalPid) }),
        },
        cpuSeconds,
      });
    }
    figures.growth = growth;
    figures.saturation = growth.find((row) => row.n === plan.n)!;
  }
  if (figures.resources) {
    const rates = [...(figures.growth ?? []), ...(figures.steady ? [figures.steady] : [])];
    figures.resources.peakDeliveredPerSecond = Math.max(...rates.map((row) => row.deliveredPerSecond));
  }

  if (api && selected.has('api')) {
    const token = jwt.sign({ sub: BENCH_USER }, jwtSecret, { algorithm: 'HS256', expiresIn: 3600 });
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    log(`API: GET for ${plan.apiSeconds} s`);
    const get = await apiGet(apiUrl, token, projectId, plan.apiSeconds);
    log(`API: register/DELETE cycle for ${plan.apiSeconds} s`);
    const registerDelete = await apiRegisterDeleteCycle(apiUrl, token, cycleProjects, plan.apiSeconds);
    log(`API: test button, ${plan.testRoundTrips} round trips one at a time (npm start's process)`);
    const testButton = await apiTestRoundTrip(
      `http://127.0.0.1:${appPort}`,
      token,
      testProject,
      plan.testRoundTrips,
      plan.testWarmup,
    );
    if (testButton.failures)
      problems.push(
        `API test button: ${testButton.failures} call(s) not delivered with a 2xx: ${JSON.stringify(testButton.outcomes)}`,
      );
    for (const [name, result] of [
      ['API GET', get],
      ['API register/DELETE', registerDelete],
    ] as const) {
      if (result.non2xx || result.errors)
        problems.push(
          `${name}: ${result.non2xx} non-2xx response(s), ${result.errors} error(s); statuses ${JSON.stringify(result.statusCodes)}`,
        );
    }
    figures.api = { get, registerDelete, testButton };
  }

  if (selected.has('audit')) {
    log(`audit: register, test button and codec decode, with and without the audit rows, ${plan.auditSeconds} s each`);
    figures.audit = await auditStage(stack.databaseUrl, {
      seconds: plan.auditSeconds,
      rounds: plan.auditRounds,
      log,
    });
    problems.push(...auditStageProblems(figures.audit));
  }

  if (selected.has('trail')) {
    // The stage's API processes get the run's env; B's breaker transitions run in this process, as a worker's do, and
    // chain, sign and journal their rows with the same keys.
    mkdirSync(env.AUDIT_DIGEST_DIR!, { recursive: true });
    configureAuditTrail(
      auditTrailKeysFromConfig({
        NODE_ENV: 'production',
        DATA_DIR: dataDir,
        AUDIT_HMAC_KEYS: env.AUDIT_HMAC_KEYS,
        AUDIT_SIGNING_KEY: env.AUDIT_SIGNING_KEY,
        AUDIT_DIGEST_DIR: env.AUDIT_DIGEST_DIR,
      }),
    );
    figures.trail = await trailStage(stack.databaseUrl, {
      seconds: plan.trailSeconds,
      loops: plan.trailLoops,
      writesPerMinute: plan.trailWritesPerMinute,
      env,
      logDir,
      cpuProfDir,
      log,
    });
    problems.push(...trailStageProblems(figures.trail));
  }

  if (selected.has('neighbour')) {
    const rows: NeighbourRow[] = [];
    // The delivery log counts the attempts against a receiver that refuses connections (none reach it to be counted).
    const logDb = createDb(stack.databaseUrl, { max: 1 });
    const loggedAttempts = async (failingProject: string, from: number, to: number) =>
      (
        await logDb('delivery_attempts as a')
          .join('deliveries as d', (on) =>
            on.on('d.id', 'a.delivery_id').andOn('d.created_at', 'a.delivery_created_at'),
          )
          .where('d.project_id', failingProject)
          .whereRaw('a.at >= to_timestamp(? / 1000.0) and a.at < to_timestamp(? / 1000.0)', [from, to])
          .select(logDb.raw('extract(epoch from a.at) * 1000 as at'))
      ).map((row: { at: string | number }) => Number(row.at));
    try {
      for (const fault of plan.faults) {
        log(
          `neighbour: project A's receiver ${fault === '503' ? 'answers 503 with Retry-After: 0' : `${fault}s`} for ${plan.neighbourSeconds} s`,
        );
        const row = await neighbourStage(
          ctx,
          neighbour,
          isolationProjects,
          fault,
          { ...plan, seconds: plan.neighbourSeconds },
          loggedAttempts,
        );
        check(`neighbour ${fault}`, row.healthyAccounting);
        if (row.neighbourDelivered < row.neighbourSent)
          problems.push(
            `neighbour ${fault}: ${row.neighbourSent - row.neighbourDelivered} of A's ${row.neighbourSent} events did not arrive after recovery`,
          );
        if (row.neighbourUnderTwoIds)
          problems.push(`neighbour ${fault}: ${row.neighbourUnderTwoIds} of A's events arrived under two ids`);
        rows.push(row);
      }
    } finally {
      await logDb.destroy();
    }
    figures.neighbour = rows;
  }
  if (selected.has('flood')) {
    const engineRate = figures.engine?.completedPerSecond ?? plan.floodAssumedEngineRate;
    const vitalRate = Math.min(plan.floodMaxRate, Math.max(1, Math.round(engineRate * plan.floodFactor)));
    const vitalRateBasis =
      `${plan.floodFactor} × ${figures.engine ? 'the engine limit of this run' : 'an assumed engine limit'} ` +
      `(${engineRate}/s)${Math.round(engineRate * plan.floodFactor) > plan.floodMaxRate ? `, capped at ${plan.floodMaxRate}/s` : ''}`;
    log(
      `flood: VITAL_THRESHOLD at ${vitalRate}/s and FALL_DETECTION at ${plan.healthyRate}/s for ${plan.floodSeconds} s`,
    );
    figures.flood = await floodStage(
      ctx,
      { vitals: isolationProjects.flood, falls: isolationProjects.healthy },
      {
        seconds: plan.floodSeconds,
        windowSeconds: plan.windowSeconds,
        vitalRate,
        vitalRateBasis,
        fallRate: plan.healthyRate,
      },
    );
    check('flood', figures.flood.accounting);
  }
  if (inputs.dashboard?.capture) await drawDashboard(inputs.dashboard, dataDir);
  return figures;
}

/** A cluster's hosts are measured one by one (`temporal history-1`, …); `temporal` is their sum, as the dev server's. */
function withTemporalTotal(cpuSeconds: Record<string, number>): Record<string, number> {
  const hosts = Object.entries(cpuSeconds).filter(([name]) => name.startsWith('temporal '));
  if (hosts.length === 0 || cpuSeconds.temporal !== undefined) return cpuSeconds;
  return { ...cpuSeconds, temporal: Math.round(hosts.reduce((sum, [, used]) => sum + used, 0) * 10) / 10 };
}

/** The commit of the bench's sources (with `-dirty` when they differ from it), or undefined outside git. */
function sourceCommit(): string | undefined {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty', '--abbrev=7'], {
      cwd: join(__dirname, '..'),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

/** `--dashboard`: every panel's queries over the run, drawn into the PNG; the panels without data are logged. */
async function drawDashboard(dashboard: NonNullable<RunInputs['dashboard']>, dataDir: string): Promise<void> {
  const commit = sourceCommit();
  const clock = (unix: number) => new Date(unix * 1000).toISOString().replace('T', ' ').slice(0, 19);
  log(`dashboard: querying every panel over the run and drawing ${dashboard.pngPath}`);
  const empty = await dashboard.capture!.finish({
    pngPath: dashboard.pngPath,
    keepDir: dataDir,
    caption: (facts) => [
      `The panels of \`deploy/grafana/dashboards/webhook-delivery.json\`, each query evaluated by Prometheus ${facts.prometheusVersion} ` +
        `(/api/v1/query_range) over a bench run, ${clock(facts.from)}–${clock(facts.to).slice(11)} UTC` +
        `${commit ? ` at commit ${commit}` : ''}: \`${dashboard.command}\`.`,
      `Prometheus scraped the bench's worker (WORKER_METRICS_PORT) and API (/metrics) every ${SCRAPE_INTERVAL_SECONDS} s; ` +
        `step ${facts.stepSeconds} s, $__rate_interval ${facts.rateInterval} (Grafana's rule for that scrape interval). ` +
        `Drawn by bench/dashboard-render.ts in Chromium, not by Grafana; an empty panel says "No data".`,
    ],
  });
  log(`dashboard: written to ${dashboard.pngPath}${empty.length ? `; no data in: ${empty.join('; ')}` : ''}`);
}

async function main(): Promise<number> {
  const began = Date.now();
  const loadBefore = Math.round(loadavg()[0]! * 100) / 100;
  const { plan, out, profile, keep, dashboard } = parseArgsToPlan(process.argv.slice(2));
  const config = loadConfig(process.env);
  const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-bench-'));
  const logDir = join(dataDir, 'logs');
  mkdirSync(logDir);
  const cpuProfDir = profile ? join(dataDir, 'profiles') : undefined;
  log(`stages ${plan.stages.join(', ')}; data and logs in ${dataDir}`);

  const inputs: RunInputs = {
    plan,
    config,
    dataDir,
    logDir,
    cpuProfDir,
    payloadKeys: `bench:${randomBytes(32).toString('base64')}`,
    problems: [],
    processes: [],
    ...(dashboard && {
      dashboard: { pngPath: dashboard, command: `npm run bench -- ${process.argv.slice(2).join(' ')}` },
    }),
  };
  try {
    const onStack = plan.stages.some((stage) => stage !== 'engine-search');
    const { temporalServer, ...figures }: StageFigures = onStack ? await runStages(inputs) : {};
    let engineSearchResult: BenchReport['engineSearch'];
    if (plan.stages.includes('engine-search')) {
      await stopAll(inputs);
      const configuredAddress = config.TEMPORAL_ADDRESS;
      engineSearchResult = await engineSearch({
        n: plan.searchN,
        warmup: plan.searchWarmup,
        grid: plan.mode === 'quick' ? QUICK_SEARCH_GRID : SEARCH_GRID,
        config,
        codec: payloadCodecFromConfig({
          PAYLOAD_ENCRYPTION_KEYS: inputs.payloadKeys,
          DATA_DIR: dataDir,
          NODE_ENV: 'production',
        }),
        configuredAddress,
        configuredPid: configuredAddress ? benchTemporalPid() : undefined,
        cliPath: temporalCliPath(config),
        env: {
          ...process.env,
          NODE_ENV: 'production',
          DATA_DIR: dataDir,
          PAYLOAD_ENCRYPTION_KEYS: inputs.payloadKeys,
          // Production settings want one; the empty worker never opens a registration secret.
          WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
          LOG_PRETTY: 'false',
        },
        dataDir,
        logDir,
        runId: randomBytes(4).toString('hex'),
        log,
      });
      for (const failure of engineSearchResult.failures)
        inputs.problems.push(`engine search ${failure.label}: ${failure.error}`);
    }

    const cores = cpus();
    const partial: Omit<BenchReport, 'targets'> = {
      startedAt: new Date(began).toISOString(),
      mode: plan.mode,
      command: commandOf(plan),
      stages: plan.stages,
      ...(plan.options.length && { options: plan.options, tokensIssued: inputs.tokensIssued ?? 0 }),
      faults: plan.stages.includes('neighbour') ? plan.faults : [],
      machine: {
        cores: cores.length,
        cpuModel: cores[0]?.model.trim() ?? 'unknown',
        memoryGiB: Math.round(totalmem() / 2 ** 30),
        platform: `${platform()} ${process.arch}`,
        loadAverage: { before: loadBefore, after: Math.round(loadavg()[0]! * 100) / 100 },
      },
      versions: { ...versions(), ...(temporalServer && { temporalServer }) },
      payloadEncryption: true,
      workerOptions: {
        WORKER_MAX_CONCURRENT_ACTIVITIES: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
        WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: config.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES,
        WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
        WORKER_MAX_CACHED_WORKFLOWS: config.WORKER_MAX_CACHED_WORKFLOWS,
        ...(config.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS && {
          WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS,
        }),
        ...(config.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS && {
          WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: config.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS,
        }),
        ...(config.WORKER_NONSTICKY_POLL_RATIO && { WORKER_NONSTICKY_POLL_RATIO: config.WORKER_NONSTICKY_POLL_RATIO }),
        ...Object.fromEntries(Object.entries(plan.workerEnv).map(([key, value]) => [key, Number(value)])),
      },
      ...figures,
      ...(engineSearchResult && { engineSearch: engineSearchResult }),
      accountedFor: inputs.problems.length === 0,
      problems: inputs.problems,
      durationSeconds: Math.round((Date.now() - began) / 1000),
    };
    const report: BenchReport = { ...partial, targets: evaluateTargets(partial) };
    writeReport(out, report);
    process.stdout.write(formatReport(report) + '\n');
    log(`figures written to ${out}`);
    return report.accountedFor ? 0 : 1;
  } finally {
    const stopping = Date.now();
    await stopAll(inputs);
    log(`stopped in ${((Date.now() - stopping) / 1000).toFixed(1)} s`);
    if (cpuProfDir) log(`CPU profiles kept in ${cpuProfDir}`);
    if (!keep && !cpuProfDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Closes the client, stops the services, the failing receiver and the stack; safe to call twice. */
async function stopAll(inputs: RunInputs): Promise<void> {
  const { connection, keysDb, neighbour, stack, tokenEndpoint, tokens, resourceMeter } = inputs;
  const capture = inputs.dashboard?.capture;
  if (inputs.dashboard) inputs.dashboard.capture = undefined;
  Object.assign(inputs, {
    connection: undefined,
    keysDb: undefined,
    neighbour: undefined,
    stack: undefined,
    tokenEndpoint: undefined,
    tokens: undefined,
    resourceMeter: undefined,
  });
  tokens?.stop();
  await resourceMeter?.close().catch(() => undefined);
  tokenEndpoint?.closeAllConnections();
  await new Promise((done) => (tokenEndpoint ? tokenEndpoint.close(done) : done(undefined)));
  await capture?.stop().catch(() => undefined);
  await connection?.close().catch(() => undefined);
  await keysDb?.destroy().catch(() => undefined);
  await Promise.all(inputs.processes.splice(0).map((child) => child.stop()));
  await neighbour?.stop().catch(() => undefined);
  await stack?.stop().catch(() => undefined);
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

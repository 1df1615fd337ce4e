import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_STAGES, commandOf, parseArgsToPlan } from '../../bench/plan';
import { evaluateTargets, formatReport, type BenchReport } from '../../bench/report';

const ROOT = join(__dirname, '..', '..');

/** Runs the bench in quick mode as `npm run bench -- --quick` would (sources through tsx, the worker and API compiled). */
function runQuickBench(
  out: string,
  args: string[] = [],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--require', 'tsx/cjs', join(ROOT, 'bench', 'index.ts'), '--quick', '--out', out, ...args],
      {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: '', TEMPORAL_ADDRESS: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('bench quick mode (npm run bench -- --quick)', function () {
  // The neighbour and flood stages add about half a minute on a loaded 2-core machine.
  this.timeout(300_000);
  let dir: string;
  let report: BenchReport;
  let stdout: string;

  before(async () => {
    // The bench runs the compiled worker and API: build them from these sources, as `npm run bench` does.
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' });
    dir = mkdtempSync(join(tmpdir(), 'webhooks-bench-test-'));
    const out = join(dir, 'latest.json');
    const run = await runQuickBench(out);
    stdout = run.stdout;
    assert.equal(run.code, 0, `bench exited ${run.code}\n${run.stdout}\n${run.stderr.slice(-4_000)}`);
    report = JSON.parse(readFileSync(out, 'utf8')) as BenchReport;
  });
  after(() => dir && rmSync(dir, { recursive: true, force: true }));

  it('accounts for every event of every stage: delivered once, signature valid, nothing lost', () => {
    assert.equal(report.accountedFor, true, report.problems.join('\n'));
    assert.deepEqual(report.problems, []);
    for (const stage of [report.rawSend!, report.saturation!, report.steady!, ...report.growth!]) {
      const { sent, delivered, lost, duplicates, badSignatures, wrongBodies } = stage.accounting;
      assert.ok(sent > 0);
      assert.deepEqual(
        { delivered, lost, duplicates, badSignatures, wrongBodies },
        {
          delivered: sent,
          lost: 0,
          duplicates: 0,
          badSignatures: 0,
          wrongBodies: 0,
        },
      );
      assert.equal(stage.latencyMs.count, sent);
    }
    assert.equal(report.engine!.completed, report.engine!.n);
  });

  it('reports every figure, the machine and the versions, and prints them as a table', () => {
    const { engine, rawSend, saturation, steady, growth, api } = report;
    assert.equal(report.mode, 'quick');
    assert.deepEqual(report.stages, DEFAULT_STAGES);
    assert.equal(report.engineSearch, undefined, 'the engine search runs only when asked for');
    assert.ok(engine && engine.completedPerSecond > 0);
    assert.ok(rawSend && rawSend.deliveredPerSecond > 0);
    assert.ok(saturation && saturation.deliveredPerSecond > 0);
    assert.ok(steady && steady.latencyMs.p99 >= steady.latencyMs.p50);
    assert.deepEqual(
      growth?.map((row) => row.n),
      [10, 20],
    );
    for (const row of growth) assert.ok(row.peakRssMb.worker > 0 && (row.peakRssMb.api ?? 0) > 0);
    assert.ok(api && api.get.requests > 0 && api.registerDelete.requests > 0);
    assert.equal(api.get.non2xx + api.registerDelete.non2xx, 0);
    // The test button in npm start's process: every round trip delivered with a 2xx.
    assert.ok(api.testButton && api.testButton.latencyMs.count === api.testButton.n && api.testButton.n > 0);
    assert.equal(api.testButton.failures, 0, JSON.stringify(api.testButton.outcomes));
    assert.ok(report.machine.cores > 0 && report.machine.memoryGiB > 0);
    assert.match(report.versions.node, /^v\d+/);
    assert.match(report.versions.temporalSdk, /^\d+\.\d+/);
    assert.match(report.versions.temporalServer ?? '', /^\d+\.\d+/);
    // Its own dev server: SQLite, measured; the client encrypted (a plain input on the server is a problem above).
    assert.equal(report.stack?.temporal, 'dev-server');
    assert.ok(report.stack.sqlitePragmas.length > 0);
    assert.equal(report.payloadEncryption, true);
    assert.ok((engine.cpuSeconds.temporal ?? 0) > 0, 'the dev server is measured');
    assert.deepEqual(
      report.targets.map((target) => target.name.split(':')[0]!.split(' ')[0]),
      ['pipeline', 'steady', 'steady', 'API', 'API', 'test', 'neighbour', 'neighbour', 'neighbour', 'flood', 'peak'],
    );
    // Each part's cost per delivery, over the steady stage and the saturation stage of N = --n (docs/capacity.md).
    const { resources } = report;
    assert.ok(resources?.steady && resources.saturation && (resources.peakDeliveredPerSecond ?? 0) > 0);
    for (const stage of [resources.steady, resources.saturation]) {
      assert.ok(stage.deliveries > 0);
      for (const part of ['worker', 'temporal (dev server)', 'postgres'])
        assert.ok((stage.cpuSeconds[part] ?? -1) >= 0, `${part} measured: ${JSON.stringify(stage.cpuSeconds)}`);
      assert.ok(stage.postgres && stage.postgres.walBytes > 0, 'the WAL of the instance');
      assert.ok(Object.keys(stage.postgres.databases).length > 0, 'each database of the instance');
      assert.ok(stage.sqliteGrowthBytes !== undefined, "the dev server's SQLite file");
      // The log row of a delivery is written once its receipt is answered: the last few may fall after the stage.
      assert.ok((stage.serviceRows?.deliveries ?? 0) >= stage.deliveries / 2, JSON.stringify(stage.serviceRows));
    }
    assert.ok((resources.saturation.cpuSeconds.worker ?? 0) > 0);
    assert.match(stdout, /CPU-seconds per 1000 deliveries/);
    assert.match(stdout, /WAL \(whole instance\)/);
    assert.match(stdout, /engine limit/);
    assert.match(stdout, /SQLite/);
    assert.match(stdout, /Test button \(POST \/webhooks\/test\/project\/:id in npm start's process/);
    assert.match(stdout, /Every event accounted for/);
  });

  it('measures register, the test button and a codec decode with the audit rows and without', () => {
    const audit = report.audit!;
    assert.deepEqual(
      audit.rows.map((row) => [row.operation, row.variant]),
      [
        ['register', 'audit'],
        ['register', 'no-audit'],
        ['test', 'audit'],
        ['test', 'no-audit'],
        ['decode', 'audit'],
        ['decode', 'no-audit'],
      ],
    );
    for (const row of audit.rows) {
      assert.ok(row.requestsPerSecond > 0 && row.rounds.length === 1, `${row.operation} ${row.variant}`);
      const answered = row.rounds[0]!.requests;
      // Without the rows none is written; with them one per call answered (and the calls still in flight).
      if (row.variant === 'no-audit') assert.equal(row.auditRows, 0, row.operation);
      else assert.ok(row.auditRows >= answered && answered > 0, `${row.operation}: ${row.auditRows} rows`);
    }
    assert.deepEqual(Object.keys(audit.withRowsPercent), ['register', 'test', 'decode']);
    assert.match(stdout, /Audit trail's cost/);
    assert.match(stdout, /POST \/codec\/decode \(1 payload\)\s+\| written/);
  });

  it('runs the neighbour stage for each fault and the flood stage, accounting for both projects', () => {
    assert.deepEqual(
      report.neighbour?.map((row) => row.fault),
      ['hang', 'refuse', '503'],
    );
    for (const row of report.neighbour ?? []) {
      assert.equal(row.healthyAccounting.delivered, row.healthyAccounting.sent, row.fault);
      assert.ok(row.healthyAccounting.sent > 0 && row.windows.length > 0, row.fault);
      assert.equal(row.neighbourDelivered, row.neighbourSent, `${row.fault}: A's backlog arrived after recovery`);
      assert.equal(row.neighbourUnderTwoIds, 0);
      assert.ok(row.backlogRecoverySeconds !== null && row.backlogRecoverySeconds >= 0);
      // Counted where they arrive, or from the delivery log while the receiver refuses connections.
      assert.equal(row.attemptsCountedFrom, row.fault === 'refuse' ? 'delivery log' : 'receiver');
      assert.ok((row.neighbourAttemptsPerSecond ?? -1) >= 0, row.fault);
      assert.ok((row.neighbourPeakAttemptsPerSecond ?? -1) >= 0, row.fault);
      const attempts = (row.neighbourAttemptWindows ?? []).reduce((sum, count) => sum + count, 0);
      assert.ok(attempts > 0, `${row.fault}: A's failing attempts were counted`);
    }
    const flood = report.flood;
    assert.ok(flood && flood.accounting.sent > 0);
    assert.equal(flood.accounting.delivered, flood.accounting.sent);
    assert.equal(flood.falls.count, flood.fallRate * flood.seconds);
    assert.match(stdout, /Neighbour/);
    assert.match(stdout, /Flood/);
  });
});

describe('bench stage selection (bench/plan.ts, bench/report.ts)', () => {
  it('runs every stage but the engine search and the trail by default; --stages, --engine-search and --faults select', () => {
    const all = parseArgsToPlan([]).plan;
    assert.deepEqual(all.stages, ['engine', 'raw', 'steady', 'saturation', 'api', 'audit', 'neighbour', 'flood']);
    assert.deepEqual(all.faults, ['hang', 'refuse', '503']);
    assert.deepEqual(parseArgsToPlan(['--engine-search']).plan.stages, [...all.stages, 'engine-search']);
    // In the run's order, each once, whatever order they are given in.
    assert.deepEqual(parseArgsToPlan(['--stages', 'flood,engine,flood']).plan.stages, ['engine', 'flood']);
    assert.deepEqual(parseArgsToPlan(['--stages', 'engine-search']).plan.stages, ['engine-search']);
    const trail = parseArgsToPlan(['--stages', 'trail', '--trail-seconds', '3', '--trail-write-limit', '120']).plan;
    assert.deepEqual(
      [trail.stages, trail.trailSeconds, trail.trailLoops, trail.trailWritesPerMinute],
      [['trail'], 3, 20, 120],
    );
    assert.deepEqual(parseArgsToPlan(['--faults', '503,hang']).plan.faults, ['hang', '503']);
    assert.throws(() => parseArgsToPlan(['--stages', 'engine,warp']), /--stages: unknown warp/);
    assert.throws(() => parseArgsToPlan(['--faults', 'slow']), /--faults: unknown slow/);
    // --engine cluster: the production cluster (bench/cluster.ts); the engine search starts dev servers of its own.
    assert.equal(parseArgsToPlan([]).plan.engine, 'dev-server');
    const cluster = parseArgsToPlan(['--engine', 'cluster', '--stages', 'steady,saturation']).plan;
    assert.equal(cluster.engine, 'cluster');
    assert.equal(commandOf(cluster), 'npm run bench -- --stages steady,saturation --engine cluster');
    assert.throws(() => parseArgsToPlan(['--engine', 'k8s']), /--engine: unknown k8s/);
    assert.throws(() => parseArgsToPlan(['--engine', 'cluster', '--engine-search']), /engine search/);
  });

  it('leaves the targets of absent stages out; the throughput ratio needs the engine and saturation', () => {
    const latency = { count: 10, p50: 40, p95: 70, p99: 90, max: 95, mean: 45 };
    const accounting = {
      sent: 10,
      delivered: 10,
      lost: 0,
      badSignatures: 0,
      wrongBodies: 0,
      duplicates: 0,
      duplicateIds: [],
      lostIds: [],
    };
    const base = {
      startedAt: new Date(0).toISOString(),
      mode: 'quick' as const,
      command: 'npm run bench -- --stages steady,saturation',
      stages: ['steady' as const, 'saturation' as const],
      faults: [],
      machine: { cores: 2, cpuModel: 'x', memoryGiB: 1, platform: 'linux', loadAverage: { before: 0, after: 0 } },
      versions: { node: 'v20', temporalCli: '1', temporalSdk: '1' },
      payloadEncryption: true,
      workerOptions: {},
      steady: {
        n: 10,
        deliveredPerSecond: 10,
        startsPerSecond: 10,
        latencyMs: latency,
        accounting,
        ratePerSecond: 20,
        seconds: 1,
      },
      saturation: { n: 10, deliveredPerSecond: 50, startsPerSecond: 90, latencyMs: latency, accounting },
      accountedFor: true,
      problems: [],
      durationSeconds: 1,
    };
    const steadyOnly = evaluateTargets(base);
    assert.deepEqual(
      steadyOnly.map((target) => [target.target, target.met]),
      [
        ['<= 60 ms', true],
        ['<= 100 ms', true],
      ],
    );
    const withEngine = {
      ...base,
      engine: { n: 10, completed: 10, completedPerSecond: 55, startsPerSecond: 99, latencyMs: latency, cpuSeconds: {} },
    };
    const ratio = evaluateTargets(withEngine)[0]!;
    assert.deepEqual([ratio.target, ratio.met, ratio.value], ['>= 90%', true, '91% (50 of 55/s)']);
    const printed = formatReport({ ...base, targets: steadyOnly });
    assert.match(printed, /pipeline steady 20\/s/);
    assert.doesNotMatch(printed, /engine limit|API|Neighbour|Flood|Engine search|Stack:/);
  });
});

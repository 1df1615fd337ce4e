import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchReport } from '../bench/report';

const ROOT = join(__dirname, '..');

/** Runs the bench in quick mode as `npm run bench -- --quick` would (sources through tsx, the worker and API compiled). */
function runQuickBench(out: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--require', 'tsx/cjs', join(ROOT, 'bench', 'index.ts'), '--quick', '--out', out],
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
    for (const stage of [report.rawSend, report.saturation, report.steady, ...report.growth]) {
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
    assert.equal(report.engine.completed, report.engine.n);
  });

  it('reports every figure, the machine and the versions, and prints them as a table', () => {
    assert.equal(report.mode, 'quick');
    assert.ok(report.engine.completedPerSecond > 0);
    assert.ok(report.rawSend.deliveredPerSecond > 0);
    assert.ok(report.saturation.deliveredPerSecond > 0);
    assert.ok(report.steady.latencyMs.p99 >= report.steady.latencyMs.p50);
    assert.deepEqual(
      report.growth.map((row) => row.n),
      [10, 20],
    );
    for (const row of report.growth) assert.ok(row.peakRssMb.worker > 0 && row.peakRssMb.api > 0);
    assert.ok(report.api.get.requests > 0 && report.api.registerDelete.requests > 0);
    assert.equal(report.api.get.non2xx + report.api.registerDelete.non2xx, 0);
    assert.ok(report.machine.cores > 0 && report.machine.memoryGiB > 0);
    assert.match(report.versions.node, /^v\d+/);
    assert.match(report.versions.temporalSdk, /^\d+\.\d+/);
    assert.equal(report.targets.length, 10);
    assert.match(stdout, /engine limit/);
    assert.match(stdout, /Every event accounted for/);
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
      if (row.fault === 'refuse') assert.equal(row.neighbourAttemptsPerSecond, null);
      else assert.ok((row.neighbourAttemptsPerSecond ?? -1) >= 0);
    }
    const flood = report.flood;
    assert.ok(flood && flood.accounting.sent > 0);
    assert.equal(flood.accounting.delivered, flood.accounting.sent);
    assert.equal(flood.falls.count, flood.fallRate * flood.seconds);
    assert.match(stdout, /Neighbour/);
    assert.match(stdout, /Flood/);
  });
});

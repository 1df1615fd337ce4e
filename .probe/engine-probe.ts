// Throwaway probe: empty-workflow completions per second on a fresh dev server, per dynamic config.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, Runtime } from '@temporalio/worker';
import { freePort } from '../dev/ports';

const configs: Record<string, string[]> = {
  'fairness+newMatcher, 1 partition': ['matching.useNewMatcher=true', 'matching.enableFairness=true', 'matching.numTaskqueueReadPartitions=1', 'matching.numTaskqueueWritePartitions=1'],
  'newMatcher (priority), 1 partition': ['matching.useNewMatcher=true', 'matching.numTaskqueueReadPartitions=1', 'matching.numTaskqueueWritePartitions=1'],
  'classic matcher, 1 partition': ['matching.numTaskqueueReadPartitions=1', 'matching.numTaskqueueWritePartitions=1'],
  'classic matcher, 4 partitions (default)': [],
};
const N = Number(process.env.N ?? 1000);

async function main() {
  Runtime.install({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never });
  const only = process.argv[2];
  for (const [label, values] of Object.entries(configs)) {
    if (only && !label.includes(only)) continue;
    const dir = mkdtempSync(join(tmpdir(), 'probe-'));
    const port = await freePort();
    const server = spawn(process.env.TEMPORAL_CLI_PATH!, ['server', 'start-dev', '--headless', '--db-filename', join(dir, 't.db'), '--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal', '--port', String(port), '--log-level', 'error', ...values.flatMap((v) => ['--dynamic-config-value', v])], { stdio: 'ignore' });
    let connection: Connection | undefined;
    for (let i = 0; i < 100; i++) {
      try { connection = await Connection.connect({ address: `127.0.0.1:${port}` }); await connection.workflowService.getSystemInfo({}); break; } catch { connection = undefined; await new Promise((r) => setTimeout(r, 200)); }
    }
    const client = new Client({ connection: connection! });
    const native = await NativeConnection.connect({ address: `127.0.0.1:${port}` });
    const worker = await Worker.create({ connection: native, taskQueue: 'probe', workflowsPath: require.resolve('../bench/workflows'), maxCachedWorkflows: 1000 });
    const run = worker.run();
    const go = async (n: number, prefix: string) => {
      const t0 = Date.now();
      let next = 0;
      const handles: Promise<unknown>[] = [];
      await Promise.all(Array.from({ length: 64 }, async () => { while (next < n) { const i = next++; const h = await client.workflow.start('benchEmpty', { taskQueue: 'probe', workflowId: `${prefix}-${i}` }); handles.push(h.result()); } }));
      await Promise.all(handles);
      return (n / ((Date.now() - t0) / 1000));
    };
    await go(100, 'warm');
    const rate = await go(N, 'run');
    console.log(`${label}: ${rate.toFixed(1)}/s`);
    worker.shutdown(); await run; await native.close(); await connection!.close();
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
  }
}
main().catch((e) => { console.error(e); process.exit(1); });

// The engine-settings search: the engine limit (empty workflows completed per second, as the engine stage measures
// it) over a small grid of the empty worker's workflow-task settings and the server's task-queue partitions. Each
// configuration gets a fresh dev server (its own SQLite file, so none inherits another's history) and a fresh worker.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, bundleWorkflowCode } from '@temporalio/worker';
import type { PayloadCodec } from '@temporalio/common';
import type { Config } from '../common/config';
import { temporalConnectionOptions } from '../common/temporal/connection';
import { freePort } from '../dev/ports';
import { DEV_SERVER_SQLITE_PRAGMAS } from '../dev/stack';
import { TEMPORAL_DYNAMIC_CONFIG } from '../dev/temporal-dev-server';
import { CpuMeter, startEmptyWorker, track, type BenchProcess } from './processes';
import { engineLimit, type EngineResult } from './stages';

/** One point of the grid; what it leaves out is the run's WORKER_* setting (or the SDK default). */
export interface SearchConfig {
  label: string;
  /** Task-queue read and write partitions of the server (dynamic config). */
  partitions?: number;
  /** Workflow-task slots (WORKER_MAX_CONCURRENT_WORKFLOW_TASKS). */
  slots?: number;
  /** Workflow-task pollers: a fixed maximum, or the SDK's autoscaling pollers. */
  polls?: number | 'autoscaling';
  /** Sticky cache (WORKER_MAX_CACHED_WORKFLOWS); 0 turns sticky queues off, so every poller polls the task queue. */
  cache?: number;
}

/**
 * About 25 s each on 2 cores at N = 1000. With the cache on, the SDK gives the task queue a fifth of the pollers
 * (the rest wait on the sticky queue, which an empty workflow never uses): hence rows with more pollers and without
 * the cache. The delivery workflow does use the sticky queue (its second workflow task), so a cache-off winner here
 * is not a setting for the delivery worker without a full run.
 */
export const SEARCH_GRID: readonly SearchConfig[] = [
  { label: 'current settings' },
  { label: '4 pollers', polls: 4 },
  { label: '32 pollers', polls: 32 },
  { label: 'autoscaling pollers', polls: 'autoscaling' },
  { label: '20 slots', slots: 20 },
  { label: 'no sticky cache', cache: 0 },
  { label: '4 partitions', partitions: 4 },
  { label: '4 partitions, 32 pollers', partitions: 4, polls: 32 },
];

/** Quick mode: two rows, one per kind of restart (worker settings, server partitions). */
export const QUICK_SEARCH_GRID: readonly SearchConfig[] = [SEARCH_GRID[0]!, SEARCH_GRID[6]!];

export interface SearchRow extends EngineResult {
  label: string;
  /** The settings as run: partitions (null: a configured server's own), slots, pollers ('sdk default'), cache. */
  partitions: number | null;
  slots: number;
  polls: number | 'autoscaling' | 'sdk default';
  cache: number;
  /** CPU seconds of the server and the empty worker over the measured N. */
  cpuSeconds: Record<string, number>;
}

export interface EngineSearchResult {
  n: number;
  warmup: number;
  server: 'dev-server' | 'configured';
  rows: SearchRow[];
  /** Rows that failed (a worker that would not start, a deadline missed), with the reason. */
  failures: { label: string; error: string }[];
  /** Label of the row with the highest completed/s. */
  best?: string;
  seconds: number;
}

export interface SearchOptions {
  n: number;
  warmup: number;
  grid: readonly SearchConfig[];
  config: Config;
  /** The production payload codec: the search's client encrypts as the bench's does. */
  codec: PayloadCodec;
  /** The configured server's address (TEMPORAL_ADDRESS); fresh dev servers when undefined. */
  configuredAddress?: string;
  configuredPid?: number;
  cliPath?: string;
  /** The empty worker's base environment (PAYLOAD_ENCRYPTION_KEYS, the run's WORKER_* settings). */
  env: NodeJS.ProcessEnv;
  dataDir: string;
  logDir: string;
  runId: string;
  log: (message: string) => void;
}

interface SearchServer {
  address: string;
  pid?: number;
  stop(): Promise<void>;
}

/** A dev server with the project's dynamic config but `partitions` task-queue partitions, headless, on free ports. */
async function startSearchServer(
  cli: string,
  dir: string,
  partitions: number,
  namespace: string,
  logDir: string,
  name: string,
): Promise<SearchServer> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const dynamic = {
    ...TEMPORAL_DYNAMIC_CONFIG,
    'matching.numTaskqueueReadPartitions': partitions,
    'matching.numTaskqueueWritePartitions': partitions,
  };
  const args = [
    'server',
    'start-dev',
    '--db-filename',
    join(dir, 'temporal.db'),
    ...DEV_SERVER_SQLITE_PRAGMAS.flatMap((pragma) => ['--sqlite-pragma', pragma]),
    ...Object.entries(dynamic).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${value}`]),
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--headless',
    ...(namespace === 'default' ? [] : ['--namespace', namespace]),
    '--log-level',
    'error',
  ];
  const log = join(logDir, `${name}.log`);
  writeFileSync(log, `${cli} ${args.join(' ')}\n`);
  const fd = openSync(log, 'a');
  const child = spawn(cli, args, { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const server = track(name, child);
  // A bench that dies without its finally must not leave a server running.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const stop = async () => {
    process.removeListener('exit', killOnExit);
    await server.stop();
  };
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) {
      process.removeListener('exit', killOnExit);
      throw new Error(`${name} exited (${child.exitCode}); see ${log}`);
    }
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.workflowService.describeNamespace({ namespace });
        break;
      } finally {
        await connection.close();
      }
    } catch (error) {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`${name} not ready on ${address}: ${(error as Error).message}; see ${log}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  return { address, pid: child.pid, stop };
}

/** The grid point as the empty worker's environment. */
function workerEnv(point: SearchConfig, config: Config): Record<string, string> {
  const env: Record<string, string> = {
    WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: String(point.slots ?? config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS),
    WORKER_MAX_CACHED_WORKFLOWS: String(point.cache ?? config.WORKER_MAX_CACHED_WORKFLOWS),
    WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: '',
    BENCH_EMPTY_POLLER: '',
  };
  const polls = point.polls ?? config.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS;
  if (polls === 'autoscaling') env.BENCH_EMPTY_POLLER = 'autoscaling';
  else if (polls !== undefined) env.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS = String(polls);
  return env;
}

export async function engineSearch(options: SearchOptions): Promise<EngineSearchResult> {
  const began = Date.now();
  const { config, log } = options;
  if (!options.configuredAddress && !options.cliPath)
    throw new Error('engine search: no temporal CLI to start its dev servers (TEMPORAL_CLI_PATH or PATH)');
  const bundlePath = join(options.dataDir, 'empty-workflow-bundle.js');
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('./workflows'),
    logger: new DefaultLogger('WARN'),
  });
  writeFileSync(bundlePath, bundle.code);

  const rows: SearchRow[] = [];
  const failures: EngineSearchResult['failures'] = [];
  for (const [i, point] of options.grid.entries()) {
    const partitions = options.configuredAddress ? null : (point.partitions ?? 1);
    log(`engine search ${i + 1}/${options.grid.length}: ${point.label}`);
    let server: SearchServer | undefined;
    let worker: BenchProcess | undefined;
    let connection: Connection | undefined;
    try {
      server = options.configuredAddress
        ? { address: options.configuredAddress, pid: options.configuredPid, stop: () => Promise.resolve() }
        : await startSearchServer(
            options.cliPath!,
            join(options.dataDir, `search-${i}`),
            partitions!,
            config.TEMPORAL_NAMESPACE,
            options.logDir,
            `search-temporal-${i}`,
          );
      const taskQueue = `bench-search-${options.runId}-${i}`;
      const env = workerEnv(point, config);
      worker = await startEmptyWorker(
        {
          ...options.env,
          ...env,
          TEMPORAL_ADDRESS: server.address,
          BENCH_EMPTY_TASK_QUEUE: taskQueue,
          BENCH_EMPTY_WORKFLOW_BUNDLE: bundlePath,
        },
        options.logDir,
        `search-worker-${i}`,
      );
      connection = await Connection.connect(temporalConnectionOptions({ ...config, TEMPORAL_ADDRESS: server.address }));
      const ctx = {
        client: new Client({
          connection,
          namespace: config.TEMPORAL_NAMESPACE,
          dataConverter: { payloadCodecs: [options.codec] },
        }),
        emptyTaskQueue: taskQueue,
        runId: options.runId,
      };
      if (options.warmup) await engineLimit(ctx, options.warmup, `search-${i}-warmup`);
      const cpu = new CpuMeter([
        ...(server.pid ? [{ name: 'temporal', pid: server.pid, withChildren: !!options.configuredAddress }] : []),
        { name: 'empty-worker', pid: worker.pid },
      ]);
      await cpu.start();
      const result = await engineLimit(ctx, options.n, `search-${i}`);
      rows.push({
        label: point.label,
        partitions,
        slots: Number(env.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS),
        polls:
          env.BENCH_EMPTY_POLLER === 'autoscaling'
            ? 'autoscaling'
            : env.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS
              ? Number(env.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS)
              : 'sdk default',
        cache: Number(env.WORKER_MAX_CACHED_WORKFLOWS),
        ...result,
        cpuSeconds: await cpu.stop(),
      });
      log(`  ${result.completedPerSecond} completed/s`);
    } catch (error) {
      failures.push({ label: point.label, error: (error as Error).message });
      log(`  failed: ${(error as Error).message}`);
    } finally {
      await connection?.close().catch(() => undefined);
      await worker?.stop();
      await server?.stop();
    }
  }
  const best = rows.reduce<SearchRow | undefined>(
    (top, row) => (top && top.completedPerSecond >= row.completedPerSecond ? top : row),
    undefined,
  );
  return {
    n: options.n,
    warmup: options.warmup,
    server: options.configuredAddress ? 'configured' : 'dev-server',
    rows,
    failures,
    best: best?.label,
    seconds: Math.round((Date.now() - began) / 1000),
  };
}

// The servers the bench measures against: the configured Postgres and Temporal, or the dev stack's embedded
// PostgreSQL and Temporal dev server (SQLite in WAL mode) in the bench's fresh temporary folder, never ./.data.
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import type { Config } from '../common/config';
import { isAlive, startDevStack } from '../dev/stack';
export { DEV_SERVER_SQLITE_PRAGMAS } from '../dev/stack';
import { freePort } from '../dev/ports';
import { createScratchDatabase } from '../db';
import { startClusterStack, type TemporalProcess } from './cluster';

export interface BenchStack {
  databaseUrl: string;
  temporalAddress: string;
  /** Pid of the Temporal dev server the bench started, or of the configured one (BENCH_TEMPORAL_PID): CPU and RSS. */
  temporalPid?: number;
  /** Pid of the embedded PostgreSQL's postmaster (its backends are its children). */
  postgresPid?: number;
  postgres: 'embedded' | 'configured';
  temporal: 'dev-server' | 'configured' | 'cluster';
  /** `--engine cluster`: each Temporal host (and HAProxy), measured on its own and summed per service. */
  temporalProcesses?: TemporalProcess[];
  historyShards?: number;
  /** What the worker, the API and the bench's client add to their environment to reach Temporal (TLS, tokens). */
  clientEnv?: Record<string, string>;
  /** The dev server's SQLite file and its WAL, whose growth is Temporal's bytes per delivery there. */
  sqliteFiles?: string[];
  stop(): Promise<void>;
}

/** Where the stages run: Temporal's dev server (or TEMPORAL_ADDRESS), or the production cluster (bench/cluster.ts). */
export type BenchEngine = 'dev-server' | 'cluster';

/** BENCH_TEMPORAL_PID: the process id of the Temporal server TEMPORAL_ADDRESS points at, on this machine. */
export function benchTemporalPid(): number | undefined {
  const text = process.env.BENCH_TEMPORAL_PID;
  if (!text) return undefined;
  const pid = Number(text);
  if (!Number.isInteger(pid) || pid < 1) throw new Error('BENCH_TEMPORAL_PID must be a process id');
  // Its CPU and RSS come from /proc: a pid of another machine or container namespace would read as nothing.
  if (!isAlive(pid)) throw new Error(`BENCH_TEMPORAL_PID ${pid} is not a running process on this machine`);
  return pid;
}

export async function startBenchStack(options: {
  dataDir: string;
  config: Config;
  engine?: BenchEngine;
}): Promise<BenchStack> {
  // The embedded PostgreSQL runs as the postgres user, which must reach its folder inside ours.
  chmodSync(options.dataDir, 0o755);
  const { config } = options;
  if (options.engine === 'cluster') {
    const cluster = await startClusterStack(options);
    return { ...cluster, postgres: 'embedded', temporal: 'cluster' };
  }
  const devStack = await startDevStack({
    config: { ...config, NODE_ENV: 'development', DATA_DIR: options.dataDir },
    logger: pino({ level: 'silent' }),
    // Free ports, so the bench runs beside `npm start` and other benches.
    env: {
      ...process.env,
      DEV_POSTGRES_PORT: String(await freePort()),
      DEV_TEMPORAL_PORT: String(await freePort()),
      DEV_TEMPORAL_UI_PORT: String(await freePort()),
    },
  });
  const stops: (() => Promise<void>)[] = [() => devStack.stop()];
  const stop = async () => {
    for (const step of stops.reverse()) await step().catch(() => undefined);
  };
  try {
    let databaseUrl = devStack.env.DATABASE_URL;
    if (!databaseUrl) {
      // A configured server: a database of the bench's own on it, dropped at the end.
      const scratch = await createScratchDatabase(config.DATABASE_URL!, 'webhooks_bench');
      stops.push(() => scratch.drop());
      databaseUrl = scratch.url;
    }
    return {
      databaseUrl,
      temporalAddress: devStack.env.TEMPORAL_ADDRESS ?? config.TEMPORAL_ADDRESS!,
      // A configured server's CPU and memory are measured too when BENCH_TEMPORAL_PID names its process.
      temporalPid: devStack.env.TEMPORAL_ADDRESS ? devStack.pids.temporal : benchTemporalPid(),
      postgresPid: devStack.pids.postgres,
      postgres: devStack.env.DATABASE_URL ? 'embedded' : 'configured',
      temporal: devStack.env.TEMPORAL_ADDRESS ? 'dev-server' : 'configured',
      ...(devStack.env.TEMPORAL_ADDRESS && {
        sqliteFiles: ['temporal.db', 'temporal.db-wal'].map((file) => join(options.dataDir, file)),
      }),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

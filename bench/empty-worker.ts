// The bench-only worker of the engine-limit stage: runs `benchEmpty` on its own task queue with the same
// WORKER_* options as the delivery worker, in its own process like the delivery worker. Forked with IPC.
import { NativeConnection, Worker } from '@temporalio/worker';
import { temporalConnectionOptions } from '../common/temporal-connection';
import { createLogger } from '../common/logger';
import { installRuntimeLogger } from '../worker/runtime';
import { loadConfig } from '../common/config';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const taskQueue = process.env.BENCH_EMPTY_TASK_QUEUE;
  if (!taskQueue || !process.send) throw new Error('run by bench/index.ts with BENCH_EMPTY_TASK_QUEUE and IPC');
  installRuntimeLogger(createLogger('warn'));
  const { address, tls } = temporalConnectionOptions(config);
  const connection = await NativeConnection.connect({ address, tls, apiKey: config.TEMPORAL_API_KEY });
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue,
    workflowsPath: require.resolve('./workflows'),
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
    maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    shutdownGraceTime: config.WORKER_SHUTDOWN_GRACE_MS,
  });
  process.once('disconnect', () => worker.shutdown());
  process.once('SIGTERM', () => worker.shutdown());
  const run = worker.run();
  process.send({ type: 'ready' });
  await run;
  await connection.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});

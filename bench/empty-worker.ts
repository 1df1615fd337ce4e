// The bench-only worker of the engine-limit stages: runs `benchEmpty` on its own task queue with the delivery
// worker's workflow-task settings (WORKER_* from its environment, so the engine search restarts it per setting) and
// the same payload codec, in its own process like the delivery worker. Forked with IPC.
import { NativeConnection, Worker } from '@temporalio/worker';
import { temporalConnectionOptions } from '../common/temporal/connection';
import { createLogger } from '../common/telemetry/logger';
import { payloadCodecFromConfig } from '../common/crypto/payload-codec';
import { installRuntimeLogger } from '../worker/runtime';
import { workerTuningOptions } from '../worker/start';
import { loadConfig } from '../common/config';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const taskQueue = process.env.BENCH_EMPTY_TASK_QUEUE;
  if (!taskQueue || !process.send) throw new Error('run by bench/index.ts with BENCH_EMPTY_TASK_QUEUE and IPC');
  const logger = createLogger('warn');
  installRuntimeLogger(logger);
  const { address, tls } = temporalConnectionOptions(config);
  const connection = await NativeConnection.connect({ address, tls, apiKey: config.TEMPORAL_API_KEY });
  const tuning = workerTuningOptions(config);
  // A prebuilt bundle spares each restart of the engine search a webpack build.
  const bundlePath = process.env.BENCH_EMPTY_WORKFLOW_BUNDLE;
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue,
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('./workflows') }),
    // benchEmpty takes no input; its (empty) result goes through the codec as a delivery's would.
    dataConverter: { payloadCodecs: [payloadCodecFromConfig(config, logger)] },
    maxConcurrentWorkflowTaskExecutions: tuning.maxConcurrentWorkflowTaskExecutions,
    maxCachedWorkflows: tuning.maxCachedWorkflows,
    // BENCH_EMPTY_POLLER=autoscaling: the SDK's autoscaling pollers, a candidate of the engine search.
    workflowTaskPollerBehavior:
      process.env.BENCH_EMPTY_POLLER === 'autoscaling' ? { type: 'autoscaling' } : tuning.workflowTaskPollerBehavior,
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

// What the tracing and OTLP export tests run against, for one describe block: a real Jaeger (first: on a fresh machine
// its build takes minutes, scripts/ensure-jaeger.sh, cached afterwards), a Temporal dev server, a database and a
// receiver, started before its tests and stopped after them, every process it started for them killed first.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { killWorker, spawnWorker, type WorkerProcess } from '../faults/support';
import { startJaeger, type RunningJaeger } from './jaeger';
import type { TestDatabase } from '../support/postgres';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { startTemporalAndDatabase } from '../support/setup';

export interface TracingStack {
  jaeger: RunningJaeger;
  env: TestWorkflowEnvironment;
  database: TestDatabase;
  receiver: TestReceiver;
  /** Kills `process` after the block's tests (if it is still running then); returns it. */
  track(process: WorkerProcess): WorkerProcess;
  /**
   * A worker process on this stack (its database and Temporal), polling `taskQueue`, opening secrets with `secretKey`,
   * delivering to the receiver's private address; `env` adds the OTEL_* and other settings.
   */
  spawnWorker(secretKey: string, taskQueue: string, env: Record<string, string>): WorkerProcess;
}

export function useTracingStack(): TracingStack {
  const processes: WorkerProcess[] = [];
  const track = (process: WorkerProcess) => {
    processes.push(process);
    return process;
  };
  const stack = {
    track,
    spawnWorker: (secretKey: string, taskQueue: string, env: Record<string, string>) =>
      track(
        spawnWorker({
          DATABASE_URL: stack.database.url,
          TEMPORAL_ADDRESS: stack.env.address,
          TEMPORAL_TASK_QUEUE: taskQueue,
          WEBHOOK_SECRET_KEY: secretKey,
          ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
          ...env,
        }),
      ),
  } as TracingStack;
  before(async () => {
    stack.jaeger = await startJaeger();
    [stack.env, stack.database] = await startTemporalAndDatabase();
    stack.receiver = await startTestReceiver();
  });
  after(async () => {
    for (const process of processes.splice(0)) await killWorker(process);
    await stack.receiver?.close();
    await stack.env?.teardown();
    await stack.database?.destroy();
    await stack.jaeger?.stop();
  });
  return stack;
}

import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Runtime,
  type LogEntry,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { temporalCliPath, temporalTestServerPath } from '../../dev/temporal-binaries';
import { dynamicConfigFlags } from '../../dev/temporal-dev-server';
import { ProjectIdKey, WebhookTypeKey } from '../../common/contract';

/** Every SDK log entry of WARN and above (workflow and activity `log`), for tests to assert on. */
export const sdkLogs: LogEntry[] = [];

let runtimeInstalled = false;
/** Collects the SDK's logs instead of printing them; must run before the first connection. */
function quietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  try {
    Runtime.install({ logger: new DefaultLogger('WARN', (entry) => void sdkLogs.push(entry)), shutdownSignals: [] });
  } catch {
    // another suite in this process installed it first
  }
}

const existing = (path: string | undefined) => (path ? { executable: { type: 'existing-path' as const, path } } : {});

/** A real Temporal dev server with the ProjectId and WebhookType search attributes registered. */
export function createLocalEnvironment(): Promise<TestWorkflowEnvironment> {
  quietRuntime();
  return TestWorkflowEnvironment.createLocal({
    server: {
      ...existing(temporalCliPath()),
      searchAttributes: [ProjectIdKey, WebhookTypeKey],
      // The same fairness, priority and partition settings as `npm start`.
      extraArgs: dynamicConfigFlags(),
    },
  });
}

/** The Java test server: timers and retry back-offs skip ahead while no activity runs. */
export function createTimeSkippingEnvironment(): Promise<TestWorkflowEnvironment> {
  quietRuntime();
  return TestWorkflowEnvironment.createTimeSkipping({ server: existing(temporalTestServerPath()) });
}

export const uniqueTaskQueue = (name = 'test') => `${name}-${randomUUID()}`;

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The workflows bundled once per test run (bundling takes seconds; workers reuse it). */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({
    workflowsPath: require.resolve('../../workflows'),
    logger: new DefaultLogger('ERROR'),
  });
  return bundle;
}

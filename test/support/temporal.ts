import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Runtime,
  type LogEntry,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { freePort } from '../../dev/ports';
import { temporalCliPath, temporalTestServerPath } from '../../dev/temporal-binaries';
import { dynamicConfigFlags } from '../../dev/temporal-dev-server';
import { DELIVERY_SEARCH_ATTRIBUTE_KEYS, SEARCH_ATTRIBUTE_KEYS } from '../../common/contract';

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

/**
 * A real Temporal dev server with the ProjectId, WebhookType and PersonHash search attributes registered; with
 * `searchAttributes: 'without PersonHash'`, a namespace registered before PersonHash existed; with `false`, a bare one:
 * the namespace as Temporal Cloud or a fresh cluster has it before anyone registers them.
 *
 * Tried twice: on a loaded machine the SDK's client can miss its 10 s connect deadline although the server is up and
 * serving (seen once in CI; temporalio/sdk-typescript#496, #1687), and createLocal then throws without stopping that
 * server. It is stopped here, by the port it was given, before the second try.
 */
export async function createLocalEnvironment({
  searchAttributes = true,
  dynamicConfig = {},
  dbFilename,
}: {
  searchAttributes?: boolean | 'without PersonHash';
  /** Temporal's database as a SQLite file that outlives the server (a backup is a copy of it); in memory unless given. */
  dbFilename?: string;
  /** More dynamic config values, `--dynamic-config-value KEY=VALUE` each (VALUE as JSON: a duration is `"1s"`). */
  dynamicConfig?: Record<string, string>;
} = {}): Promise<TestWorkflowEnvironment> {
  quietRuntime();
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    try {
      return await TestWorkflowEnvironment.createLocal({
        server: {
          ...existing(temporalCliPath()),
          port,
          ...(dbFilename && { dbFilename }),
          ...(searchAttributes !== false && {
            searchAttributes: searchAttributes === true ? SEARCH_ATTRIBUTE_KEYS : DELIVERY_SEARCH_ATTRIBUTE_KEYS,
          }),
          // The same fairness, priority and partition settings as `npm start`.
          extraArgs: [
            ...dynamicConfigFlags(),
            ...Object.entries(dynamicConfig).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${value}`]),
          ],
        },
      });
    } catch (error) {
      spawnSync('pkill', ['-f', `start-dev --port ${port} `]);
      if (attempt === 2 || !(error instanceof Error && error.message === 'Failed to connect before the deadline'))
        throw error;
    }
  }
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

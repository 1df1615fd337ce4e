// The Temporal dev server `npm start` runs when TEMPORAL_ADDRESS is unset: the CLI's SQLite-backed server with
// our search attributes registered, or the SDK's download of it as a fallback (needs internet).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import type { Config } from '../common/config';
import { SEARCH_ATTRIBUTE_KEYS } from '../common/contract';
import type { Logger } from '../common/telemetry/logger';
import { RecentLines, assertPortFree, signalProcess, stopChild, type RunningPart } from './processes';
import { temporalCliPath } from './temporal-binaries';

/** Search attributes operators filter deliveries by (set by the workflow, registered on every Temporal we start). */
export const OPERATOR_SEARCH_ATTRIBUTES = SEARCH_ATTRIBUTE_KEYS.map((key) => key.name);
const READY_TIMEOUT_MS = 60_000;

/** WAL lets the UI and CLI read while the server writes; synchronous=normal is safe with WAL and much faster. */
export const DEV_SERVER_SQLITE_PRAGMAS = ['journal_mode=wal', 'synchronous=normal'];

/**
 * Dynamic config of every Temporal we run: priority and fairness keys on the task queue (fairness implies the
 * priority-enabled matcher, spelled out for servers where it is not the default), and one task-queue partition, so
 * priority order holds across the whole queue and a small server dispatches faster. docker-compose mounts the same
 * settings from temporal-dynamic-config.yaml (a test keeps the two equal).
 */
export const TEMPORAL_DYNAMIC_CONFIG: Readonly<Record<string, boolean | number>> = {
  'matching.useNewMatcher': true,
  'matching.enableFairness': true,
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
};

/** The dynamic config as `--dynamic-config-value KEY=VALUE` flags (the dev server reads no file). */
export const dynamicConfigFlags = (): string[] =>
  Object.entries(TEMPORAL_DYNAMIC_CONFIG).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${value}`]);

/** Flags for persistence and UI, shared by the CLI we spawn and the SDK-downloaded fallback. */
function persistenceFlags(dataDir: string, uiCodecEndpoint: string | undefined): string[] {
  return [
    // The UI decodes payloads in the operator's browser through the API's codec endpoint.
    ...(uiCodecEndpoint ? ['--ui-codec-endpoint', uiCodecEndpoint] : []),
    '--db-filename',
    join(dataDir, 'temporal.db'),
    ...DEV_SERVER_SQLITE_PRAGMAS.flatMap((pragma) => ['--sqlite-pragma', pragma]),
    '--ui-disable-news-fetch',
    ...dynamicConfigFlags(),
  ];
}

function devServerArgs(options: TemporalOptions, grpcPort: number, uiPort: number): string[] {
  const { dataDir, config } = options;
  return [
    'server',
    'start-dev',
    ...persistenceFlags(dataDir, options.uiCodecEndpoint),
    '--ip',
    '127.0.0.1',
    '--port',
    String(grpcPort),
    '--ui-port',
    String(uiPort),
    ...OPERATOR_SEARCH_ATTRIBUTES.flatMap((name) => ['--search-attribute', `${name}=Keyword`]),
    ...(config.TEMPORAL_NAMESPACE === 'default' ? [] : ['--namespace', config.TEMPORAL_NAMESPACE]),
    '--log-level',
    'error',
  ];
}

interface TemporalOptions {
  dataDir: string;
  config: Config;
  uiCodecEndpoint?: string;
}

export async function startTemporal(
  dataDir: string,
  config: Config,
  logger: Logger,
  /** The API's codec endpoint (`http://127.0.0.1:3000/codec`) the Web UI decodes payloads through. */
  uiCodecEndpoint?: string,
): Promise<RunningPart & { address: string; uiUrl: string }> {
  const options: TemporalOptions = { dataDir, config, uiCodecEndpoint };
  const grpcPort = config.DEV_TEMPORAL_PORT;
  const uiPort = config.DEV_TEMPORAL_UI_PORT ?? grpcPort + 1000;
  const address = `127.0.0.1:${grpcPort}`;
  const uiUrl = `http://127.0.0.1:${uiPort}`;
  // Checked first: otherwise a Temporal already listening there could answer the readiness probe for us.
  await assertPortFree(grpcPort, 'DEV_TEMPORAL_PORT', 'TEMPORAL_ADDRESS');
  await assertPortFree(uiPort, 'DEV_TEMPORAL_UI_PORT', 'TEMPORAL_ADDRESS');
  const cli = temporalCliPath(config);
  if (!cli) return startTemporalFromSdkDownload(options, grpcPort, uiPort, logger);

  const recent = new RecentLines();
  // Own process group: a terminal's Ctrl-C reaches only Node, which drains the worker before stopping Temporal.
  const child = spawn(cli, devServerArgs(options, grpcPort, uiPort), {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => recent.push(chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    recent.push(text);
    logger.debug({ temporal: text.trim() }, 'temporal dev server output');
  });
  const exited = new Promise<string>((done) => {
    child.once('error', (error) =>
      done(`could not run ${cli}: ${error.message} (set TEMPORAL_CLI_PATH to the temporal CLI)`),
    );
    child.once('exit', (code, signal) => done(`exited with ${signal ?? `code ${code}`}`));
  });
  const killOnExit = () => signalProcess(child.pid, 'SIGTERM');
  process.once('exit', killOnExit);
  const part: RunningPart = {
    pid: child.pid,
    orphanTargets: () => (child.pid ? [{ pid: child.pid, signal: 'SIGTERM' }] : []),
    stop: async () => {
      process.removeListener('exit', killOnExit);
      await stopChild(child, exited);
    },
  };

  try {
    await waitForTemporal(address, config.TEMPORAL_NAMESPACE, exited);
  } catch (error) {
    await part.stop();
    throw new Error(
      `Temporal dev server (${cli}) did not become ready on ${address}: ${(error as Error).message} ` +
        `(port taken? set DEV_TEMPORAL_PORT / DEV_TEMPORAL_UI_PORT, or TEMPORAL_ADDRESS to use your own server)\n${recent.text()}`,
      { cause: error },
    );
  }
  logger.info({ address, uiUrl, db: join(dataDir, 'temporal.db'), childPid: child.pid }, 'Temporal dev server started');
  return { ...part, address, uiUrl };
}

/** Without a local temporal CLI: let the SDK download one (needs internet) and run it through its ephemeral server. */
async function startTemporalFromSdkDownload(
  { dataDir, config, uiCodecEndpoint }: TemporalOptions,
  grpcPort: number,
  uiPort: number,
  logger: Logger,
): Promise<RunningPart & { address: string; uiUrl: string }> {
  let testing: typeof import('@temporalio/testing');
  try {
    testing = await import('@temporalio/testing');
  } catch {
    throw new Error('No temporal CLI found: set TEMPORAL_CLI_PATH to the temporal executable (or put it on PATH)');
  }
  logger.warn('No temporal CLI found (TEMPORAL_CLI_PATH, PATH): downloading it through the Temporal SDK');
  const environment = await testing.TestWorkflowEnvironment.createLocal({
    server: {
      // Cached under DATA_DIR so later starts work offline.
      executable: { type: 'cached-download', downloadDir: join(dataDir, 'bin'), ttl: '365d' },
      ip: '127.0.0.1',
      port: grpcPort,
      ui: true,
      uiPort,
      namespace: config.TEMPORAL_NAMESPACE,
      searchAttributes: SEARCH_ATTRIBUTE_KEYS,
      log: { format: 'pretty', level: 'error' },
      extraArgs: persistenceFlags(dataDir, uiCodecEndpoint),
    },
  });
  return {
    pid: undefined,
    orphanTargets: () => [],
    stop: () => environment.teardown(),
    address: `127.0.0.1:${grpcPort}`,
    uiUrl: `http://127.0.0.1:${uiPort}`,
  };
}

/** Ready means: it answers gRPC and our search attributes are registered in the namespace. */
async function waitForTemporal(address: string, namespace: string, exited: Promise<string>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let dead: string | undefined;
  void exited.then((reason) => (dead = reason));
  let lastError = 'no answer';
  while (Date.now() < deadline) {
    if (dead) throw new Error(dead);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
        const missing = OPERATOR_SEARCH_ATTRIBUTES.filter((name) => !(name in customAttributes));
        if (missing.length === 0) return;
        lastError = `search attributes not registered yet: ${missing.join(', ')}`;
      } finally {
        await connection.close();
      }
    } catch (error) {
      lastError = (error as Error).message;
    }
    await new Promise((done) => setTimeout(done, 250));
  }
  throw new Error(`timed out after ${READY_TIMEOUT_MS} ms (${lastError})`);
}

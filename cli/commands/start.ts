import { startApi, type RunningApi } from '../../api/server';
import { temporalClientOn } from '../../common/temporal/connection';
import { loadConfig } from '../../common/config';
import { startDevStack, type DevStack } from '../../dev/stack';
import { createLogger, prettyLogs, type Logger } from '../../common/telemetry/logger';
import { createSecretBox, resolveSecretKeyRing } from '../../common/crypto/secrets';
import { onShutdownSignal } from '../../common/signals';
import { startWorker, type RunningWorker } from '../../worker/start';
import { type CliCommand, parseCommandArgs } from '../command';

/** How long a stop may take before the process exits anyway (the worker drains in-flight attempts first). */
const STOP_TIMEOUT_MS = 45_000;

interface Stack {
  dev?: DevStack;
  worker?: RunningWorker;
  api?: RunningApi;
}

/** Stops in the reverse order of start: API, worker (drains, closes the Temporal connection), the embedded servers. */
async function stopAll(stack: Stack, logger: Logger): Promise<void> {
  const { api, worker, dev } = stack;
  const steps: Array<[string, (() => Promise<void>) | undefined]> = [
    ['api', api && (() => api.close())],
    ['worker', worker && (() => worker.shutdown())],
    ['embedded services', dev && (() => dev.stop())],
  ];
  for (const [name, stop] of steps) {
    try {
      await stop?.();
    } catch (error) {
      logger.error({ err: error, part: name }, 'stop failed');
    }
  }
}

function banner(port: number, uiUrl: string | undefined, dataDir: string): string {
  const api = `http://localhost:${port}`;
  return [
    '',
    'Webhook delivery service is running',
    `  API          ${api}`,
    `  API docs     ${api}/docs`,
    `  Temporal UI  ${uiUrl ?? '(your Temporal: TEMPORAL_ADDRESS)'}`,
    `  Data         ${dataDir}`,
    '',
    'In another terminal:',
    '  npm run cli -- project add p1 && npm run cli -- member add p1 alice',
    '  TOKEN=$(npm run --silent cli -- token alice)',
    `  curl -H "Authorization: Bearer $TOKEN" ${api}/webhooks/project/p1`,
    '',
    'Ctrl-C stops everything.',
    '',
  ].join('\n');
}

/**
 * What an embedded stack implies unless the environment says otherwise: local development delivers to receivers on
 * this machine, and the embedded Web UI (in the developer's browser) decodes payloads without an operator token.
 */
function devDefaults(dev: DevStack): NodeJS.ProcessEnv {
  return {
    ...((dev.env.TEMPORAL_ADDRESS || dev.env.DATABASE_URL) && { ALLOW_PRIVATE_WEBHOOK_URLS: 'true' }),
    ...(dev.uiUrl && { DEV_CODEC_WITHOUT_TOKEN: 'true' }),
  };
}

export const start: CliCommand = {
  usage: 'start',
  summary: 'run the API and the worker; embedded PostgreSQL and Temporal when not configured (npm start)',
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    const base = loadConfig(io.env);
    const logger = createLogger(base.LOG_LEVEL, 'webhooks', undefined, {
      pretty: prettyLogs(base),
      // The worker starts first: its name is this process's service in traces too.
      otlpService: 'webhook-worker',
    });
    const stack: Stack = {};
    let stopping: Promise<void> | undefined;
    onShutdownSignal(logger, STOP_TIMEOUT_MS, () => (stopping = stopAll(stack, logger)));

    try {
      // The dev server's Web UI decodes payloads through this API's codec endpoint (a port of 0 is not known yet).
      const uiCodecEndpoint = base.PORT ? `http://127.0.0.1:${base.PORT}/codec` : undefined;
      stack.dev = await startDevStack({ config: base, logger, env: io.env, uiCodecEndpoint });
      const config = loadConfig(
        { ...devDefaults(stack.dev), ...io.env, ...stack.dev.env },
        { database: true, auth: true, persons: true },
      );
      // One key for both: read (and, in development, warned about) once.
      const secretBox = createSecretBox(resolveSecretKeyRing(config, logger));
      stack.worker = await startWorker(config, logger, secretBox);
      // The API starts tests and redeliveries on the worker's own connection, so Temporal hands their first workflow
      // task straight to this worker (eager start) instead of through the task queue.
      const temporal = temporalClientOn(stack.worker.worker.connection!, config, stack.worker.payloadCodec);
      stack.api = await startApi(config, logger, { temporal, eagerStart: true, secretBox });
      io.out(banner(config.PORT, stack.dev.uiUrl, config.DATA_DIR));
      await stack.worker.run;
    } catch (error) {
      if (!stopping) {
        stopping = stopAll(stack, logger);
        await stopping;
        throw error;
      }
    }
    await stopping;
    return 0;
  },
};

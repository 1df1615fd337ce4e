import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { freePort } from '../../dev/ports';
import { eventually } from './eventually';

/** The shipped rules, their unit tests and the scrape example (deploy/prometheus/). */
export const PROMETHEUS_DEPLOY_DIR = join(__dirname, '..', '..', 'deploy', 'prometheus');
export const ALERT_RULES_PATH = join(PROMETHEUS_DEPLOY_DIR, 'webhook-alerts.rules.yml');

/** Debian's promtool and prometheus (scripts/ensure-prometheus.sh), or PROMTOOL_PATH / PROMETHEUS_PATH. */
export const promtoolPath = () => process.env.PROMTOOL_PATH ?? '/usr/bin/promtool';
export const prometheusPath = () => process.env.PROMETHEUS_PATH ?? '/usr/bin/prometheus';

interface RulesFile {
  groups: { name: string; rules: { alert?: string; for?: string }[] }[];
}

/**
 * The shipped rules with every `for:` set to `forDuration`: the same expressions, so a live test proves them, with
 * waits a test can afford. Written as YAML (what Prometheus reads), not edited as text.
 */
export function alertRulesForTest(forDuration: string): string {
  const rules = parse(readFileSync(ALERT_RULES_PATH, 'utf8')) as RulesFile;
  for (const group of rules.groups) for (const rule of group.rules) if (rule.for) rule.for = forDuration;
  return stringify(rules);
}

/** A Prometheus answer as its HTTP API gives it. */
export interface PrometheusReply<T> {
  status: string;
  error?: string;
  data?: T;
}

export interface RunningPrometheus {
  /** The last 4,000 characters of its log, for failure messages. */
  output(): string;
  /** GET on its HTTP API (`/api/v1/…`); undefined while it does not answer. */
  get<T>(path: string): Promise<PrometheusReply<T> | undefined>;
  stop(): Promise<void>;
}

/**
 * A real Prometheus in `dir` scraping the API's /metrics (with its METRICS_TOKEN) and a worker's metrics port every
 * second (or every `scrapeIntervalSeconds`), evaluating `rules` (a rules file's text) when given; resolves once both
 * targets are up.
 */
export async function startPrometheus(options: {
  dir: string;
  api: { port: number; metricsToken: string };
  workerMetricsPort: number;
  rules?: string;
  scrapeIntervalSeconds?: number;
}): Promise<RunningPrometheus> {
  const { dir } = options;
  const interval = `${options.scrapeIntervalSeconds ?? 1}s`;
  const port = await freePort();
  if (options.rules !== undefined) writeFileSync(join(dir, 'rules.yml'), options.rules);
  writeFileSync(
    join(dir, 'prometheus.yml'),
    JSON.stringify({
      global: { scrape_interval: interval, evaluation_interval: interval },
      ...(options.rules !== undefined && { rule_files: [join(dir, 'rules.yml')] }),
      scrape_configs: [
        {
          job_name: 'webhooks-api',
          authorization: { credentials: options.api.metricsToken },
          static_configs: [{ targets: [`127.0.0.1:${options.api.port}`] }],
        },
        { job_name: 'webhooks-worker', static_configs: [{ targets: [`127.0.0.1:${options.workerMetricsPort}`] }] },
      ],
    }),
  );
  const child = spawn(
    prometheusPath(),
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
  const running: RunningPrometheus = {
    output: () => output,
    async get<T>(path: string) {
      const reply = await fetch(`http://127.0.0.1:${port}${path}`).catch(() => undefined);
      return reply && ((await reply.json().catch(() => undefined)) as PrometheusReply<T> | undefined);
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
  try {
    await eventually(
      'both targets scraped',
      async () => {
        const targets = (await running.get<{ activeTargets: { health: string }[] }>('/api/v1/targets'))?.data;
        return targets?.activeTargets.length === 2 && targets.activeTargets.every((t) => t.health === 'up');
      },
      30_000,
    );
  } catch (error) {
    await running.stop();
    throw error;
  }
  return running;
}

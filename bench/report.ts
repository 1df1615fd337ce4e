// The run's figures: a table on stdout and a JSON file, with the machine and the versions they were taken on.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { FloodResult, NeighbourRow } from './neighbour';
import type { ApiResult, DeliveryStageResult, EngineResult, SteadyResult } from './stages';

export interface GrowthRow extends DeliveryStageResult {
  peakRssMb: { worker: number; api: number; temporal?: number };
  /** CPU seconds each process used during the stage: where the time of a delivery goes. */
  cpuSeconds: Record<string, number>;
}

export interface EngineRow extends EngineResult {
  cpuSeconds: Record<string, number>;
}

export interface BenchReport {
  startedAt: string;
  mode: 'full' | 'quick';
  command: string;
  machine: {
    cores: number;
    cpuModel: string;
    memoryGiB: number;
    platform: string;
    /** 1-minute load average before and after the run: other work on the machine skews the figures. */
    loadAverage: { before: number; after: number };
  };
  versions: { node: string; temporalCli: string; temporalSdk: string };
  stack: { postgres: string; temporal: string; sqlitePragmas: string[] };
  workerOptions: Record<string, number>;
  engine: EngineRow;
  rawSend: DeliveryStageResult;
  saturation: DeliveryStageResult;
  steady: SteadyResult;
  growth: GrowthRow[];
  api: { get: ApiResult; registerDelete: ApiResult };
  /** Isolation: a healthy project's falls while another project's receiver hangs, refuses or answers 503. */
  neighbour?: NeighbourRow[];
  /** Falls while vitals flood the pipeline beyond the engine's limit. */
  flood?: FloodResult;
  targets: Target[];
  /** Every event of every stage arrived once, with a valid signature and its own body. */
  accountedFor: boolean;
  problems: string[];
  durationSeconds: number;
}

export interface Target {
  name: string;
  target: string;
  value: string;
  met: boolean;
}

export function evaluateTargets(report: Omit<BenchReport, 'targets'>): Target[] {
  const share = report.saturation.deliveredPerSecond / report.engine.completedPerSecond;
  const largest = report.growth.at(-1);
  return [
    {
      name: 'pipeline throughput vs engine limit',
      target: '>= 50%',
      value: `${Math.round(share * 100)}% (${report.saturation.deliveredPerSecond} of ${report.engine.completedPerSecond}/s)`,
      met: share >= 0.5,
    },
    {
      name: 'steady-load latency p50',
      target: '<= 60 ms',
      value: `${report.steady.latencyMs.p50} ms`,
      met: report.steady.latencyMs.p50 <= 60,
    },
    {
      name: 'steady-load latency p99',
      target: '<= 250 ms',
      value: `${report.steady.latencyMs.p99} ms`,
      met: report.steady.latencyMs.p99 <= 250,
    },
    {
      name: 'API GET throughput',
      target: '>= 2000 req/s',
      value: `${report.api.get.requestsPerSecond} req/s`,
      met: report.api.get.requestsPerSecond >= 2000,
    },
    {
      name: 'API GET p99',
      target: '<= 50 ms',
      value: `${report.api.get.p99Ms} ms`,
      met: report.api.get.p99Ms <= 50,
    },
    ...isolationTargets(report),
    {
      name: `peak worker RSS at N = ${largest?.n ?? '?'}`,
      target: '< 400 MB',
      value: `${largest?.peakRssMb.worker ?? NaN} MB`,
      met: (largest?.peakRssMb.worker ?? Infinity) < 400,
    },
  ];
}

/** The issue-10 targets: a failing neighbour and a flood must not delay another project's falls. */
function isolationTargets(report: Omit<BenchReport, 'targets'>): Target[] {
  const rows = report.neighbour ?? [];
  const worstWindow = Math.max(...rows.flatMap((row) => row.windows.map((window) => window.p99)));
  const slowestRecovery = Math.max(...rows.map((row) => row.backlogRecoverySeconds ?? Infinity));
  const mostAttempts = Math.max(...rows.map((row) => row.neighbourAttemptsPerSecond ?? 0));
  const floodP99 = Math.max(...(report.flood?.windows.map((window) => window.p99) ?? [Infinity]));
  return [
    {
      name: "neighbour: healthy project's FALL p99, worst window",
      target: '<= 250 ms',
      value: `${worstWindow} ms`,
      met: worstWindow <= 250,
    },
    {
      name: "neighbour: failing project's backlog after recovery",
      target: '<= 300 s',
      value: `${slowestRecovery} s`,
      met: slowestRecovery <= 300,
    },
    {
      name: 'neighbour: attempts against the failing receiver',
      target: '<= 5 /s',
      value: `${mostAttempts} /s`,
      met: mostAttempts <= 5,
    },
    { name: 'flood: FALL p99, worst window', target: '<= 250 ms', value: `${floodP99} ms`, met: floodP99 <= 250 },
  ];
}

function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((row) => row.map(String))];
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  const line = (row: string[]) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  return [line(cells[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.slice(1).map(line)].join(
    '\n',
  );
}

const lat = (stage: DeliveryStageResult) => [
  stage.latencyMs.p50,
  stage.latencyMs.p95,
  stage.latencyMs.p99,
  stage.latencyMs.max,
];

const accounted = (stage: DeliveryStageResult) =>
  `${stage.accounting.delivered}/${stage.accounting.sent}` +
  (stage.accounting.duplicates ? `, ${stage.accounting.duplicates} dup` : '') +
  (stage.accounting.badSignatures ? `, ${stage.accounting.badSignatures} bad sig` : '');

const perThousand = (cpu: Record<string, number>, n: number) =>
  Object.entries(cpu)
    .filter(([, seconds]) => seconds > 0)
    .map(([name, seconds]) => `${name} ${((seconds * 1000) / n).toFixed(1)}`)
    .join(', ');

export function formatReport(report: BenchReport): string {
  const { machine, versions } = report;
  const out: string[] = [];
  out.push(
    `Webhook delivery bench (${report.mode}): ${machine.cores} cores (${machine.cpuModel}), ${machine.memoryGiB} GiB, ` +
      `Node ${versions.node}, Temporal CLI ${versions.temporalCli}, SDK ${versions.temporalSdk}`,
    `Stack: Postgres ${report.stack.postgres}, Temporal ${report.stack.temporal}` +
      // Only the dev server the bench starts runs on SQLite; a configured server is what it is.
      (report.stack.temporal === 'dev-server' ? ` (SQLite ${report.stack.sqlitePragmas.join(', ')}); ` : '; ') +
      `worker ${Object.entries(report.workerOptions)
        .map(([key, value]) => `${key}=${value}`)
        .join(' ')}`,
    '',
  );
  out.push(
    table(
      ['stage', 'N', 'rate /s', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'delivered'],
      [
        [
          'engine limit (empty workflows, completed/s)',
          report.engine.n,
          report.engine.completedPerSecond,
          report.engine.latencyMs.p50,
          report.engine.latencyMs.p95,
          report.engine.latencyMs.p99,
          report.engine.latencyMs.max,
          `${report.engine.completed}/${report.engine.n}`,
        ],
        [
          'raw send limit (signed POSTs, verified/s)',
          report.rawSend.n,
          report.rawSend.deliveredPerSecond,
          ...lat(report.rawSend),
          accounted(report.rawSend),
        ],
        [
          'pipeline at saturation (verified/s)',
          report.saturation.n,
          report.saturation.deliveredPerSecond,
          ...lat(report.saturation),
          accounted(report.saturation),
        ],
        [
          `pipeline steady ${report.steady.ratePerSecond}/s for ${report.steady.seconds} s`,
          report.steady.n,
          report.steady.deliveredPerSecond,
          ...lat(report.steady),
          accounted(report.steady),
        ],
      ],
    ),
    '',
    `CPU seconds per 1000: engine limit ${perThousand(report.engine.cpuSeconds, report.engine.n)}; ` +
      `pipeline at saturation ${perThousand(report.growth.find((row) => row.n === report.saturation.n)?.cpuSeconds ?? {}, report.saturation.n)}`,
    '',
    'Growth (pipeline at saturation):',
    table(
      [
        'N',
        'verified /s',
        'p50 ms',
        'p99 ms',
        'peak worker RSS MB',
        'peak API RSS MB',
        'peak Temporal RSS MB',
        'CPU s per 1000 (temporal / worker / postgres / bench)',
        'delivered',
      ],
      report.growth.map((row) => [
        row.n,
        row.deliveredPerSecond,
        row.latencyMs.p50,
        row.latencyMs.p99,
        row.peakRssMb.worker,
        row.peakRssMb.api,
        row.peakRssMb.temporal ?? '-',
        ['temporal', 'worker', 'postgres', 'bench']
          .map((name) =>
            row.cpuSeconds[name] === undefined ? '-' : ((row.cpuSeconds[name] * 1000) / row.n).toFixed(1),
          )
          .join(' / '),
        accounted(row),
      ]),
    ),
    '',
    `API (autocannon, ${report.api.get.connections} connections):`,
    table(
      ['endpoint', 'seconds', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx', 'errors'],
      [
        ['GET /webhooks/project/:id', report.api.get],
        ['POST /webhooks/register + DELETE cycle', report.api.registerDelete],
      ].map(([name, r]) => {
        const result = r as ApiResult;
        return [
          name as string,
          result.seconds,
          result.requestsPerSecond,
          result.p50Ms,
          result.p99Ms,
          result.maxMs,
          result.non2xx,
          result.errors,
        ];
      }),
    ),
    ...isolationTables(report),
    '',
    'Targets:',
    table(
      ['target', 'wanted', 'measured', ''],
      report.targets.map((t) => [t.name, t.target, t.value, t.met ? 'met' : 'MISSED']),
    ),
    '',
    report.accountedFor
      ? 'Every event accounted for: each arrived once, with a valid signature and its own body.'
      : `NOT ACCOUNTED FOR:\n  - ${report.problems.join('\n  - ')}`,
    `Run took ${report.durationSeconds} s; load average ${report.machine.loadAverage.before} before, ${report.machine.loadAverage.after} after.`,
  );
  return out.join('\n');
}

function isolationTables(report: BenchReport): string[] {
  const out: string[] = [];
  if (report.neighbour?.length)
    out.push(
      '',
      "Neighbour (project A's receiver fails while A emits VITAL_THRESHOLD and B emits FALL_DETECTION to a healthy receiver):",
      table(
        [
          "A's receiver",
          'rates A / B per s',
          "B's p50 / p99 per window (ms)",
          "B's p99 ms",
          'attempts at A /s',
          "A's backlog after recovery",
          'B delivered',
        ],
        report.neighbour.map((row) => [
          row.fault === '503' ? '503, Retry-After: 0' : row.fault === 'hang' ? 'hangs' : 'refuses',
          `${row.neighbourRate} / ${row.healthyRate}`,
          row.windows.map((window) => `${window.p50}/${window.p99}`).join(' '),
          row.healthy.p99,
          row.neighbourAttemptsPerSecond ?? '-',
          row.backlogRecoverySeconds === null
            ? `${row.neighbourDelivered}/${row.neighbourSent} arrived`
            : `${row.backlogRecoverySeconds} s (${row.neighbourDelivered}/${row.neighbourSent})`,
          `${row.healthyAccounting.delivered}/${row.healthyAccounting.sent}`,
        ]),
      ),
    );
  if (report.flood)
    out.push(
      '',
      `Flood (VITAL_THRESHOLD at ${report.flood.vitalRate}/s, FALL_DETECTION at ${report.flood.fallRate}/s, ${report.flood.seconds} s):`,
      table(
        ['events', 'p50 ms', 'p99 ms', 'max ms', 'per window p50/p99 (ms)'],
        [
          [
            'FALL_DETECTION',
            report.flood.falls.p50,
            report.flood.falls.p99,
            report.flood.falls.max,
            report.flood.windows.map((window) => `${window.p50}/${window.p99}`).join(' '),
          ],
          ['VITAL_THRESHOLD', report.flood.vitals.p50, report.flood.vitals.p99, report.flood.vitals.max, '-'],
        ],
      ),
      `delivered ${report.flood.accounting.delivered}/${report.flood.accounting.sent}`,
    );
  return out;
}

export function writeReport(path: string, report: BenchReport): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(report, null, 2) + '\n');
}

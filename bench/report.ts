// The run's figures: a table on stdout and a JSON file, with the machine and the versions they were taken on.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AuditStageResult } from './audit';
import type { TrailStageResult } from './trail';
import type { EngineSearchResult } from './engine-search';
import type { FloodResult, NeighbourRow } from './neighbour';
import type { Stage } from './plan';
import { perDelivery, type ResourceFigures } from './resources';
import type { ApiResult, DeliveryStageResult, EngineResult, SteadyResult, TestRoundTripResult } from './stages';

export interface GrowthRow extends DeliveryStageResult {
  /** Peak RSS in MB of the worker, the API (when the run has the API stage) and Temporal (when measured). */
  peakRssMb: { worker: number; api?: number; temporal?: number };
  /** CPU seconds each process used during the stage: where the time of a delivery goes. */
  cpuSeconds: Record<string, number>;
}

export interface EngineRow extends EngineResult {
  cpuSeconds: Record<string, number>;
}

/** One run's figures. A stage left out of the run (--stages) leaves its field out, and its targets. */
export interface BenchReport {
  startedAt: string;
  mode: 'full' | 'quick';
  /** `--options`: what the measured registration carried, and (oauth) how many tokens its endpoint issued. */
  options?: string[];
  tokensIssued?: number;
  command: string;
  /** The stages this run took, and the neighbour stage's faults. */
  stages: Stage[];
  faults: string[];
  machine: {
    cores: number;
    cpuModel: string;
    memoryGiB: number;
    platform: string;
    /** 1-minute load average before and after the run: other work on the machine skews the figures. */
    loadAverage: { before: number; after: number };
  };
  /** temporalServer: what the server the run measured reports (getSystemInfo), the CLI's version aside. */
  versions: { node: string; temporalCli: string; temporalServer?: string; temporalSdk: string };
  /**
   * `temporal`: `dev-server` (the bench's own, on SQLite with sqlitePragmas) or `configured` (TEMPORAL_ADDRESS,
   * measured when BENCH_TEMPORAL_PID names its process; no SQLite claim). Absent when only the engine search ran.
   */
  stack?: {
    postgres: string;
    temporal: string;
    temporalPid?: number;
    sqlitePragmas: string[];
    /** `cluster`: the history shards its hosts share. */
    historyShards?: number;
  };
  /** Payloads the bench's client starts workflows with are encrypted, as production clients do. */
  payloadEncryption: boolean;
  workerOptions: Record<string, number>;
  engine?: EngineRow;
  /**
   * What each part spent over the steady stage and the saturation stage of N = --n (bench/resources.ts), whose
   * per-delivery figures docs/capacity.md scales; and the highest verified deliveries per second of the run.
   */
  resources?: { steady?: ResourceFigures; saturation?: ResourceFigures; peakDeliveredPerSecond?: number };
  rawSend?: DeliveryStageResult;
  saturation?: DeliveryStageResult;
  steady?: SteadyResult;
  growth?: GrowthRow[];
  api?: { get: ApiResult; registerDelete: ApiResult; testButton?: TestRoundTripResult };
  /** Register, the test button and a codec decode with the audit rows written and without (bench/audit.ts). */
  audit?: AuditStageResult;
  /** Project A's PATCH loops against B's PATCHes and breaker transitions, all writing the trail (bench/trail.ts). */
  trail?: TrailStageResult;
  /** Isolation: a healthy project's falls while another project's receiver hangs, refuses or answers 503. */
  neighbour?: NeighbourRow[];
  /** Falls while vitals flood the pipeline beyond the engine's limit. */
  flood?: FloodResult;
  /** The engine limit over a grid of worker settings and task-queue partitions (--stages engine-search). */
  engineSearch?: EngineSearchResult;
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

/** The issue-10 targets of the stages the run took; the throughput ratio needs both the engine and saturation. */
export function evaluateTargets(report: Omit<BenchReport, 'targets'>): Target[] {
  const targets: Target[] = [];
  const { engine, saturation, steady, api } = report;
  if (engine && saturation) {
    const share = saturation.deliveredPerSecond / engine.completedPerSecond;
    targets.push({
      name: 'pipeline throughput vs engine limit, same run',
      target: '>= 90%',
      value: `${Math.round(share * 100)}% (${saturation.deliveredPerSecond} of ${engine.completedPerSecond}/s)`,
      met: share >= 0.9,
    });
  }
  if (steady)
    targets.push(
      {
        name: `steady load ${steady.ratePerSecond}/s: latency p50`,
        target: '<= 60 ms',
        value: `${steady.latencyMs.p50} ms`,
        met: steady.latencyMs.p50 <= 60,
      },
      {
        name: `steady load ${steady.ratePerSecond}/s: latency p99`,
        target: '<= 100 ms',
        value: `${steady.latencyMs.p99} ms`,
        met: steady.latencyMs.p99 <= 100,
      },
    );
  if (api)
    targets.push(
      {
        name: 'API GET throughput',
        target: '>= 2000 req/s',
        value: `${api.get.requestsPerSecond} req/s`,
        met: api.get.requestsPerSecond >= 2000,
      },
      { name: 'API GET p99', target: '<= 50 ms', value: `${api.get.p99Ms} ms`, met: api.get.p99Ms <= 50 },
      ...(api.testButton
        ? [
            {
              name: 'test button round trip p50',
              target: '<= 50 ms',
              value: `${api.testButton.latencyMs.p50} ms`,
              met: api.testButton.latencyMs.p50 <= 50,
            },
          ]
        : []),
    );
  targets.push(...isolationTargets(report));
  const largest = report.growth?.at(-1);
  if (largest)
    targets.push({
      name: `peak worker RSS at N = ${largest.n}`,
      target: '< 400 MB',
      value: `${largest.peakRssMb.worker} MB`,
      met: largest.peakRssMb.worker < 400,
    });
  return targets;
}

/** The worst p99 over windows; a window nobody's event started in has no p99 and is skipped. */
const worstWindowP99 = (windows: { count: number; p99: number }[]) =>
  Math.max(...windows.filter((window) => window.count > 0).map((window) => window.p99));

/** The issue-10 targets: a failing neighbour and a flood must not delay another project's falls. */
function isolationTargets(report: Omit<BenchReport, 'targets'>): Target[] {
  const targets: Target[] = [];
  const rows = report.neighbour ?? [];
  if (rows.length) {
    const worstWindow = worstWindowP99(rows.flatMap((row) => row.windows));
    const slowestRecovery = Math.max(...rows.map((row) => row.backlogRecoverySeconds ?? Infinity));
    targets.push(
      {
        name: "neighbour: healthy project's FALL p99, worst window",
        target: '<= 250 ms',
        value: `${worstWindow} ms`,
        met: worstWindow <= 250,
      },
      {
        name: "neighbour: failing project's backlog arrives after recovery",
        target: '<= 300 s',
        value: Number.isFinite(slowestRecovery) ? `${slowestRecovery} s` : 'not all arrived',
        met: slowestRecovery <= 300,
      },
    );
    // Counted where requests reach the receiver, or from the delivery log while it refuses connections.
    const counted = rows.filter((row) => row.neighbourPeakAttemptsPerSecond !== null);
    if (counted.length) {
      const peak = Math.max(...counted.map((row) => row.neighbourPeakAttemptsPerSecond!));
      targets.push({
        name: `neighbour: attempts at the failing receiver, peak ${rows[0]!.windowSeconds} s window`,
        target: '<= 5 /s',
        value: `${peak} /s (${counted.map((row) => row.fault).join(', ')})`,
        met: peak <= 5,
      });
    }
  }
  if (report.flood) {
    const floodP99 = worstWindowP99(report.flood.windows);
    targets.push({
      name: 'flood: FALL p99, worst window',
      target: '<= 250 ms',
      value: `${floodP99} ms`,
      met: floodP99 <= 250,
    });
  }
  return targets;
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
  const { machine, versions, stack } = report;
  const out: string[] = [];
  out.push(
    `Webhook delivery bench (${report.mode}; ${report.stages.join(', ')}): ${machine.cores} cores (${machine.cpuModel}), ` +
      `${machine.memoryGiB} GiB, Node ${versions.node}, Temporal CLI ${versions.temporalCli}` +
      (versions.temporalServer ? `, server ${versions.temporalServer}` : '') +
      `, SDK ${versions.temporalSdk}`,
  );
  if (stack)
    out.push(
      `Stack: Postgres ${stack.postgres}, Temporal ${stack.temporal}` +
        // Only the dev server the bench starts runs on SQLite; a configured server is what it is.
        (stack.temporal === 'dev-server'
          ? ` (SQLite ${stack.sqlitePragmas.join(', ')})`
          : stack.temporal === 'cluster'
            ? ` (the production cluster: 2 frontends behind HAProxy, 2 history hosts, ${stack.historyShards} shards, ` +
              `2 matching, internal frontend, worker service; mTLS and the authorizer; one PostgreSQL for Temporal's ` +
              `databases and the service's)`
            : stack.temporalPid
              ? ` (pid ${stack.temporalPid}: its CPU and RSS are measured)`
              : ' (no BENCH_TEMPORAL_PID: its CPU and RSS are not measured)') +
        `; payloads ${report.payloadEncryption ? 'encrypted' : 'NOT encrypted'} by the bench's client; ` +
        `worker ${Object.entries(report.workerOptions)
          .map(([key, value]) => `${key}=${value}`)
          .join(' ')}`,
    );
  if (report.options?.length)
    out.push(
      `Registration options: ${report.options.join(', ')}` +
        (report.tokensIssued !== undefined && report.options.includes('oauth')
          ? ` (${report.tokensIssued} OAuth tokens issued)`
          : ''),
    );
  out.push('');
  const stageRows: (string | number)[][] = [];
  const { engine, rawSend, saturation, steady } = report;
  if (engine)
    stageRows.push([
      'engine limit (empty workflows, completed/s)',
      engine.n,
      engine.completedPerSecond,
      engine.latencyMs.p50,
      engine.latencyMs.p95,
      engine.latencyMs.p99,
      engine.latencyMs.max,
      `${engine.completed}/${engine.n}`,
    ]);
  if (rawSend)
    stageRows.push([
      'raw send limit (signed POSTs, verified/s)',
      rawSend.n,
      rawSend.deliveredPerSecond,
      ...lat(rawSend),
      accounted(rawSend),
    ]);
  if (saturation)
    stageRows.push([
      'pipeline at saturation (verified/s)',
      saturation.n,
      saturation.deliveredPerSecond,
      ...lat(saturation),
      accounted(saturation),
    ]);
  if (steady)
    stageRows.push([
      `pipeline steady ${steady.ratePerSecond}/s for ${steady.seconds} s`,
      steady.n,
      steady.deliveredPerSecond,
      ...lat(steady),
      accounted(steady),
    ]);
  if (stageRows.length)
    out.push(table(['stage', 'N', 'rate /s', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'delivered'], stageRows), '');
  const cpuLines = [
    ...(engine ? [`engine limit ${perThousand(engine.cpuSeconds, engine.n)}`] : []),
    ...(saturation
      ? [
          `pipeline at saturation ${perThousand(report.growth?.find((row) => row.n === saturation.n)?.cpuSeconds ?? {}, saturation.n)}`,
        ]
      : []),
  ];
  if (cpuLines.length) out.push(`CPU seconds per 1000: ${cpuLines.join('; ')}`, '');
  out.push(...resourceTables(report));
  if (report.growth?.length)
    out.push(
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
          row.peakRssMb.api ?? '-',
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
    );
  if (report.api)
    out.push(
      `API (autocannon, ${report.api.get.connections} connections):`,
      table(
        ['endpoint', 'seconds', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx', 'errors'],
        (
          [
            ['GET /webhooks/project/:id', report.api.get],
            ['POST /webhooks/register + DELETE cycle', report.api.registerDelete],
          ] as const
        ).map(([name, result]) => [
          name,
          result.seconds,
          result.requestsPerSecond,
          result.p50Ms,
          result.p99Ms,
          result.maxMs,
          result.non2xx,
          result.errors,
        ]),
      ),
      '',
    );
  const testButton = report.api?.testButton;
  if (testButton)
    out.push(
      `Test button (POST /webhooks/test/project/:id in npm start's process, one at a time, after ${testButton.warmup} unmeasured):`,
      table(
        ['round trips', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'not delivered', 'HTTP/receiver status'],
        [
          [
            testButton.n,
            testButton.latencyMs.p50,
            testButton.latencyMs.p95,
            testButton.latencyMs.p99,
            testButton.latencyMs.max,
            testButton.failures,
            Object.entries(testButton.outcomes)
              .map(([outcome, count]) => `${outcome} × ${count}`)
              .join(', '),
          ],
        ],
      ),
      '',
    );
  if (report.audit)
    out.push(
      `Audit trail's cost (the API in the bench's process, autocannon ${report.audit.connections} connections, ` +
        `${report.audit.seconds} s × ${report.audit.rounds} round(s) each; the test button's send is stubbed):`,
      table(
        ['operation', 'audit rows', 'req/s', 'p50 ms', 'p99 ms', 'rows written', 'req/s, % of without'],
        report.audit.rows.map((row) => [
          {
            register: 'POST /webhooks/register + DELETE cycle',
            test: 'POST /webhooks/test/project/:id',
            decode: 'POST /codec/decode (1 payload)',
          }[row.operation],
          row.variant === 'audit' ? 'written' : 'not written',
          row.requestsPerSecond,
          row.p50Ms,
          row.p99Ms,
          row.auditRows,
          row.variant === 'audit' ? `${report.audit!.withRowsPercent[row.operation]} %` : '',
        ]),
      ),
      '',
    );
  if (report.trail) {
    const { a, b, breaker } = report.trail;
    out.push(
      `Trail contention (${report.trail.apiProcesses} API processes: A's loops from a load process to one, B's ` +
        `PATCHes to another, B's breaker in the bench's process; ${report.trail.loops} loops PATCH project A for ` +
        `${report.trail.seconds} s, AUDITED_WRITES_PER_MINUTE ${report.trail.writesPerMinute}):`,
      table(
        ['what', 'count', 'p50 ms', 'p99 ms', 'max ms', 'rate'],
        [
          ["A's PATCHes accepted (200, a row each)", a.accepted, '', '', '', `${a.acceptedPerSecond}/s`],
          ["A's PATCHes refused (429, no row)", a.refused, '', '', '', ''],
          ["B's PATCHes, one at a time", b.latencyMs.count, b.latencyMs.p50, b.latencyMs.p99, b.latencyMs.max, ''],
          ...(['open', 'half-open', 'close'] as const).map((transition) => [
            `B's breaker → ${transition}`,
            breaker[transition].count,
            breaker[transition].p50,
            breaker[transition].p99,
            breaker[transition].max,
            '',
          ]),
        ],
      ),
      '',
    );
  }
  out.push(...isolationTables(report), ...searchTable(report));
  if (report.targets.length)
    out.push(
      'Targets:',
      table(
        ['target', 'wanted', 'measured', ''],
        report.targets.map((t) => [t.name, t.target, t.value, t.met ? 'met' : 'MISSED']),
      ),
      '',
    );
  out.push(
    report.accountedFor
      ? 'Every event accounted for: each arrived once, with a valid signature and its own body.'
      : `NOT ACCOUNTED FOR:\n  - ${report.problems.join('\n  - ')}`,
    `Run took ${report.durationSeconds} s; load average ${report.machine.loadAverage.before} before, ${report.machine.loadAverage.after} after.`,
  );
  return out.join('\n');
}

/** Each part's CPU-seconds per 1000 deliveries and bytes per delivery, steady and at saturation, side by side. */
function resourceTables(report: BenchReport): string[] {
  const { resources } = report;
  if (!resources || (!resources.steady && !resources.saturation)) return [];
  const stages = (
    [
      ['steady', resources.steady],
      ['saturation', resources.saturation],
    ] as const
  ).flatMap(([name, figures]) => (figures ? [{ name, figures, derived: perDelivery(figures) }] : []));
  const heading = stages.map(
    ({ name, figures }) => `${name} (${figures.deliveries} deliveries in ${figures.seconds} s)`,
  );
  const rows = (pick: (derived: ReturnType<typeof perDelivery>) => Record<string, number>) => {
    // A row only one stage has (a table that grew in one of them) goes after its neighbour in that stage, not last.
    const keys: string[] = [];
    for (const { derived } of stages) {
      let at = 0;
      for (const key of Object.keys(pick(derived))) {
        const found = keys.indexOf(key);
        if (found >= 0) at = found + 1;
        else keys.splice(at++, 0, key);
      }
    }
    return keys.map((key) => [key, ...stages.map(({ derived }) => pick(derived)[key] ?? '-')]);
  };
  return [
    `Per delivery, each part (CPU-seconds from /proc: robust to other load on the machine; PostgreSQL backends ` +
      `split by the database they serve). Peak rate reached: ${resources.peakDeliveredPerSecond ?? '-'} verified/s.`,
    table(
      ['CPU-seconds per 1000 deliveries', ...heading],
      rows((d) => d.cpuSecondsPer1000),
    ),
    '',
    table(
      ['bytes per delivery', ...heading],
      rows((d) => d.bytesPerDelivery),
    ),
    '',
    table(
      ['per delivery', ...heading],
      rows((d) => d.perDelivery),
    ),
    '',
  ];
}

function searchTable(report: BenchReport): string[] {
  const search = report.engineSearch;
  if (!search) return [];
  const out = [
    `Engine search (${search.n} empty workflows per configuration after ${search.warmup} to warm up, ` +
      `${search.server === 'dev-server' ? 'a fresh dev server each' : 'the configured server'}; ${search.seconds} s):`,
    table(
      [
        'configuration',
        'partitions',
        'wf-task slots',
        'wf-task pollers',
        'cache',
        'completed /s',
        'starts /s',
        'p50 ms',
        'p99 ms',
        'CPU s per 1000 (temporal / empty worker)',
      ],
      search.rows.map((row) => [
        row.label + (row.label === search.best ? ' (best)' : ''),
        row.partitions ?? 'server',
        row.slots,
        row.polls,
        row.cache,
        row.completedPerSecond,
        row.startsPerSecond,
        row.latencyMs.p50,
        row.latencyMs.p99,
        ['temporal', 'empty-worker']
          .map((name) =>
            row.cpuSeconds[name] === undefined ? '-' : ((row.cpuSeconds[name] * 1000) / row.n).toFixed(1),
          )
          .join(' / '),
      ]),
    ),
  ];
  for (const failure of search.failures) out.push(`  ${failure.label}: FAILED, ${failure.error}`);
  if (search.best) out.push(`Best: ${search.best}.`);
  out.push('');
  return out;
}

function isolationTables(report: BenchReport): string[] {
  const out: string[] = [];
  if (report.neighbour?.length)
    out.push(
      "Neighbour (project A's receiver fails while A emits VITAL_THRESHOLD and B emits FALL_DETECTION to a healthy receiver):",
      table(
        [
          "A's receiver",
          'rates A / B per s',
          "B's p50 / p99 per window (ms)",
          "B's p99 ms",
          'attempts at A /s: average, peak window',
          "A's backlog after recovery",
          'B delivered',
        ],
        report.neighbour.map((row) => [
          row.fault === '503' ? '503, Retry-After: 0' : row.fault === 'hang' ? 'hangs' : 'refuses',
          `${row.neighbourRate} / ${row.healthyRate}`,
          row.windows.map((window) => `${window.p50}/${window.p99}`).join(' '),
          row.healthy.p99,
          row.attemptsCountedFrom === null
            ? '- (not counted)'
            : `${row.neighbourAttemptsPerSecond}, ${row.neighbourPeakAttemptsPerSecond}` +
              (row.attemptsCountedFrom === 'delivery log' ? ' (delivery log)' : ''),
          row.backlogRecoverySeconds === null
            ? `${row.neighbourDelivered}/${row.neighbourSent} arrived`
            : `${row.backlogRecoverySeconds} s (${row.neighbourDelivered}/${row.neighbourSent})`,
          `${row.healthyAccounting.delivered}/${row.healthyAccounting.sent}`,
        ]),
      ),
      '',
    );
  if (report.flood)
    out.push(
      `Flood (VITAL_THRESHOLD at ${report.flood.vitalRate}/s, ${report.flood.vitalRateBasis}; FALL_DETECTION at ${report.flood.fallRate}/s; ${report.flood.seconds} s):`,
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
          ...(report.flood.fallStarts
            ? [
                ['FALL_DETECTION: emit → start accepted', ...summaryCells(report.flood.fallStarts), '-'],
                ['VITAL_THRESHOLD: emit → start accepted', ...summaryCells(report.flood.vitalStarts), '-'],
                [
                  'FALL_DETECTION: first workflow task in the queue',
                  ...summaryCells(report.flood.fallTaskQueueWait),
                  '-',
                ],
                ['FALL_DETECTION: task picked up → POST received', ...summaryCells(report.flood.fallInWorker), '-'],
              ]
            : []),
        ],
      ),
      `delivered ${report.flood.accounting.delivered}/${report.flood.accounting.sent}`,
      '',
    );
  return out;
}

export function writeReport(path: string, report: BenchReport): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(report, null, 2) + '\n');
}

const summaryCells = (summary: { p50: number; p99: number; max: number }) => [summary.p50, summary.p99, summary.max];

// A real Jaeger v2 (all-in-one: OTLP/HTTP in, in-memory storage, the query API out) on free loopback ports, built
// from its Go module by scripts/ensure-jaeger.sh. Jaeger v2 is an OpenTelemetry Collector: the same OTLP receiver
// also takes metrics, which its Prometheus exporter serves for the test to read, and logs, which its debug exporter
// writes to its output in full. The module carries no UI assets: JAEGER_UI_ASSETS names a folder of them (index.html
// and static/, built by scripts/ensure-jaeger-ui.sh), which the query extension then serves as its UI beside the API.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../dev/ports';

export interface RunningJaeger {
  /** OTEL_EXPORTER_OTLP_ENDPOINT for the processes under test. */
  otlpEndpoint: string;
  /** Jaeger's query API (/api/traces, /api/services) and, with JAEGER_UI_ASSETS, its UI (/trace/<id>). */
  queryUrl: string;
  /** The OTLP metrics received, in Prometheus text format. */
  metricsUrl: string;
  /** The process's output, its last `chars` characters (the log records received are in it). */
  output(chars?: number): string;
  stop(): Promise<void>;
}

/** The cached binary, built on first use (minutes); JAEGER_PATH names another. */
export function jaegerBinary(): string {
  if (process.env.JAEGER_PATH) return process.env.JAEGER_PATH;
  const script = join(__dirname, '..', '..', 'scripts', 'ensure-jaeger.sh');
  return execFileSync('sh', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

/**
 * Jaeger v2's collector-style configuration: OTLP/HTTP receiver, memory store, query API (and the UI from `uiAssets`,
 * when given); no other listener.
 */
function jaegerConfig(
  otlpPort: number,
  queryPort: number,
  queryGrpcPort: number,
  metricsPort: number,
  uiAssets: string | undefined,
): string {
  // jaeger_query's `ui.assets_path` (cmd/query/app/flags.go, UIConfig.AssetsPath); a JSON string is a YAML string.
  const ui = uiAssets ? `\n    ui:\n      assets_path: ${JSON.stringify(uiAssets)}` : '';
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
    logs:
      receivers: [otlp]
      exporters: [debug]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
    traces:
      level: none
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${queryPort}
    grpc:
      endpoint: 127.0.0.1:${queryGrpcPort}${ui}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${otlpPort}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
  prometheus:
    endpoint: 127.0.0.1:${metricsPort}
  debug:
    verbosity: detailed
    use_internal_logger: false
`;
}

export async function startJaeger(
  binary = jaegerBinary(),
  uiAssets = process.env.JAEGER_UI_ASSETS || undefined,
): Promise<RunningJaeger> {
  const [otlpPort, queryPort, queryGrpcPort, metricsPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const dir = mkdtempSync(join(tmpdir(), 'jaeger-'));
  const config = join(dir, 'config.yaml');
  writeFileSync(config, jaegerConfig(otlpPort, queryPort, queryGrpcPort, metricsPort, uiAssets));
  const lines: string[] = [];
  const child: ChildProcess = spawn(binary, ['--config', config], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const queryUrl = `http://127.0.0.1:${queryPort}`;
  const output = (chars = 4_000) => lines.join('').slice(-chars);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`Jaeger exited at start:\n${output()}`);
    const ready = await fetch(`${queryUrl}/api/services`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Jaeger's query API did not answer within 60 s:\n${output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  return { otlpEndpoint: `http://127.0.0.1:${otlpPort}`, queryUrl, metricsUrl, output, stop };
}

/** A span as Jaeger's query API (/api/traces) returns it. */
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; traceID: string; spanID: string }[];
  startTime: number;
  duration: number;
  tags: { key: string; type: string; value: unknown }[];
  logs: { timestamp: number; fields: { key: string; type: string; value: unknown }[] }[];
  processID: string;
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string; tags: { key: string; value: unknown }[] }>;
}

/** Traces of `service` with the given tags, through the query API. */
export async function findTraces(
  queryUrl: string,
  service: string,
  tags: Record<string, string>,
): Promise<JaegerTrace[]> {
  const query = new URLSearchParams({ service, tags: JSON.stringify(tags), limit: '20', lookback: '1h' });
  const response = await fetch(`${queryUrl}/api/traces?${query.toString()}`);
  if (!response.ok) throw new Error(`Jaeger answered ${response.status} to a trace search`);
  return ((await response.json()) as { data: JaegerTrace[] | null }).data ?? [];
}

export async function getTrace(queryUrl: string, traceId: string): Promise<JaegerTrace | undefined> {
  const response = await fetch(`${queryUrl}/api/traces/${traceId}`);
  if (response.status === 404) return undefined;
  if (!response.ok) throw new Error(`Jaeger answered ${response.status} for trace ${traceId}`);
  return ((await response.json()) as { data: JaegerTrace[] }).data[0];
}

/** One log record as the collector's debug exporter (`verbosity: detailed`) printed it, with its resource's service. */
export interface PrintedLogRecord {
  service: string;
  body: string;
  severity: string;
  traceId: string;
  spanId: string;
}

/** The debug exporter's log output: `ResourceLog #n` blocks naming `service.name`, each with `LogRecord #n` blocks. */
export function printedLogRecords(output: string): PrintedLogRecord[] {
  return output
    .split(/ResourceLog #\d+/)
    .slice(1)
    .flatMap((resource) => {
      const service = /-> service\.name: Str\(([^)]*)\)/.exec(resource)?.[1] ?? '';
      return resource
        .split(/LogRecord #\d+/)
        .slice(1)
        .map((record) => ({
          service,
          body: /^Body: Str\((.*)\)$/m.exec(record)?.[1] ?? '',
          severity: /^SeverityText: (\S*)/m.exec(record)?.[1] ?? '',
          traceId: /^Trace ID: ?([0-9a-f]*)/m.exec(record)?.[1] ?? '',
          spanId: /^Span ID: ?([0-9a-f]*)/m.exec(record)?.[1] ?? '',
        }));
    });
}

// Whether traces, metrics and logs leave over OTLP, read from the standard OpenTelemetry variables: off unless an
// exporter or an endpoint is named, off whenever OTEL_SDK_DISABLED=true or the exporter is `none`. Logs only when asked
// for by name (stdout keeps every line either way). Pure, so config.ts validates the same reading the processes act on.

export interface TelemetrySettings {
  /** Spans exported over OTLP (OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint set). */
  traces: boolean;
  /** Metrics exported over OTLP (OTEL_METRICS_EXPORTER=otlp, or an OTLP endpoint set). */
  metrics: boolean;
  /**
   * Log lines exported over OTLP as well as written to stdout: OTEL_LOGS_EXPORTER=otlp or a logs endpoint only, never
   * the shared OTEL_EXPORTER_OTLP_ENDPOINT alone (a trace store such as Jaeger takes no logs).
   */
  logs: boolean;
  /** What is wrong, each naming its variable; empty when the variables are usable. */
  problems: string[];
}

type Env = Record<string, string | undefined>;

const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];
/** What this service sends: OTLP over HTTP, protobuf (the specification's default). */
const PROTOCOL = 'http/protobuf';

/** Reads the OTEL_* variables a process acts on; an empty string counts as unset, as the specification says. */
export function telemetrySettings(env: Env): TelemetrySettings {
  const { traces, metrics, logs, problems } = readSignals(env);
  return { traces, metrics, logs, problems };
}

/**
 * Whether OTLP metrics are asked for by name (OTEL_METRICS_EXPORTER=otlp, or a metrics endpoint), not only implied by
 * the shared OTEL_EXPORTER_OTLP_ENDPOINT: a worker with WORKER_METRICS_PORT keeps its Prometheus endpoint then.
 */
export const otlpMetricsNamed = (env: Env): boolean => readSignals(env).metricsByName;

/** Each signal on or off, and metrics also as asked for by name only; with the problems of the variables. */
function readSignals(env: Env): TelemetrySettings & { metricsByName: boolean } {
  const value = (name: string) => env[name]?.trim() || undefined;
  const problems: string[] = [];
  const disabledValue = value('OTEL_SDK_DISABLED')?.toLowerCase();
  if (disabledValue !== undefined && disabledValue !== 'true' && disabledValue !== 'false')
    problems.push('OTEL_SDK_DISABLED must be true or false');
  const disabled = disabledValue === 'true';

  /**
   * Whether the signal is on: by name (its exporter `otlp`, or its own endpoint) or, unless `byNameOnly`, by the
   * shared endpoint.
   */
  const signal = (kind: 'TRACES' | 'METRICS' | 'LOGS', byNameOnly = false): boolean => {
    const exporterName = `OTEL_${kind}_EXPORTER`;
    const exporters = (value(exporterName) ?? '').split(',').map((name) => name.trim().toLowerCase());
    const named = exporters.filter((name) => name !== '');
    if (named.some((name) => name !== 'otlp' && name !== 'none'))
      problems.push(`${exporterName} must be otlp or none (this service exports over OTLP only)`);
    for (const name of [`OTEL_EXPORTER_OTLP_${kind}_ENDPOINT`, 'OTEL_EXPORTER_OTLP_ENDPOINT'])
      if (value(name) !== undefined && !/^https?:\/\/[^\s/?#]+/i.test(value(name)!))
        problems.push(`${name} must be an http:// or https:// URL`);
    const protocol = value(`OTEL_EXPORTER_OTLP_${kind}_PROTOCOL`) ?? value('OTEL_EXPORTER_OTLP_PROTOCOL');
    if (protocol !== undefined && protocol !== PROTOCOL)
      problems.push(`OTEL_EXPORTER_OTLP_${kind}_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL: only ${PROTOCOL} is supported`);
    if (disabled || named.includes('none')) return false;
    const byName = named.includes('otlp') || value(`OTEL_EXPORTER_OTLP_${kind}_ENDPOINT`) !== undefined;
    return byName || (!byNameOnly && value('OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined);
  };
  const traces = signal('TRACES');
  const metrics = signal('METRICS');
  const metricsByName = signal('METRICS', true);
  const logs = signal('LOGS', true);

  const sampler = value('OTEL_TRACES_SAMPLER')?.toLowerCase();
  if (sampler !== undefined && !SAMPLERS.includes(sampler))
    problems.push(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}`);
  const ratio = value('OTEL_TRACES_SAMPLER_ARG');
  if (ratio !== undefined && sampler?.endsWith('traceidratio')) {
    const parsed = Number(ratio);
    if (!Number.isFinite(parsed) || parsed < 0 || parsed > 1)
      problems.push('OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the share of traces sampled)');
  }
  // The shared variables are read for every signal: each problem said once.
  return { traces, metrics, logs, metricsByName, problems: [...new Set(problems)] };
}

/** Where and how often the worker's Temporal runtime sends its metrics over OTLP/HTTP. */
export interface OtlpMetricsExporter {
  url: string;
  headers: Record<string, string>;
  intervalMs: number;
}

/**
 * The OTLP metrics exporter the standard variables describe: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as it is, else
 * OTEL_EXPORTER_OTLP_ENDPOINT with /v1/metrics, else the local collector; headers from OTEL_EXPORTER_OTLP_[METRICS_]HEADERS
 * (`key=value,…`, URL-encoded); every OTEL_METRIC_EXPORT_INTERVAL ms (60 s by default).
 */
export function otlpMetricsExporter(env: Env): OtlpMetricsExporter {
  const value = (name: string) => env[name]?.trim() || undefined;
  const base = value('OTEL_EXPORTER_OTLP_ENDPOINT')?.replace(/\/+$/, '');
  const url = value('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT') ?? `${base ?? 'http://localhost:4318'}/v1/metrics`;
  const headers: Record<string, string> = {};
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_METRICS_HEADERS'])
    for (const pair of (value(name) ?? '').split(',')) {
      const at = pair.indexOf('=');
      if (at > 0) headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    }
  const interval = Number(value('OTEL_METRIC_EXPORT_INTERVAL'));
  return { url, headers, intervalMs: Number.isInteger(interval) && interval > 0 ? interval : 60_000 };
}

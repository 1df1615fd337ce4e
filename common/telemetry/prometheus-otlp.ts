// The API's prom-client registries read as OpenTelemetry metric data, so the same series as its /metrics leave over
// OTLP too (api/health/otlp-metrics.ts hands this to the SDK's periodic reader as a metric producer). Pure: a scrape's JSON
// in, metric data out. Counters become monotonic cumulative sums named without `_total` (OpenTelemetry's convention;
// a collector's Prometheus exporter puts the suffix back), gauges stay gauges, histograms keep their buckets.
// Summaries have no OpenTelemetry equivalent in the SDK: the API registers none.
import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InstrumentType,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';

/** One metric of prom-client's `registry.getMetricsAsJSON()` (its `type` is a string at run time). */
export interface PrometheusMetric {
  name: string;
  help: string;
  type: unknown;
  values: { value: number; labels: Partial<Record<string, string | number>>; metricName?: string }[];
}

/** The metric data of one collection: cumulative since `startTime`, read at `endTime`. */
export function prometheusToOtlp(metrics: PrometheusMetric[], startTime: HrTime, endTime: HrTime): MetricData[] {
  return metrics.flatMap((metric): MetricData[] => {
    const descriptor = (name: string, type: InstrumentType) => ({
      name,
      description: metric.help,
      unit: '',
      type,
      valueType: ValueType.DOUBLE,
    });
    const points = (): DataPoint<number>[] =>
      metric.values.map(({ value, labels }) => ({ startTime, endTime, attributes: attributes(labels), value }));
    switch (String(metric.type)) {
      case 'counter':
        return [
          {
            descriptor: descriptor(metric.name.replace(/_total$/, ''), InstrumentType.COUNTER),
            aggregationTemporality: AggregationTemporality.CUMULATIVE,
            dataPointType: DataPointType.SUM,
            isMonotonic: true,
            dataPoints: points(),
          },
        ];
      case 'gauge':
        return [
          {
            descriptor: descriptor(metric.name, InstrumentType.GAUGE),
            aggregationTemporality: AggregationTemporality.CUMULATIVE,
            dataPointType: DataPointType.GAUGE,
            dataPoints: points(),
          },
        ];
      case 'histogram':
        return [
          {
            descriptor: descriptor(metric.name, InstrumentType.HISTOGRAM),
            aggregationTemporality: AggregationTemporality.CUMULATIVE,
            dataPointType: DataPointType.HISTOGRAM,
            dataPoints: histogramPoints(metric.values, startTime, endTime),
          },
        ];
      default:
        return [];
    }
  });
}

const attributes = (labels: Partial<Record<string, string | number>>): Attributes =>
  Object.fromEntries(
    Object.entries(labels).filter((entry): entry is [string, string | number] => entry[1] !== undefined),
  );

/**
 * prom-client lists a histogram as `_bucket` values with cumulative counts under an `le` label (`+Inf` last), and a
 * `_sum` and `_count` per label set; OpenTelemetry wants, per label set, the finite bounds and each bucket's own count.
 */
function histogramPoints(
  values: PrometheusMetric['values'],
  startTime: HrTime,
  endTime: HrTime,
): DataPoint<Histogram>[] {
  const series = new Map<string, { attributes: Attributes; bounds: [number, number][]; sum: number; count: number }>();
  for (const { value, labels, metricName = '' } of values) {
    const { le, ...rest } = labels;
    const own = attributes(rest);
    const key = JSON.stringify(Object.entries(own).sort(([a], [b]) => a.localeCompare(b)));
    const entry = series.get(key) ?? { attributes: own, bounds: [], sum: 0, count: 0 };
    series.set(key, entry);
    if (metricName.endsWith('_bucket')) entry.bounds.push([Number(le), value]);
    else if (metricName.endsWith('_sum')) entry.sum = value;
    else if (metricName.endsWith('_count')) entry.count = value;
  }
  return [...series.values()].map(({ attributes, bounds, sum, count }) => {
    // `+Inf` reads as NaN or Infinity: not a bound; the last bucket holds what is above the largest finite one.
    const finite = bounds.filter(([le]) => Number.isFinite(le)).sort(([a], [b]) => a - b);
    const cumulative = [...finite.map(([, below]) => below), count];
    return {
      startTime,
      endTime,
      attributes,
      value: {
        buckets: {
          boundaries: finite.map(([le]) => le),
          counts: cumulative.map((below, i) => below - (i === 0 ? 0 : cumulative[i - 1]!)),
        },
        sum,
        count,
      },
    };
  });
}

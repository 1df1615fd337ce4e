// A bench run's dashboard picture (`--dashboard <png>`): a real Prometheus (Debian's) scrapes the bench's API and
// worker while the stages run; at the end every query of the shipped dashboard's panels is evaluated over the run
// with /api/v1/query_range, its Grafana variables filled in as Grafana would, and bench/dashboard-render.ts draws the
// answers and photographs the page in Chromium. Grafana itself is not run.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DASHBOARD_PATH } from '../test/support/dashboard';
import { startPrometheus, type RunningPrometheus } from '../test/support/prometheus';
import {
  grafanaIntervals,
  layoutPanels,
  promDuration,
  renderDashboardHtml,
  screenshotHtml,
  substituteVariables,
  type RenderDashboard,
  type Series,
  type TargetResult,
} from './dashboard-render';

/** How often Prometheus scrapes the bench's API and worker: also what Grafana's datasource would be told (timeInterval). */
export const SCRAPE_INTERVAL_SECONDS = 2;
/** The page's width in CSS pixels (and the PNG's). */
export const PAGE_WIDTH = 1400;

export interface DashboardCapture {
  /** Unix seconds at which Prometheus began scraping. */
  startedAt: number;
  /**
   * Evaluates every panel's queries over the run so far, draws the page into `pngPath`, and leaves the page and
   * Prometheus' answers in `keepDir` (dashboard.html, dashboard-answers.json). Returns the panels that had no data.
   */
  finish(options: { pngPath: string; caption: (facts: CaptureFacts) => string[]; keepDir: string }): Promise<string[]>;
  stop(): Promise<void>;
}

/** What the caption may say about the capture. */
export interface CaptureFacts {
  prometheusVersion: string;
  from: number;
  to: number;
  stepSeconds: number;
  rateInterval: string;
}

interface MatrixReply {
  resultType: string;
  result: { metric: Record<string, string>; values: [number, string][] }[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts Prometheus (in `dir`) on the bench's API /metrics and worker metrics port; resolves once both are up. */
export async function startDashboardCapture(options: {
  dir: string;
  apiPort: number;
  metricsToken: string;
  workerMetricsPort: number;
}): Promise<DashboardCapture> {
  mkdirSync(options.dir, { recursive: true });
  const prometheus: RunningPrometheus = await startPrometheus({
    dir: options.dir,
    api: { port: options.apiPort, metricsToken: options.metricsToken },
    workerMetricsPort: options.workerMetricsPort,
    scrapeIntervalSeconds: SCRAPE_INTERVAL_SECONDS,
  });
  const startedAt = Date.now() / 1000;
  return {
    startedAt,
    async finish({ pngPath, caption, keepDir }) {
      // Two more scrapes, so the run's last state is in Prometheus.
      await sleep(2 * SCRAPE_INTERVAL_SECONDS * 1000 + 500);
      const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as RenderDashboard;
      const build = await prometheus.get<{ version: string }>('/api/v1/status/buildinfo');
      const now = Date.now() / 1000;
      // One interval for every panel: Grafana's, for the narrowest panel (its width in pixels is its data points).
      const narrowest = Math.min(
        ...layoutPanels(dashboard.panels, PAGE_WIDTH - 32)
          .filter((_, i) => dashboard.panels[i]!.type !== 'row')
          .map((box) => box.width),
      );
      const rangeMs = (now - startedAt) * 1000;
      const { intervalMs, rateIntervalMs } = grafanaIntervals({
        rangeMs,
        maxDataPoints: Math.floor(narrowest),
        scrapeIntervalMs: SCRAPE_INTERVAL_SECONDS * 1000,
      });
      const step = intervalMs / 1000;
      const from = Math.ceil(startedAt / step) * step;
      const to = Math.floor(now / step) * step;
      const results = new Map<number, TargetResult[]>();
      const empty: string[] = [];
      for (const panel of dashboard.panels) {
        if (!panel.targets?.length) continue;
        const answers: TargetResult[] = [];
        for (const target of panel.targets) {
          const expr = substituteVariables(target.expr, { intervalMs, rateIntervalMs, rangeMs: (to - from) * 1000 });
          const query = new URLSearchParams({ query: expr, start: String(from), end: String(to), step: String(step) });
          const reply = await prometheus.get<MatrixReply>(`/api/v1/query_range?${query.toString()}`);
          const series: Series[] =
            reply?.data?.result.map(({ metric, values }) => ({
              labels: metric,
              points: values.map(([t, v]): [number, number] => [t, Number(v)]),
            })) ?? [];
          answers.push({
            refId: target.refId,
            expr,
            ...(target.legendFormat !== undefined && { legendFormat: target.legendFormat }),
            series,
            ...(reply?.status !== 'success' && { error: reply?.error ?? 'Prometheus did not answer' }),
          });
        }
        results.set(panel.id, answers);
        if (answers.every((answer) => answer.series.length === 0)) empty.push(panel.title);
      }
      const facts: CaptureFacts = {
        prometheusVersion: build?.data?.version ?? 'unknown',
        from,
        to,
        stepSeconds: step,
        rateInterval: promDuration(rateIntervalMs),
      };
      const html = renderDashboardHtml({
        dashboard,
        results,
        from,
        to,
        step,
        caption: caption(facts),
        width: PAGE_WIDTH,
      });
      writeFileSync(join(keepDir, 'dashboard.html'), html);
      writeFileSync(
        join(keepDir, 'dashboard-answers.json'),
        JSON.stringify({ ...facts, panels: Object.fromEntries(results) }, null, 1),
      );
      await screenshotHtml(html, pngPath, PAGE_WIDTH);
      return empty;
    },
    stop: () => prometheus.stop(),
  };
}

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The shipped Grafana dashboard and its provisioning (deploy/grafana/). */
export const GRAFANA_DEPLOY_DIR = join(__dirname, '..', '..', 'deploy', 'grafana');
export const DASHBOARD_PATH = join(GRAFANA_DEPLOY_DIR, 'dashboards', 'webhook-delivery.json');

export interface DashboardTarget {
  refId: string;
  expr: string;
  legendFormat?: string;
  datasource?: { type: string; uid: string };
}
export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type: string; uid: string };
  targets?: DashboardTarget[];
  panels?: DashboardPanel[];
  fieldConfig?: { defaults?: { unit?: string } };
}
export interface Dashboard {
  uid: string;
  title: string;
  panels: DashboardPanel[];
  templating?: { list: { name: string; type: string; query?: string }[] };
}

export const loadDashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as Dashboard;

/** Every query of the dashboard, rows' collapsed panels included, with the panel it belongs to. */
export function dashboardQueries(dashboard: Dashboard): { panel: string; refId: string; expr: string }[] {
  const walk = (panels: DashboardPanel[]): DashboardPanel[] => panels.flatMap((p) => [p, ...walk(p.panels ?? [])]);
  return walk(dashboard.panels).flatMap((panel) =>
    (panel.targets ?? []).map(({ refId, expr }) => ({ panel: panel.title, refId, expr })),
  );
}

// Words of PromQL that are not series: binary operators, modifiers, and the literals Inf and NaN.
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan', 'atan2']);

/**
 * The series names a PromQL expression selects: each bare name not followed by `(` (which makes it a function or an
 * aggregation), after dropping what cannot hold one (strings, Grafana's `$variables`, label matchers, ranges, grouping label lists, numbers
 * and durations). Names are taken only as written: a `{__name__=~"…"}` selector is refused, so the dashboard's
 * series stay checkable by name.
 */
export function seriesNamesOf(expr: string): string[] {
  if (/__name__/.test(expr)) throw new Error(`select series by name, not by __name__: ${expr}`);
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/gi, ' ')
    .replace(/\b(?:group_left|group_right)\b/gi, ' ');
  const names = new Set<string>();
  for (const match of stripped.matchAll(/(\d[\w.]*(?:[eE][+-]?\d+)?)|([A-Za-z_:][\w:]*)(\s*\()?/g)) {
    const [, number, word, call] = match;
    if (number !== undefined || call !== undefined || !word || KEYWORDS.has(word.toLowerCase())) continue;
    names.add(word);
  }
  return [...names];
}

/** The sample names in a Prometheus text exposition (a histogram's `_bucket`, `_sum` and `_count` each). */
export function exposedSeriesNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const line of exposition.split('\n')) {
    const name = /^([A-Za-z_:][\w:]*)(?:\{|\s)/.exec(line)?.[1];
    if (name) names.add(name);
  }
  return names;
}

/** Each query naming a series absent from `exported`, with the names it lacks. */
export function queriesNamingUnexportedSeries(
  dashboard: Dashboard,
  exported: ReadonlySet<string>,
): { panel: string; refId: string; missing: string[] }[] {
  return dashboardQueries(dashboard)
    .map(({ panel, refId, expr }) => ({ panel, refId, missing: seriesNamesOf(expr).filter((n) => !exported.has(n)) }))
    .filter(({ missing }) => missing.length > 0);
}

/** A panel's expression as Prometheus runs it: Grafana's interval variables replaced by one window. */
export const withWindow = (expr: string, window: string): string =>
  expr.replace(/\$__rate_interval|\$__interval|\$__range|\$\{__rate_interval\}|\$\{__interval\}/g, window);

// The shipped Grafana dashboard (deploy/grafana/dashboards/webhook-delivery.json) drawn without Grafana: its panels on
// Grafana's 24-column grid, each timeseries as SVG lines (or bars) of what Prometheus answered for the panel's queries,
// stat panels as a number, legends from `legendFormat` with the panel's legend calcs, values in the panel's unit. The
// page is photographed in Chromium (playwright-core). Everything but `screenshotHtml` is pure, and tested in
// test/operations/dashboard-render.test.ts. It draws only what it is given: a panel whose queries returned nothing says "No data".

export interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface RenderTarget {
  refId: string;
  expr: string;
  legendFormat?: string;
}

interface FieldDefaults {
  unit?: string;
  decimals?: number;
  noValue?: string;
  thresholds?: { steps: { color: string; value: number | null }[] };
  custom?: { drawStyle?: string; lineInterpolation?: string; fillOpacity?: number };
}

export interface RenderPanel {
  id: number;
  type: string;
  title: string;
  gridPos: GridPos;
  collapsed?: boolean;
  targets?: RenderTarget[];
  fieldConfig?: { defaults?: FieldDefaults };
  options?: {
    legend?: { calcs?: string[] };
    reduceOptions?: { calcs?: string[] };
    graphMode?: string;
    colorMode?: string;
  };
}

export interface RenderDashboard {
  title: string;
  panels: RenderPanel[];
}

/** One series of a range query: its labels and its [unix seconds, value] samples (NaN where Prometheus said so). */
export interface Series {
  labels: Record<string, string>;
  points: [number, number][];
}

/** What Prometheus answered for one target of a panel: the expression as sent, its series or its error. */
export interface TargetResult {
  refId: string;
  expr: string;
  legendFormat?: string;
  series: Series[];
  error?: string;
}

// ---- Grafana's interval variables ------------------------------------------------------------------------------

/** Grafana's rounding of a raw interval (rangeutil.roundInterval), in ms, up to a day. */
export function roundInterval(ms: number): number {
  const table: [number, number][] = [
    [15, 10],
    [35, 20],
    [75, 50],
    [150, 100],
    [350, 200],
    [750, 500],
    [1_500, 1_000],
    [3_500, 2_000],
    [7_500, 5_000],
    [12_500, 10_000],
    [17_500, 15_000],
    [25_000, 20_000],
    [45_000, 30_000],
    [90_000, 60_000],
    [210_000, 120_000],
    [450_000, 300_000],
    [750_000, 600_000],
    [1_050_000, 900_000],
    [1_500_000, 1_200_000],
    [2_700_000, 1_800_000],
    [5_400_000, 3_600_000],
    [9_000_000, 7_200_000],
    [16_200_000, 10_800_000],
    [32_400_000, 21_600_000],
    [86_400_000, 43_200_000],
  ];
  for (const [below, rounded] of table) if (ms < below) return rounded;
  return 86_400_000;
}

/**
 * `$__interval` and `$__rate_interval` as Grafana computes them for a panel: the range over the panel's data points
 * (its width in pixels), rounded, at least the datasource's scrape interval; the rate interval is
 * max(interval + scrape interval, 4 × scrape interval). The interval is also the range query's step.
 */
export function grafanaIntervals(options: { rangeMs: number; maxDataPoints: number; scrapeIntervalMs: number }): {
  intervalMs: number;
  rateIntervalMs: number;
} {
  const { rangeMs, maxDataPoints, scrapeIntervalMs } = options;
  const intervalMs = Math.max(roundInterval(rangeMs / Math.max(1, maxDataPoints)), scrapeIntervalMs);
  return { intervalMs, rateIntervalMs: Math.max(intervalMs + scrapeIntervalMs, 4 * scrapeIntervalMs) };
}

/** A PromQL duration: whole seconds as `Ns`, anything else in `ms`. */
export const promDuration = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000}s` : `${Math.round(ms)}ms`);

/**
 * A panel's expression as Grafana sends it: its `$__interval`, `$__rate_interval`, `$__range` (and their `${…}`,
 * `_ms` and `_s` forms) replaced. Any other `$variable` is refused, so nothing Grafana would have filled in reaches
 * Prometheus unreplaced.
 */
export function substituteVariables(
  expr: string,
  values: { intervalMs: number; rateIntervalMs: number; rangeMs: number },
): string {
  const known: Record<string, string> = {
    __interval: promDuration(values.intervalMs),
    __interval_ms: String(values.intervalMs),
    __rate_interval: promDuration(values.rateIntervalMs),
    __rate_interval_ms: String(values.rateIntervalMs),
    __range: promDuration(Math.round(values.rangeMs / 1000) * 1000),
    __range_s: String(Math.round(values.rangeMs / 1000)),
    __range_ms: String(Math.round(values.rangeMs)),
  };
  return expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced: string | undefined, bare: string | undefined) => {
    const name = braced ?? bare!;
    const value = known[name];
    if (value === undefined) throw new Error(`no value for the variable ${whole} in ${expr}`);
    return value;
  });
}

// ---- Legends and values ------------------------------------------------------------------------------------------

/**
 * A series' name as Grafana's Prometheus datasource gives it: `legendFormat` with each `{{label}}` replaced by the
 * label's value (empty when the series lacks it), or without one the series' labels as `name{a="b"}`.
 */
export function legendName(legendFormat: string | undefined, labels: Record<string, string>, expr = ''): string {
  if (legendFormat && legendFormat !== '__auto')
    return legendFormat.replace(/\{\{\s*(.+?)\s*\}\}/g, (_, name: string) => labels[name] ?? '').trim();
  const { __name__: name = '', ...rest } = labels;
  const inner = Object.entries(rest)
    .map(([key, value]) => `${key}="${value}"`)
    .join(', ');
  return name || inner ? `${name}${inner ? `{${inner}}` : ''}` : expr;
}

/** A number with `decimals` places, or about three significant digits without trailing zeros. */
function plain(value: number, decimals?: number): string {
  if (decimals !== undefined) return value.toFixed(decimals);
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (abs >= 100) return value.toFixed(0);
  if (abs < 0.001) return value.toExponential(1);
  return String(Number(value.toPrecision(3)));
}

/** value scaled by 1000s with K, Mil, Bil (Grafana's `short`). */
function scaled(value: number, decimals?: number): string {
  const abs = Math.abs(value);
  for (const [factor, suffix] of [
    [1e9, ' Bil'],
    [1e6, ' Mil'],
    [1e3, ' K'],
  ] as const)
    if (abs >= factor) return `${plain(value / factor, decimals)}${suffix}`;
  return plain(value, decimals);
}

/** A value in a panel's unit, as its axis and legend show it (the units this dashboard uses; others as a suffix). */
export function formatValue(value: number, unit = 'none', decimals?: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  switch (unit) {
    case 'none':
      return plain(value, decimals);
    case 'short':
      return scaled(value, decimals);
    case 'ops':
      return `${scaled(value, decimals)} ops/s`;
    case 's':
      if (abs !== 0 && abs < 1) return `${plain(value * 1000, decimals)} ms`;
      if (abs < 60) return `${plain(value, decimals)} s`;
      if (abs < 3600) return `${plain(value / 60, decimals)} min`;
      return `${plain(value / 3600, decimals)} hour`;
    case 'ms':
      if (abs < 1000) return `${plain(value, decimals)} ms`;
      if (abs < 60_000) return `${plain(value / 1000, decimals)} s`;
      return `${plain(value / 60_000, decimals)} min`;
    default:
      return `${plain(value, decimals)} ${unit}`;
  }
}

/**
 * One unit for a whole axis, chosen by its largest value, so its ticks read alike (0, 20, 40, 60 s rather than
 * 40 s and 1 min): the factor from the panel's unit to the axis', and the label of a tick.
 */
export function axisUnit(
  unit = 'none',
  largest: number,
): { factor: number; label: (value: number, decimals: number) => string } {
  const as = (factor: number, suffix: string) => ({
    factor,
    label: (value: number, decimals: number) => `${(value * factor).toFixed(decimals)}${suffix}`,
  });
  switch (unit) {
    case 's':
      return largest < 1 ? as(1000, ' ms') : largest < 120 ? as(1, ' s') : as(1 / 60, ' min');
    case 'ms':
      return largest < 1000 ? as(1, ' ms') : largest < 120_000 ? as(1 / 1000, ' s') : as(1 / 60_000, ' min');
    default:
      return { factor: 1, label: (value: number, decimals: number) => formatValue(value, unit, decimals) };
  }
}

/** The finite samples of a series (NaN and ±Inf are gaps, as in Grafana's graph). */
const finite = (series: Series) => series.points.filter(([, v]) => Number.isFinite(v));

/** Grafana's reducers that this dashboard's legends and stat use. */
export function reduce(series: Series, calc: string): number | undefined {
  const values = finite(series).map(([, v]) => v);
  if (values.length === 0) return undefined;
  switch (calc) {
    case 'mean':
      return values.reduce((sum, v) => sum + v, 0) / values.length;
    case 'max':
      return Math.max(...values);
    case 'min':
      return Math.min(...values);
    case 'last':
    case 'lastNotNull':
      return values.at(-1);
    default:
      throw new Error(`reducer ${calc} is not drawn`);
  }
}

// ---- Layout ------------------------------------------------------------------------------------------------------

/** Grafana's grid: 24 columns, rows of 30 px, 8 px between cells. */
export const GRID = { columns: 24, cellHeight: 30, margin: 8 } as const;

export interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

/**
 * Each panel's box in pixels on a grid `width` wide, from its gridPos as Grafana places it. A panel may need more
 * height than its gridPos gives (`extraHeight`, e.g. for a long legend): the panels beside it grow with it and the
 * panels below move down, so the grid's columns and alignment are kept.
 */
export function layoutPanels(
  panels: readonly Pick<RenderPanel, 'gridPos'>[],
  width: number,
  extraHeight: (index: number, box: Box) => number = () => 0,
): Box[] {
  const { columns, cellHeight, margin } = GRID;
  const column = (width - (columns - 1) * margin) / columns;
  const base = panels.map(({ gridPos: { x, y, w, h } }): Box => ({
    left: x * (column + margin),
    top: y * (cellHeight + margin),
    width: w * column + (w - 1) * margin,
    height: h * cellHeight + (h - 1) * margin,
  }));
  const extra = base.map((box, i) => Math.max(0, Math.ceil(extraHeight(i, box))));
  // shift(y): how far grid line y moves down, the most any chain of grown panels above it adds.
  const memo = new Map<number, number>();
  const shift = (line: number): number => {
    const known = memo.get(line);
    if (known !== undefined) return known;
    let most = 0;
    panels.forEach(({ gridPos: { y, h } }, i) => {
      if (y + h <= line) most = Math.max(most, shift(y) + extra[i]!);
    });
    memo.set(line, most);
    return most;
  };
  return base.map((box, i) => {
    const { y, h } = panels[i]!.gridPos;
    const top = box.top + shift(y);
    return { ...box, top, height: box.height + shift(y + h) - shift(y) };
  });
}

// ---- Drawing -----------------------------------------------------------------------------------------------------

/** Grafana's classic palette, in its order. */
export const PALETTE = ['#73BF69', '#F2CC0C', '#8AB8FF', '#FF780A', '#F2495C', '#5794F2', '#B877D9', '#705DA0'];
const NAMED_COLORS: Record<string, string> = { green: '#73BF69', red: '#F2495C', yellow: '#FADE2A', blue: '#5794F2' };

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Ticks from 0 (or below, for negative data) past `max`: about `count` steps of 1, 2, 2.5 or 5 × 10^k. */
export function niceTicks(min: number, max: number, count = 4): number[] {
  const low = Math.min(0, min);
  const high = max > low ? max : low + 1;
  const raw = (high - low) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  const ticks: number[] = [];
  for (let t = Math.floor(low / step) * step; t < high + step * 0.999; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

/** Time ticks (unix s) at a round interval giving at most `most` labels between `from` and `to`. */
export function timeTicks(from: number, to: number, most = 8): number[] {
  const steps = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  const step = steps.find((s) => (to - from) / s <= most) ?? 86400;
  const ticks: number[] = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) ticks.push(t);
  return ticks;
}

/** The decimals a tick step needs to be shown exactly (0.25 → 2, 5 → 0). */
export function decimalsOf(step: number): number {
  const text = String(Number(step.toPrecision(12)));
  return text.includes('.') ? text.length - text.indexOf('.') - 1 : 0;
}

const clock = (unixSeconds: number, withSeconds: boolean) =>
  new Date(unixSeconds * 1000).toISOString().slice(11, withSeconds ? 19 : 16);

interface Drawn {
  name: string;
  color: string;
  series: Series;
}

/** The series of a panel's targets, named by legendFormat, sorted by name, each with its colour. */
export function panelSeries(results: readonly TargetResult[]): Drawn[] {
  return results
    .flatMap((result) =>
      result.series.map((series) => ({ name: legendName(result.legendFormat, series.labels, result.expr), series })),
    )
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((drawn, i) => ({ ...drawn, color: PALETTE[i % PALETTE.length]! }));
}

/** A series' samples split where one is missing at a step: Grafana draws a gap there (its lines do not span nulls). */
export function segments(points: readonly [number, number][], step: number): [number, number][][] {
  const runs: [number, number][][] = [];
  let previous: number | undefined;
  for (const point of points) {
    if (previous === undefined || point[0] - previous > step * 1.5) runs.push([]);
    runs.at(-1)!.push(point);
    previous = point[0];
  }
  return runs;
}

/** An SVG path through one segment: straight lines, or steps (`stepAfter`: the value holds until the next sample). */
function linePath(
  segment: readonly [number, number][],
  x: (t: number) => number,
  y: (v: number) => number,
  stepAfter: boolean,
): string {
  return segment
    .map(([t, v], i) => {
      const px = x(t).toFixed(1);
      const py = y(v).toFixed(1);
      if (i === 0) return `M${px},${py}`;
      return stepAfter ? `H${px}V${py}` : `L${px},${py}`;
    })
    .join('');
}

/** SVG of one timeseries panel's plot area: axes, grid, one path (or bars) per series; gaps where samples lack. */
export function timeseriesSvg(
  drawn: readonly Drawn[],
  options: { from: number; to: number; step: number; width: number; height: number; defaults: FieldDefaults },
): string {
  const { from, to, step, width, height, defaults } = options;
  const left = 64;
  const bottom = 20;
  const plotW = width - left - 8;
  const plotH = height - bottom - 6;
  const values = drawn.flatMap(({ series }) => finite(series).map(([, v]) => v));
  const axis = axisUnit(defaults.unit, Math.max(0, ...values.map(Math.abs)));
  // Ticks at round numbers of the axis' own unit (e.g. every 20 s, not every 25,000 ms).
  const ticks = niceTicks(Math.min(0, ...values) * axis.factor, Math.max(0, ...values) * axis.factor).map(
    (tick) => tick / axis.factor,
  );
  const low = ticks[0]!;
  const high = ticks.at(-1)!;
  const x = (t: number) => left + ((t - from) / Math.max(1, to - from)) * plotW;
  const y = (v: number) => 6 + plotH - ((v - low) / (high - low)) * plotH;
  const parts: string[] = [];
  const tickDecimals = decimalsOf((ticks[1]! - ticks[0]!) * axis.factor);
  for (const tick of ticks) {
    parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${y(tick)}" y2="${y(tick)}" class="grid"/>`);
    const label = axis.label(tick, defaults.decimals ?? tickDecimals);
    parts.push(`<text x="${left - 6}" y="${y(tick) + 4}" text-anchor="end">${escapeHtml(label)}</text>`);
  }
  const times = timeTicks(from, to);
  const withSeconds = times.some((t) => t % 60 !== 0);
  // A label at the very edge would run into the axis' labels or off the panel.
  for (const t of times.filter((t) => x(t) > left + 24 && x(t) < left + plotW - 24)) {
    parts.push(`<line x1="${x(t)}" x2="${x(t)}" y1="6" y2="${6 + plotH}" class="grid"/>`);
    parts.push(`<text x="${x(t)}" y="${height - 5}" text-anchor="middle">${clock(t, withSeconds)}</text>`);
  }
  const bars = defaults.custom?.drawStyle === 'bars';
  const stepAfter = defaults.custom?.lineInterpolation === 'stepAfter';
  for (const { color, series } of drawn) {
    const points = finite(series);
    if (bars) {
      const barW = Math.max(1, ((step / Math.max(1, to - from)) * plotW) / Math.max(1, drawn.length) - 1);
      const index = drawn.findIndex((d) => d.series === series);
      const opacity = (defaults.custom?.fillOpacity ?? 80) / 100;
      for (const [t, v] of points) {
        const top = Math.min(y(v), y(0));
        parts.push(
          `<rect x="${x(t) - (barW * drawn.length) / 2 + index * barW}" y="${top}" width="${barW}" height="${Math.abs(y(v) - y(0))}" fill="${color}" fill-opacity="${opacity}"/>`,
        );
      }
      continue;
    }
    const fill = (defaults.custom?.fillOpacity ?? 0) / 100;
    for (const segment of segments(points, step)) {
      const line = linePath(segment, x, y, stepAfter);
      // The area under the line down to zero, as the panel's fillOpacity draws it.
      if (fill > 0) {
        const [firstT] = segment[0]!;
        const [lastT] = segment.at(-1)!;
        const base = y(0).toFixed(1);
        const area = `M${x(firstT).toFixed(1)},${base}L${line.slice(1)}L${x(lastT).toFixed(1)},${base}Z`;
        parts.push(`<path d="${area}" fill="${color}" fill-opacity="${fill}" stroke="none"/>`);
      }
      // A lone sample would draw nothing: a dot.
      if (segment.length === 1)
        parts.push(`<circle cx="${x(segment[0]![0])}" cy="${y(segment[0]![1])}" r="2" fill="${color}"/>`);
      else parts.push(`<path d="${line}" stroke="${color}" fill="none" stroke-width="1.5"/>`);
    }
  }
  return `<svg width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg">${parts.join('')}</svg>`;
}

const LEGEND_ROW = 20;
const PANEL_HEADER = 30;
const PLOT_MIN = 150;

/** The pixels a timeseries panel needs beyond its header and plot: its legend table's rows. */
export function legendHeight(rows: number): number {
  return rows === 0 ? 0 : (rows + 1) * LEGEND_ROW + 8;
}

function legendTable(drawn: readonly Drawn[], calcs: readonly string[], defaults: FieldDefaults): string {
  if (drawn.length === 0) return '';
  const head = `<tr><th>Name</th>${calcs.map((c) => `<th>${escapeHtml(c[0]!.toUpperCase() + c.slice(1))}</th>`).join('')}</tr>`;
  const rows = drawn.map(({ name, color, series }) => {
    const cells = calcs.map((calc) => {
      // A series of NaN samples only (a quantile over no observations) has no value to reduce: NaN, as it came.
      const value = reduce(series, calc) ?? Number.NaN;
      return `<td>${escapeHtml(formatValue(value, defaults.unit, defaults.decimals))}</td>`;
    });
    return `<tr><td class="name"><span class="swatch" style="background:${color}"></span>${escapeHtml(name || ' ')}</td>${cells.join('')}</tr>`;
  });
  return `<table class="legend">${head}${rows.join('')}</table>`;
}

/** The colour of a value under the panel's absolute thresholds (the last step at or below it). */
export function thresholdColor(value: number, defaults: FieldDefaults): string {
  const steps = defaults.thresholds?.steps ?? [{ color: 'green', value: null }];
  let color = steps[0]!.color;
  for (const step of steps) if (step.value === null || value >= step.value) color = step.color;
  return NAMED_COLORS[color] ?? color;
}

/** A stat panel's sparkline: the series as a filled area over the panel's full width, no axes; gaps kept. */
export function sparkSvg(
  series: Series,
  range: { from: number; to: number; step: number },
  width: number,
  height: number,
): string {
  const points = finite(series);
  const high = Math.max(1e-9, ...points.map(([, v]) => v));
  const x = (t: number) => ((t - range.from) / Math.max(1, range.to - range.from)) * width;
  const y = (v: number) => height - 2 - (Math.max(0, v) / high) * (height - 4);
  const paths = segments(points, range.step).map((segment) => {
    const line = linePath(segment, x, y, false);
    const area = `M${x(segment[0]![0]).toFixed(1)},${height}L${line.slice(1)}L${x(segment.at(-1)![0]).toFixed(1)},${height}Z`;
    return `<path d="${area}" fill="rgba(255,255,255,0.25)" stroke="none"/><path d="${line}" stroke="rgba(255,255,255,0.8)" fill="none" stroke-width="1.5"/>`;
  });
  return `<svg width="${width}" height="${Math.round(height)}" xmlns="http://www.w3.org/2000/svg">${paths.join('')}</svg>`;
}

function statPanel(
  panel: RenderPanel,
  drawn: readonly Drawn[],
  box: Box,
  range: { from: number; to: number; step: number },
): string {
  const defaults = panel.fieldConfig?.defaults ?? {};
  const calc = panel.options?.reduceOptions?.calcs?.[0] ?? 'lastNotNull';
  const first = drawn[0];
  const value = first && reduce(first.series, calc);
  const bodyH = box.height - PANEL_HEADER;
  if (!first || value === undefined) {
    // Grafana shows the panel's noValue when the query returned no sample; said here in so many words.
    const shown = defaults.noValue ?? 'No data';
    const color = defaults.noValue !== undefined ? thresholdColor(Number(shown), defaults) : undefined;
    return `<div class="stat" style="height:${bodyH}px;${color ? `background:${color}` : ''}"><div class="big">${escapeHtml(shown)}</div><div class="note">no series over the run: the panel's noValue</div></div>`;
  }
  const color = thresholdColor(value, defaults);
  const last = finite(first.series).at(-1)![0];
  const spark = panel.options?.graphMode === 'area' ? sparkSvg(first.series, range, box.width - 2, bodyH * 0.35) : '';
  const note =
    calc === 'lastNotNull' && last < range.to - range.step * 1.5
      ? `<div class="note">${calc}: the last sample, at ${clock(last, true)} UTC; no series after it</div>`
      : `<div class="note">${escapeHtml(calc)}</div>`;
  return `<div class="stat" style="height:${bodyH}px;background:${panel.options?.colorMode === 'background' ? color : 'transparent'}"><div class="big">${escapeHtml(formatValue(value, defaults.unit, defaults.decimals))}</div>${note}<div class="spark">${spark}</div></div>`;
}

export interface DashboardPage {
  dashboard: RenderDashboard;
  /** Panel id → what Prometheus answered for each of its targets. */
  results: ReadonlyMap<number, readonly TargetResult[]>;
  /** The range drawn, unix seconds, and the query step in seconds. */
  from: number;
  to: number;
  step: number;
  /** Lines under the title saying what this is and where its data came from (`code` in backquotes). */
  caption: readonly string[];
  width?: number;
}

/** A caption line: escaped, its `backquoted` parts as code. */
export const captionHtml = (line: string): string =>
  escapeHtml(line).replace(/`([^`]+)`/g, (_, code: string) => `<code>${code}</code>`);

/** The whole page: title, caption, and every top-level panel in its grid box. */
export function renderDashboardHtml(page: DashboardPage): string {
  const width = page.width ?? 1400;
  const padding = 16;
  const panels = page.dashboard.panels;
  const drawnOf = new Map(panels.map((panel) => [panel.id, panelSeries(page.results.get(panel.id) ?? [])]));
  const boxes = layoutPanels(panels, width - 2 * padding, (i, box) => {
    const panel = panels[i]!;
    if (panel.type !== 'timeseries') return 0;
    const rows = drawnOf.get(panel.id)!.length;
    return PANEL_HEADER + PLOT_MIN + legendHeight(rows) - box.height;
  });
  const range = { from: page.from, to: page.to, step: page.step };
  const body = panels.map((panel, i) => {
    const box = boxes[i]!;
    const style = `left:${box.left}px;top:${box.top}px;width:${box.width}px;height:${box.height}px`;
    if (panel.type === 'row')
      return `<div class="row" style="${style}">${escapeHtml(panel.title)}${panel.collapsed ? ' (collapsed)' : ''}</div>`;
    const drawn = drawnOf.get(panel.id)!;
    const errors = (page.results.get(panel.id) ?? []).filter((r) => r.error);
    const defaults = panel.fieldConfig?.defaults ?? {};
    let inner: string;
    if (errors.length)
      inner = `<div class="error">${errors.map((r) => `${escapeHtml(r.refId)}: ${escapeHtml(r.error!)}`).join('<br>')}</div>`;
    else if (panel.type === 'stat') inner = statPanel(panel, drawn, box, range);
    else if (panel.type === 'timeseries') {
      const legend = legendHeight(drawn.length);
      const plotH = box.height - PANEL_HEADER - legend;
      inner =
        drawn.length === 0
          ? `<div class="nodata" style="height:${box.height - PANEL_HEADER}px">No data</div>`
          : timeseriesSvg(drawn, { ...range, width: box.width - 2, height: plotH, defaults }) +
            legendTable(drawn, panel.options?.legend?.calcs ?? [], defaults);
    } else inner = `<div class="nodata">panel type ${escapeHtml(panel.type)} is not drawn</div>`;
    return `<div class="panel" style="${style}"><div class="title">${escapeHtml(panel.title)}</div>${inner}</div>`;
  });
  const height = Math.max(...boxes.map((b) => b.top + b.height));
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${escapeHtml(page.dashboard.title)}</title><style>
body { margin: 0; background: #111217; color: #ccccdc; font: 12px 'Liberation Sans', 'DejaVu Sans', sans-serif; width: ${width}px; }
header { padding: 14px ${padding}px 10px; }
h1 { font-size: 20px; font-weight: 500; margin: 0 0 6px; color: #e6e6f0; }
.caption { color: #9fa0b0; line-height: 1.5; }
.caption code { color: #ccccdc; }
.grid-area { position: relative; margin: 0 ${padding}px ${padding}px; height: ${height}px; }
.panel { position: absolute; box-sizing: border-box; background: #181b1f; border: 1px solid #2a2d35; border-radius: 2px; overflow: hidden; }
.row { position: absolute; font-size: 15px; font-weight: 600; color: #e6e6f0; line-height: 30px; }
.title { height: ${PANEL_HEADER}px; line-height: ${PANEL_HEADER}px; padding: 0 8px; font-size: 13px; font-weight: 600; color: #e6e6f0; white-space: nowrap; overflow: hidden; }
svg { display: block; }
svg text { fill: #9fa0b0; font-size: 11px; }
svg .grid { stroke: #2c2f36; stroke-width: 1; }
.legend { border-collapse: collapse; margin: 2px 8px 6px; width: calc(100% - 16px); }
.legend th { text-align: right; font-weight: 500; color: #6e9fff; height: ${LEGEND_ROW}px; padding: 0 6px; }
.legend th:first-child { text-align: left; }
.legend td { text-align: right; height: ${LEGEND_ROW}px; padding: 0 6px; white-space: nowrap; border-top: 1px solid #22252b; }
.legend td.name { text-align: left; width: 99%; max-width: 0; overflow: hidden; text-overflow: ellipsis; }
.swatch { display: inline-block; width: 14px; height: 4px; border-radius: 2px; margin: 0 6px 2px 0; vertical-align: middle; }
.nodata { display: flex; align-items: center; justify-content: center; color: #9fa0b0; font-size: 14px; height: calc(100% - ${PANEL_HEADER}px); }
.error { color: #ff7383; padding: 8px; font-family: 'DejaVu Sans Mono', monospace; white-space: pre-wrap; }
.stat { position: relative; display: flex; flex-direction: column; align-items: center; justify-content: center; color: #fff; }
.stat .big { font-size: 56px; font-weight: 500; z-index: 1; }
.stat .note { font-size: 11px; z-index: 1; padding: 2px 6px 0; text-align: center; text-shadow: 0 0 3px rgba(0,0,0,0.6); }
.stat .spark { position: absolute; left: 0; bottom: 0; }
</style></head><body>
<header><h1>${escapeHtml(page.dashboard.title)}</h1><div class="caption">${page.caption.map((line) => `<div>${captionHtml(line)}</div>`).join('')}</div></header>
<div class="grid-area">
${body.join('\n')}
</div></body></html>`;
}

/** Photographs `html` in Chromium (CHROMIUM_PATH or /usr/bin/chromium), the full page, `width` CSS pixels wide. */
export async function screenshotHtml(html: string, pngPath: string, width = 1400): Promise<void> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  try {
    const page = await browser.newPage({ viewport: { width, height: 900 }, deviceScaleFactor: 1 });
    await page.setContent(html, { waitUntil: 'load' });
    await page.screenshot({ path: pngPath, fullPage: true });
  } finally {
    await browser.close();
  }
}

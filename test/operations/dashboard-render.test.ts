// The pure parts of the bench's dashboard picture (bench/dashboard-render.ts): Grafana's interval variables, legend
// names, units, the grid layout, and a page drawn from the shipped dashboard with made-up answers (no browser here).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  decimalsOf,
  formatValue,
  grafanaIntervals,
  layoutPanels,
  legendName,
  niceTicks,
  reduce,
  renderDashboardHtml,
  roundInterval,
  segments,
  substituteVariables,
  thresholdColor,
  type RenderDashboard,
  type TargetResult,
} from '../../bench/dashboard-render';
import { parseArgsToPlan } from '../../bench/plan';
import { DASHBOARD_PATH } from '../support/dashboard';

describe('dashboard picture: Grafana variables', () => {
  it('rounds intervals as Grafana does, never below the scrape interval', () => {
    assert.equal(roundInterval(900), 1_000);
    assert.equal(roundInterval(2_000), 2_000);
    assert.equal(roundInterval(13_000), 15_000);
    assert.equal(roundInterval(100_000), 120_000);
    // 400 s over 440 points: 0.9 s, rounded to 1 s, but the datasource scrapes every 2 s.
    assert.deepEqual(grafanaIntervals({ rangeMs: 400_000, maxDataPoints: 440, scrapeIntervalMs: 2_000 }), {
      intervalMs: 2_000,
      rateIntervalMs: 8_000,
    });
    // 6 h over 600 points: 36 s → 30 s; the rate interval is one scrape more.
    assert.deepEqual(grafanaIntervals({ rangeMs: 6 * 3_600_000, maxDataPoints: 600, scrapeIntervalMs: 15_000 }), {
      intervalMs: 30_000,
      rateIntervalMs: 60_000,
    });
  });

  it('fills in every form of the interval and range variables, and refuses any other', () => {
    const values = { intervalMs: 2_000, rateIntervalMs: 8_000, rangeMs: 300_500 };
    assert.equal(
      substituteVariables(
        'rate(a[$__rate_interval]) + rate(b[${__rate_interval}]) + c offset $__interval + d[$__range] + $__range_s + $__interval_ms',
        values,
      ),
      'rate(a[8s]) + rate(b[8s]) + c offset 2s + d[301s] + 301 + 2000',
    );
    assert.equal(substituteVariables('x[$__interval]', { ...values, intervalMs: 1_500 }), 'x[1500ms]');
    assert.throws(() => substituteVariables('x{project="$project"}', values), /no value for the variable \$project/);
  });

  it('evaluates every query of the shipped dashboard to plain PromQL', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as RenderDashboard;
    const exprs = dashboard.panels.flatMap((panel) => panel.targets ?? []).map((t) => t.expr);
    assert.ok(exprs.length >= 10);
    for (const expr of exprs)
      assert.doesNotMatch(substituteVariables(expr, { intervalMs: 2_000, rateIntervalMs: 8_000, rangeMs: 1 }), /\$/);
  });
});

describe('dashboard picture: legends and values', () => {
  it('names series by legendFormat, or by their labels without one', () => {
    assert.equal(
      legendName('{{type}} {{outcome}}', { type: 'FALL_DETECTION', outcome: 'delivered' }),
      'FALL_DETECTION delivered',
    );
    assert.equal(legendName('{{ type }} p99', { type: 'VITAL_THRESHOLD' }), 'VITAL_THRESHOLD p99');
    assert.equal(legendName('workflow tasks {{task_queue}}', {}), 'workflow tasks');
    assert.equal(legendName(undefined, { __name__: 'up', job: 'api' }), 'up{job="api"}');
    assert.equal(legendName('__auto', { type: 'X' }), '{type="X"}');
    assert.equal(legendName('', {}, 'count(x)'), 'count(x)');
  });

  it('shows values in the panel units this dashboard uses', () => {
    assert.equal(formatValue(12.345, 'ops'), '12.3 ops/s');
    assert.equal(formatValue(2_500, 'ops'), '2.5 K ops/s');
    assert.equal(formatValue(0.0542, 's'), '54.2 ms');
    assert.equal(formatValue(3.75, 's'), '3.75 s');
    assert.equal(formatValue(95, 'ms'), '95 ms');
    assert.equal(formatValue(2_500, 'ms'), '2.5 s');
    assert.equal(formatValue(1, 'none', 2), '1.00');
    assert.equal(formatValue(12_990, 'short'), '13 K');
    assert.equal(formatValue(0, 'none'), '0');
    assert.equal(formatValue(Number.NaN, 's'), 'NaN');
  });

  it('reduces a series as the legend calcs and the stat do, skipping NaN', () => {
    const series = {
      labels: {},
      points: [
        [10, 1],
        [12, Number.NaN],
        [14, 3],
      ] as [number, number][],
    };
    assert.equal(reduce(series, 'mean'), 2);
    assert.equal(reduce(series, 'max'), 3);
    assert.equal(reduce(series, 'lastNotNull'), 3);
    assert.equal(reduce({ labels: {}, points: [] }, 'mean'), undefined);
    assert.throws(() => reduce(series, 'p42'), /not drawn/);
  });

  it('breaks a line where a sample is missing at a step, and picks threshold colours', () => {
    const points: [number, number][] = [
      [0, 1],
      [2, 1],
      [4, 1],
      [10, 2],
      [12, 2],
    ];
    assert.deepEqual(
      segments(points, 2).map((run) => run.map(([t]) => t)),
      [
        [0, 2, 4],
        [10, 12],
      ],
    );
    const defaults = {
      thresholds: {
        steps: [
          { color: 'green', value: null },
          { color: 'red', value: 1 },
        ],
      },
    };
    assert.equal(thresholdColor(0, defaults), '#73BF69');
    assert.equal(thresholdColor(3, defaults), '#F2495C');
    assert.deepEqual(niceTicks(0, 9.2), [0, 2.5, 5, 7.5, 10]);
    assert.deepEqual(niceTicks(0, 0), [0, 0.25, 0.5, 0.75, 1]);
    assert.equal(decimalsOf(0.25), 2);
    assert.equal(decimalsOf(50), 0);
  });
});

describe('dashboard picture: layout and page', () => {
  it("places panels on Grafana's 24-column grid, growing a band for a long legend", () => {
    // 24 columns of 50 px with 8 px between: 24 × 50 + 23 × 8 = 1384.
    const panels = [
      { gridPos: { x: 0, y: 0, w: 24, h: 1 } },
      { gridPos: { x: 0, y: 1, w: 12, h: 8 } },
      { gridPos: { x: 12, y: 1, w: 12, h: 8 } },
      { gridPos: { x: 0, y: 9, w: 8, h: 8 } },
    ];
    const plain = layoutPanels(panels, 1384);
    assert.deepEqual(plain[0], { left: 0, top: 0, width: 1384, height: 30 });
    assert.deepEqual(plain[1], { left: 0, top: 38, width: 688, height: 296 });
    assert.deepEqual(plain[2], { left: 696, top: 38, width: 688, height: 296 });
    assert.deepEqual(plain[3], { left: 0, top: 342, width: 456, height: 296 });
    // The right panel needs 40 px more: its neighbour grows with it, the panel below moves down by 40.
    const grown = layoutPanels(panels, 1384, (i) => (i === 2 ? 40 : -10));
    assert.equal(grown[1]!.height, 336);
    assert.equal(grown[2]!.height, 336);
    assert.equal(grown[3]!.top, 382);
    assert.equal(grown[0]!.height, 30);
  });

  it('draws every panel of the shipped dashboard, "No data" where Prometheus returned nothing', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as RenderDashboard;
    const byTitle = (title: string) => dashboard.panels.find((p) => p.title === title)!.id;
    const results = new Map<number, TargetResult[]>([
      [
        byTitle('Deliveries per second by type and outcome'),
        [
          {
            refId: 'A',
            expr: 'sum by (type, outcome) (rate(webhook_deliveries[8s]))',
            legendFormat: '{{type}} {{outcome}}',
            series: [
              {
                labels: { type: 'FALL_DETECTION', outcome: 'delivered' },
                points: [
                  [1000, 20],
                  [1002, 22],
                ],
              },
            ],
          },
        ],
      ],
      [byTitle('Circuit breakers open'), [{ refId: 'A', expr: 'count(x)', series: [] }]],
      [
        byTitle('Schedule-to-start (p95)'),
        [
          {
            refId: 'B',
            expr: 'histogram_quantile(0.95, z)',
            legendFormat: 'activity tasks {{task_queue}}',
            series: [{ labels: { task_queue: 'q' }, points: [[1000, Number.NaN]] }],
          },
        ],
      ],
      [
        byTitle('Used task slots by kind'),
        [{ refId: 'A', expr: 'sum(y)', series: [], error: 'parse error: <bad> & "quoted"' }],
      ],
    ]);
    const html = renderDashboardHtml({
      dashboard,
      results,
      from: 1000,
      to: 1010,
      step: 2,
      caption: ['Made up for a test: `not a run`.'],
    });
    for (const panel of dashboard.panels) assert.ok(html.includes(`>${panel.title}<`), panel.title);
    assert.match(html, /FALL_DETECTION delivered<\/td><td>21 ops\/s<\/td><td>22 ops\/s<\/td>/);
    assert.match(html, /<path d="M[^"]+L[^"]+" stroke="#73BF69"/);
    // Every timeseries without an answer says so; the stat shows its noValue and says that is what it is.
    const timeseries = dashboard.panels.filter((p) => p.type === 'timeseries').length;
    assert.equal(html.match(/>No data</g)?.length, timeseries - 3);
    // A quantile over no observations: Prometheus' NaN, drawn as nothing and reduced to NaN.
    assert.match(html, /activity tasks q<\/td><td>NaN<\/td><td>NaN<\/td>/);
    assert.match(html, /<div class="big">0<\/div><div class="note">no series over the run: the panel's noValue/);
    assert.match(html, /parse error: &lt;bad&gt; &amp; &quot;quoted&quot;/);
    assert.match(html, /Made up for a test: <code>not a run<\/code>\./);
  });
});

describe('bench --dashboard', () => {
  it('takes a PNG path, and needs a stage that runs the delivery worker', () => {
    const { dashboard } = parseArgsToPlan(['--stages', 'steady', '--dashboard', 'docs/x.png']);
    assert.ok(dashboard?.endsWith('/docs/x.png'));
    assert.equal(parseArgsToPlan([]).dashboard, undefined);
    assert.throws(() => parseArgsToPlan(['--stages', 'api', '--dashboard', 'x.png']), /needs a stage that runs/);
    assert.throws(() => parseArgsToPlan(['--dashboard', 'x.svg']), /names the PNG/);
    assert.equal(parseArgsToPlan(['--neighbour-seconds', '30']).plan.neighbourSeconds, 30);
  });
});

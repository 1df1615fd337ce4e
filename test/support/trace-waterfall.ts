// A trace as Jaeger's query API returned it, drawn as a waterfall (one row per span, indented under its parent, a bar
// on the trace's time axis, its key attributes and events) for the screenshot in docs/operators.md. The Jaeger
// binary built from the Go module carries no UI assets (they are built from the jaeger-ui repository with npm).
import type { JaegerSpan, JaegerTrace } from './jaeger';

const SHOWN = [
  'webhook.event_type',
  'webhook.attempt',
  'webhook.outcome',
  'webhook.breaker.state',
  'webhook.wait.reason',
  'http.response.status_code',
  'server.address',
  'server.port',
];

const escape = (text: string) =>
  text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] ?? c);

export function renderTraceWaterfall(trace: JaegerTrace): string {
  const parent = (span: JaegerSpan) => span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;
  const ids = new Set(trace.spans.map((span) => span.spanID));
  const children = (id: string | undefined) =>
    trace.spans
      .filter((span) => (id === undefined ? !ids.has(parent(span) ?? '') : parent(span) === id))
      .sort((a, b) => a.startTime - b.startTime);
  const rows: { span: JaegerSpan; depth: number }[] = [];
  const walk = (id: string | undefined, depth: number) => {
    for (const span of children(id)) {
      rows.push({ span, depth });
      walk(span.spanID, depth + 1);
    }
  };
  walk(undefined, 0);
  const begin = Math.min(...trace.spans.map((s) => s.startTime));
  const end = Math.max(...trace.spans.map((s) => s.startTime + s.duration));
  const total = Math.max(1, end - begin);
  const ms = (us: number) => `${(us / 1000).toFixed(us < 10_000 ? 1 : 0)} ms`;
  const body = rows
    .map(({ span, depth }) => {
      const service = trace.processes[span.processID]?.serviceName ?? '';
      const left = ((span.startTime - begin) / total) * 100;
      const width = Math.max(0.3, (span.duration / total) * 100);
      const tags = span.tags
        .filter((t) => SHOWN.includes(t.key))
        .map((t) => `${t.key.replace(/^webhook\./, '')}=${String(t.value)}`)
        .join(' ');
      const events = span.logs
        .map((log) => log.fields.find((f) => f.key === 'event')?.value)
        .filter(Boolean)
        .join(', ');
      const error = span.tags.some((t) => t.key === 'error' && t.value === true);
      return `<tr><td class="name" style="padding-left:${8 + depth * 16}px"><span class="svc">${escape(service)}</span>
        ${escape(span.operationName)}<div class="tags">${escape(tags)}${events ? `<br>events: ${escape(events)}` : ''}</div></td>
        <td class="bar"><div class="b${error ? ' err' : ''}" style="left:${left}%;width:${width}%"></div>
        <span class="d" style="left:${Math.min(left + width, 88)}%">${ms(span.duration)}</span></td></tr>`;
    })
    .join('\n');
  return `<!doctype html><meta charset="utf-8"><title>Trace ${trace.traceID}</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:16px;margin:0 0 4px} p{margin:0 0 12px;color:#555}
table{border-collapse:collapse;width:100%} td{border-bottom:1px solid #eee;vertical-align:top;padding:4px}
td.name{width:46%} .svc{display:inline-block;min-width:104px;color:#fff;background:#3b6ea5;border-radius:3px;padding:0 4px;margin-right:6px;font-size:11px}
.tags{color:#666;font-size:11px;margin-top:2px} td.bar{position:relative}
.b{position:absolute;top:8px;height:12px;background:#5aa05a;border-radius:2px} .b.err{background:#c0504d}
.d{position:absolute;top:24px;font-size:11px;color:#555;white-space:nowrap}
</style>
<h1>FALL_DETECTION delivery, first attempt refused (HTTP 500), retried and delivered</h1>
<p>Trace ${trace.traceID}: ${trace.spans.length} spans over ${ms(total)}, as Jaeger's query API returned it</p>
<table>${body}</table>`;
}

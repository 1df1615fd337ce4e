// The delivery log's write path against the number of partitions it holds: each delivery's writes find its row by id
// across every day's partition (db/deliveries.ts), so their cost grows with the days kept. No Temporal, no worker:
// upsertDelivery (planned), recordDeliveryAttempt (delivered) for `--n` deliveries, one after another on one
// connection, first with the partitions a fresh migration makes (today and the days ahead), then with `--days` past
// days added (DELIVERY_LOG_RETENTION_DAYS' worth), each holding rows. Prints each write's latency and PostgreSQL's CPU.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDb, createScratchDatabase, migrateToLatest, recordDeliveryAttempt, upsertDelivery } from '../db';
import { startEmbeddedPostgres, type RunningPostgres } from '../dev/postgres';
import { freePort } from '../dev/ports';
import { positiveIntOption } from './script-args';
import { summarize } from './stats';

const N = positiveIntOption('n', 2000);
const DAYS = positiveIntOption('days', 30);

async function round(db: ReturnType<typeof createDb>, label: string, partitions: number): Promise<void> {
  const planned: number[] = [];
  const delivered: number[] = [];
  const cpuBefore = await backendCpu(db);
  for (let i = 0; i < N; i++) {
    const key = { id: `${label}-${i}`, projectId: 'p-bench', type: 'FALL_DETECTED', workflowId: `${label}-${i}` };
    let t = performance.now();
    await upsertDelivery(db, key, 'pending');
    planned.push(performance.now() - t);
    t = performance.now();
    await recordDeliveryAttempt(db, key, { runAttempt: 1, statusCode: 200, durationMs: 5, delivered: true });
    delivered.push(performance.now() - t);
  }
  const cpu = (await backendCpu(db)) - cpuBefore;
  const p = summarize(planned);
  const d = summarize(delivered);
  console.log(
    `| ${partitions} | ${p.p50.toFixed(2)} / ${p.p99.toFixed(2)} | ${d.p50.toFixed(2)} / ${d.p99.toFixed(2)} | ${((cpu * 1000) / N).toFixed(2)} |`,
  );
}

/** The CPU-seconds the server's processes have used (user + system), from /proc: it runs on this machine. */
async function backendCpu(db: ReturnType<typeof createDb>): Promise<number> {
  const { rows } = await db.raw<{ rows: { pid: number }[] }>('SELECT pid FROM pg_stat_activity');
  const { readFileSync } = await import('node:fs');
  let ticks = 0;
  for (const { pid } of rows) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // a backend that ended meanwhile
    }
  }
  return ticks / 100;
}

async function main(): Promise<void> {
  let embedded: RunningPostgres | undefined;
  let dataDir: string | undefined;
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-bench-log-writes-'));
    embedded = await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
    serverUrl = embedded.url;
  }
  const scratch = await createScratchDatabase(serverUrl, 'webhooks_bench_log_writes');
  const db = createDb(scratch.url, { max: 1 });
  try {
    await migrateToLatest(db);
    const count = async () =>
      Number(
        (
          await db.raw<{ rows: { n: string }[] }>(
            "SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'deliveries'::regclass",
          )
        ).rows[0]!.n,
      );
    console.log(
      '| partitions of deliveries | planned p50 / p99 ms | delivered p50 / p99 ms | PostgreSQL CPU ms per delivery |',
    );
    console.log('| --- | --- | --- | --- |');
    await round(db, 'fresh', await count());
    for (let d = 1; d <= DAYS; d++) {
      await db.raw(`SELECT delivery_log_add_day((now() AT TIME ZONE 'UTC')::date - CAST(? AS integer))`, [d]);
      await db.raw(
        `INSERT INTO deliveries (id, project_id, type, status, workflow_id, created_at)
         SELECT 'past-' || ? || '-' || g, 'p-other', 'VITALS', 'delivered', 'w', now() - make_interval(days => ?)
           FROM generate_series(1, 1000) AS g`,
        [d, d],
      );
    }
    await db.raw('ANALYZE deliveries');
    await db.raw('ANALYZE delivery_attempts');
    await round(db, 'aged', await count());
  } finally {
    await db.destroy();
    await scratch.drop();
    await embedded?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

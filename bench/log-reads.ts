// `npm run bench:log [-- --rows 2000000] [-- --seconds 15] [-- --concurrency 50]`: a project with millions of
// delivery-log rows read by a read-only portal link, `concurrency` filtered list calls in flight at once, while
// another project's member reads its own log; once without the log's indexes (migration 010), then with them and no
// read rate, then with them and the default READ_CALLS_PER_SECOND. Real PostgreSQL (embedded, or DATABASE_URL) and
// the real API (createApp) over HTTP, with the production pool: 10 connections, 5 s to get one, 10 s a statement.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jwt from 'jsonwebtoken';
import type { Knex } from 'knex';
import pino from 'pino';
import { createApp } from '../api/app';
import { createPortalTokens } from '../api/auth/portal-tokens';
import { DEFAULT_READ_LIMITS, type ReadLimits } from '../api/http/read-limits';
import { createSecretBox } from '../common/crypto/secrets';
import { addMember, addProject, createDb, createScratchDatabase, migrateToLatest } from '../db';
import * as deliveryLogIndexes from '../db/migrations/010_delivery_log_indexes';
import { startEmbeddedPostgres, type RunningPostgres } from '../dev/postgres';
import { freePort } from '../dev/ports';
import { positiveIntOption, progressLog } from './script-args';
import { summarize, type LatencySummary } from './stats';

const log = progressLog('bench:log');
const option = positiveIntOption;

const ROWS = option('rows', 2_000_000);
const SECONDS = option('seconds', 15);
const CONCURRENCY = option('concurrency', 50);
const JWT_SECRET = randomBytes(32).toString('hex');
const BIG = 'bench-log-big';
const NEIGHBOUR = 'bench-log-neighbour';
const NEIGHBOUR_ROWS = 1_000;
/** The big project's skipped deliveries: its oldest, so a scan without the status index reads the whole project. */
const SKIPPED = 100;
const MEMBER = 'bench-member';

/** Fills the log in batches in one statement each: the big project's rows, one a second, and the neighbour's. */
async function fillLog(db: Knex): Promise<void> {
  for (const id of [BIG, NEIGHBOUR]) {
    await addProject(db, id, id);
    await addMember(db, id, MEMBER);
  }
  const batch = 250_000;
  for (let from = 1; from <= ROWS; from += batch) {
    await db.raw(
      `INSERT INTO deliveries (id, project_id, type, status, attempts, last_status_code, workflow_id, created_at, updated_at)
       SELECT 'big-' || i, ?, CASE WHEN i % 7 = 0 THEN 'FALL_DETECTION' ELSE 'VITAL_THRESHOLD' END,
              CASE WHEN i <= ? THEN 'skipped' WHEN i % 50 = 0 THEN 'failed' ELSE 'delivered' END,
              1, 200, 'big-' || i, t, t
         FROM generate_series(?::int, ?::int) AS i,
              LATERAL (SELECT timestamptz '2026-01-01T00:00:00Z' + i * interval '1 second' AS t) AS at`,
      [BIG, SKIPPED, from, Math.min(ROWS, from + batch - 1)],
    );
    log(`  ${Math.min(ROWS, from + batch - 1).toLocaleString('en')} rows`);
  }
  await db.raw(
    `INSERT INTO deliveries (id, project_id, type, status, attempts, last_status_code, workflow_id, created_at)
     SELECT 'neighbour-' || i, ?, 'FALL_DETECTION', CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'delivered' END, 1, 200,
            'neighbour-' || i, timestamptz '2026-01-01T00:00:00Z' + i * interval '1 minute'
       FROM generate_series(1, ?) AS i`,
    [NEIGHBOUR, NEIGHBOUR_ROWS],
  );
  await db.raw(
    `INSERT INTO delivery_attempts (delivery_id, delivery_created_at, workflow_id, run_attempt, status_code, duration_ms)
     SELECT d.id, d.created_at, d.id, 1, 200, 12 FROM generate_series(1, ?) AS i JOIN deliveries d ON d.id = 'neighbour-' || i`,
    [NEIGHBOUR_ROWS],
  );
  await db.raw('ANALYZE deliveries');
  await db.raw('ANALYZE delivery_attempts');
}

interface Tally {
  latencies: number[];
  statuses: Record<string, number>;
}

async function timedGet(url: string, token: string, tally: Tally): Promise<void> {
  const started = performance.now();
  let status: string;
  try {
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    await response.arrayBuffer();
    status = String(response.status);
  } catch {
    status = 'error';
  }
  tally.latencies.push(performance.now() - started);
  tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
}

interface ScenarioFigures {
  scenario: string;
  neighbour: LatencySummary & { statuses: Record<string, number> };
  flood?: { p50: number; max: number; perSecond: number; statuses: Record<string, number> };
}

/** One API on its own pool; the neighbour's member reads in a loop while `flood` link calls stay in flight. */
async function scenario(
  name: string,
  databaseUrl: string,
  readLimits: ReadLimits,
  flood: number,
  link: (base: string) => Promise<string>,
): Promise<ScenarioFigures> {
  const db = createDb(databaseUrl);
  const app = createApp({
    db,
    secretBox: createSecretBox(randomBytes(32)),
    logger: pino({ level: 'silent' }),
    auth: { mode: 'secret', secret: JWT_SECRET },
    sendTestEvent: () => Promise.reject(new Error('not used')),
    portal: { tokens: createPortalTokens([{ id: 'bench', key: randomBytes(32) }]) },
    readLimits,
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const member = jwt.sign({ sub: MEMBER }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 3600 });
    const readLink = await link(base);
    const neighbourPaths = [
      `/webhooks/project/${NEIGHBOUR}/deliveries?limit=20`,
      `/webhooks/project/${NEIGHBOUR}/deliveries/neighbour-500`,
      `/webhooks/project/${NEIGHBOUR}/health`,
      `/webhooks/project/${NEIGHBOUR}/deliveries?status=failed&limit=20`,
    ];
    const neighbour: Tally = { latencies: [], statuses: {} };
    const flooding: Tally = { latencies: [], statuses: {} };
    const until = performance.now() + SECONDS * 1000;
    const loops: Promise<void>[] = [];
    // The neighbour: one member, one call at a time, five calls a second (a page refreshing, a person clicking).
    loops.push(
      (async () => {
        for (let i = 0; performance.now() < until; i += 1) {
          const started = performance.now();
          await timedGet(base + neighbourPaths[i % neighbourPaths.length]!, member, neighbour);
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, 200 - (performance.now() - started))));
        }
      })(),
    );
    for (let c = 0; c < flood; c += 1)
      loops.push(
        (async () => {
          while (performance.now() < until)
            await timedGet(`${base}/webhooks/project/${BIG}/deliveries?status=skipped`, readLink, flooding);
        })(),
      );
    const started = performance.now();
    await Promise.all(loops);
    const spanMs = performance.now() - started;
    const floodSummary = summarize(flooding.latencies);
    return {
      scenario: name,
      neighbour: { ...summarize(neighbour.latencies), statuses: neighbour.statuses },
      ...(flood > 0 && {
        flood: {
          p50: floodSummary.p50,
          max: floodSummary.max,
          perSecond: Math.round((flooding.latencies.length * 1000) / spanMs),
          statuses: flooding.statuses,
        },
      }),
    };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await db.destroy();
  }
}

/** A read-only portal link of the big project, made by its member through the API. */
async function readLinkOf(base: string): Promise<string> {
  const member = jwt.sign({ sub: MEMBER }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 3600 });
  const response = await fetch(`${base}/webhooks/project/${BIG}/portal-sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${member}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capabilities: ['read'] }),
  });
  if (response.status !== 201) throw new Error(`portal link: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { token: string }).token;
}

const statusText = (statuses: Record<string, number>) =>
  Object.entries(statuses)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, count]) => `${status}: ${count.toLocaleString('en')}`)
    .join(', ');

function formatFigures(rows: ScenarioFigures[], setup: { fillS: number; indexS: number }): string {
  const lines = [
    `Delivery log reads: ${ROWS.toLocaleString('en')} rows in one project (${SKIPPED} skipped, its oldest), ` +
      `${NEIGHBOUR_ROWS.toLocaleString('en')} in another; ${CONCURRENCY} concurrent GET …/deliveries?status=skipped ` +
      `through a read-only portal link for ${SECONDS} s per scenario`,
    `fill ${setup.fillS} s; migration 010's indexes built in ${setup.indexS} s`,
    '',
    '| scenario | neighbour calls | neighbour p50 ms | p95 ms | p99 ms | max ms | neighbour statuses | flood calls/s | flood p50 ms | flood statuses |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const row of rows)
    lines.push(
      `| ${row.scenario} | ${row.neighbour.count} | ${row.neighbour.p50} | ${row.neighbour.p95} | ${row.neighbour.p99} | ` +
        `${row.neighbour.max} | ${statusText(row.neighbour.statuses)} | ${row.flood?.perSecond ?? '—'} | ` +
        `${row.flood?.p50 ?? '—'} | ${row.flood ? statusText(row.flood.statuses) : '—'} |`,
    );
  return lines.join('\n');
}

async function main(): Promise<void> {
  let embedded: RunningPostgres | undefined;
  let dataDir: string | undefined;
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-bench-log-'));
    log(`starting PostgreSQL in ${dataDir}`);
    embedded = await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
    serverUrl = embedded.url;
  }
  const scratch = await createScratchDatabase(serverUrl, 'webhooks_bench_log');
  const admin = createDb(scratch.url, { max: 1, statementTimeoutMs: 3_600_000 });
  try {
    await migrateToLatest(admin);
    log(`filling the log: ${ROWS.toLocaleString('en')} rows`);
    let started = performance.now();
    await fillLog(admin);
    const fillS = Math.round((performance.now() - started) / 100) / 10;
    const unlimited: ReadLimits = { perSecond: 1_000_000 };
    const rows: ScenarioFigures[] = [];

    log('without migration 010’s indexes');
    await deliveryLogIndexes.down(admin);
    await admin.raw('ANALYZE deliveries');
    rows.push(await scenario('neighbour alone', scratch.url, unlimited, 0, readLinkOf));
    rows.push(
      await scenario(
        `no indexes, no read rate: ${CONCURRENCY} in flight`,
        scratch.url,
        unlimited,
        CONCURRENCY,
        readLinkOf,
      ),
    );

    log('building migration 010’s indexes');
    started = performance.now();
    await deliveryLogIndexes.up(admin);
    const indexS = Math.round((performance.now() - started) / 100) / 10;
    await admin.raw('ANALYZE deliveries');
    rows.push(
      await scenario(
        `indexes, no read rate: ${CONCURRENCY} in flight`,
        scratch.url,
        unlimited,
        CONCURRENCY,
        readLinkOf,
      ),
    );
    rows.push(
      await scenario(
        `indexes, READ_CALLS_PER_SECOND=${DEFAULT_READ_LIMITS.perSecond} (default): ${CONCURRENCY} in flight`,
        scratch.url,
        DEFAULT_READ_LIMITS,
        CONCURRENCY,
        readLinkOf,
      ),
    );
    process.stdout.write(`${formatFigures(rows, { fillS, indexS })}\n`);
  } finally {
    await admin.destroy();
    await scratch.drop();
    await embedded?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});

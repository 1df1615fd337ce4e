// Reads of a large delivery log: every filter of the list reads through an index in the list's order,
// so a page costs its rows whatever the project holds; a delivery's attempts come a page at a time; and reads through
// a member's token or a portal link have a per-project rate (429 with Retry-After), another project unaffected.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import pino from 'pino';
import type { Knex } from 'knex';
import { createApp, type AppDeps } from '../../api';
import { createPortalTokens, portalSigningKeys } from '../../api/auth/portal-tokens';
import { startApi, type RunningApi } from '../../api/server';
import { loadConfig } from '../../common/config';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { listenLocal, type LocalServer } from '../support/jwks-server';
import { newProjectId } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET, bearer, hsToken } from '../support/tokens';

interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

async function call(base: string, path: string, token?: string): Promise<Reply> {
  const response = await fetch(base + path, { headers: { ...(token && bearer(token)) } });
  const text = await response.text();
  return {
    status: response.status,
    body: (text && /json/.test(response.headers.get('content-type') ?? '') ? JSON.parse(text) : {}) as Reply['body'],
    headers: response.headers,
  };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

/** The rows a scan read from its table: those it returned and those it threw away, in every loop. */
const rowsRead = (node: PlanNode) =>
  ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) *
  (node['Actual Loops'] ?? 1);

/** The SQL statements `run` sends, as PostgreSQL receives them ($n placeholders and their values). */
async function statementsOf(db: Knex, run: () => Promise<unknown>): Promise<{ sql: string; bindings: unknown[] }[]> {
  const seen: { sql: string; bindings: unknown[] }[] = [];
  const listener = (query: { sql: string; bindings?: unknown[] }) =>
    seen.push({ sql: query.sql, bindings: query.bindings ?? [] });
  db.on('query', listener);
  try {
    await run();
  } finally {
    db.removeListener('query', listener);
  }
  return seen;
}

describe('delivery log reads at scale: indexed filters, paged attempts, a per-project read rate', () => {
  let t: TestDatabase;

  before(async () => {
    t = await createTestDatabase();
  });
  after(async () => {
    await t?.destroy();
  });

  describe('every filter of the list reads a page of rows, not the project', function () {
    // 60,000 rows of one project, one a second, newest first: delivered VITAL_THRESHOLD events but for the oldest
    // 30, which are skipped, failed, TEST or FALL_DETECTION. A filter on those without its index reads (and
    // filters out) the whole project to find them.
    const ROWS = 60_000;
    const p = newProjectId();
    const other = newProjectId();
    let client: pg.Client;

    before(async () => {
      await t.db.raw(
        `INSERT INTO deliveries (id, project_id, type, status, workflow_id, created_at)
         SELECT 'evt-' || i, ?, CASE WHEN i <= 10 THEN 'TEST' WHEN i <= 20 THEN 'FALL_DETECTION' ELSE 'VITAL_THRESHOLD' END,
                CASE WHEN i % 3 = 0 AND i <= 30 THEN 'skipped' WHEN i % 3 = 1 AND i <= 30 THEN 'failed' ELSE 'delivered' END,
                'evt-' || i, timestamptz '2026-01-01T00:00:00Z' + i * interval '1 second'
           FROM generate_series(1, ?) AS i`,
        [p, ROWS],
      );
      // Another project's rows of every kind, interleaved in time.
      await t.db.raw(
        `INSERT INTO deliveries (id, project_id, type, status, workflow_id, created_at)
         SELECT 'other-' || i, ?, 'FALL_DETECTION', 'skipped', 'other-' || i,
                timestamptz '2026-01-01T00:00:00Z' + i * interval '1 second'
           FROM generate_series(1, ?) AS i`,
        [other, ROWS / 4],
      );
      await t.db.raw('ANALYZE deliveries');
      client = new pg.Client({ connectionString: t.url });
      await client.connect();
    });
    after(async () => {
      await client?.end();
    });

    /** Runs the list's own statement under EXPLAIN ANALYZE: the rows it read from deliveries, and the plan. */
    async function explainList(filter: store.DeliveryFilter): Promise<{ read: number; plan: string; items: number }> {
      let items = 0;
      const statements = await statementsOf(t.db, async () => {
        items = (await store.listDeliveries(t.db, p, filter)).length;
      });
      assert.equal(statements.length, 1);
      const [{ sql, bindings }] = statements as [{ sql: string; bindings: unknown[] }];
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
        bindings,
      );
      const all = nodesOf(rows[0]!['QUERY PLAN'][0].Plan);
      // The rows sit in partitions of deliveries (DEFAULT's, for these days long past): each read is indexed within
      // one. The days ahead are empty partitions, which the planner scans as such (reading nothing).
      const nodes = all.filter(
        (node) =>
          node['Relation Name']?.startsWith('deliveries') &&
          !(node['Node Type'] === 'Seq Scan' && rowsRead(node) === 0),
      );
      const read = nodes.reduce((sum, node) => sum + rowsRead(node), 0);
      const plan = all
        .filter((node) => nodes.includes(node) || node['Index Name'])
        .map((node) => `${node['Node Type']} ${node['Index Name'] ?? ''}`)
        .join(', ');
      return { read, plan, items };
    }

    const cases: [string, store.DeliveryFilter, number][] = [
      ['status=skipped', { status: 'skipped', limit: 20 }, 10],
      ['status=failed', { status: 'failed', limit: 5 }, 6],
      ['type=TEST', { type: 'TEST', limit: 20 }, 10],
      ['type=FALL_DETECTION', { type: 'FALL_DETECTION', limit: 3 }, 4],
      ['status=skipped&type=FALL_DETECTION', { status: 'skipped', type: 'FALL_DETECTION', limit: 20 }, 3],
      ['status=failed&type=TEST', { status: 'failed', type: 'TEST', limit: 2 }, 3],
      // Failed ones in a window of 36,000 rows: 7, 10, …, 28.
      [
        'status=failed&since&until',
        {
          status: 'failed',
          since: new Date('2026-01-01T00:00:05Z'),
          until: new Date('2026-01-01T10:00:00Z'),
          limit: 20,
        },
        8,
      ],
      ['type=TEST&since', { type: 'TEST', since: new Date('2026-01-01T00:00:03Z'), limit: 20 }, 8],
      [
        'status=skipped&cursor',
        { status: 'skipped', limit: 2, after: { createdAt: '2026-01-01T00:00:21.000000Z', id: 'evt-21' } },
        3,
      ],
      // Delivered TEST events are 2, 5 and 8, among 60,000 delivered ones and 10 TEST ones.
      ['status=delivered&type=TEST', { status: 'delivered', type: 'TEST', limit: 2 }, 3],
      [
        'status=delivered&type=TEST&cursor',
        {
          status: 'delivered',
          type: 'TEST',
          limit: 1,
          after: { createdAt: '2026-01-01T00:00:08.000000Z', id: 'evt-8' },
        },
        2,
      ],
    ];

    for (const [name, filter, expected] of cases)
      it(`${name}: ${expected} rows found by reading a page of them (or only the matching rows), never the project`, async () => {
        const { read, plan, items } = await explainList(filter);
        assert.equal(items, expected, plan);
        // The page and the one more that tells whether another page exists; a bitmap scan (the planner's choice when
        // few rows match) may read every matching row instead, still never the project's 60,000.
        const matching = (await explainList({ ...filter, limit: 1_000 })).items;
        assert.ok(read <= Math.max(filter.limit + 1, matching), `${name} read ${read} rows of deliveries: ${plan}`);
        assert.match(plan, /^(Index (Only )?Scan|Bitmap Heap Scan)/, plan);
      });

    it('the last-attempt time of each listed row is read from the row, not from the delivery’s every attempt', async () => {
      const key = { id: 'evt-60000', projectId: p, type: 'VITAL_THRESHOLD', workflowId: 'evt-60000' };
      // One attempt for every delivery, and 5,000 for the newest (a receiver failing for days, redelivered).
      await t.db.raw(
        `INSERT INTO delivery_attempts (delivery_id, delivery_created_at, workflow_id, run_attempt, duration_ms)
         SELECT d.id, d.created_at, d.id, 1, 5 FROM generate_series(1, ?) AS i JOIN deliveries d ON d.id = 'evt-' || i`,
        [ROWS],
      );
      await t.db.raw(
        `INSERT INTO delivery_attempts (delivery_id, delivery_created_at, workflow_id, run_attempt, duration_ms)
         SELECT d.id, d.created_at, ?, i, 5 FROM generate_series(2, 5000) AS i JOIN deliveries d ON d.id = ?`,
        [key.workflowId, key.id],
      );
      await t.db.raw('ANALYZE delivery_attempts');
      const statements = await statementsOf(t.db, () => store.listDeliveries(t.db, p, { limit: 1 }));
      const [{ sql, bindings }] = statements as [{ sql: string; bindings: unknown[] }];
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
        bindings,
      );
      const attempts = nodesOf(rows[0]!['QUERY PLAN'][0].Plan).filter((node) =>
        node['Relation Name']?.startsWith('delivery_attempts'),
      );
      const read = attempts.reduce((sum, node) => sum + rowsRead(node), 0);
      assert.ok(
        read <= 2,
        `read ${read} attempts: ${JSON.stringify(attempts.map((n) => [n['Node Type'], n['Index Name'], rowsRead(n)]))}`,
      );
    });
  });

  describe('a delivery’s attempts, a page at a time', () => {
    let api: LocalServer;
    const p = newProjectId();
    const other = newProjectId();
    const ATTEMPTS = 150;

    before(async () => {
      const deps: AppDeps = {
        db: t.db,
        secretBox: createSecretBox(randomBytes(32)),
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: TEST_JWT_SECRET },
        sendTestEvent: () => Promise.reject(new Error('not used')),
      };
      api = await listenLocal(createApp(deps).callback());
      for (const id of [p, other]) {
        await store.addProject(t.db, id);
        await store.addMember(t.db, id, 'alice');
      }
      const key = { id: 'evt-many', projectId: p, type: 'VITAL_THRESHOLD', workflowId: 'wf-1' };
      // Two runs (a redelivery): the numbering runs on across them.
      for (let i = 1; i <= ATTEMPTS; i += 1)
        await store.recordDeliveryAttempt(t.db, i <= 100 ? key : { ...key, workflowId: 'wf-2' }, {
          runAttempt: i,
          statusCode: 500 + (i % 4),
          durationMs: i,
          error: 'Receiver answered HTTP 500',
          delivered: false,
        });
      await store.recordDeliveryAttempt(
        t.db,
        { id: 'evt-few', projectId: p, type: 'TEST', workflowId: 'wf-3' },
        {
          runAttempt: 1,
          statusCode: 200,
          durationMs: 3,
          delivered: true,
        },
      );
    });
    after(async () => {
      await api?.close();
    });

    type Attempt = { attempt: number; at: string; durationMs: number; statusCode?: number };

    it('the detail holds the first 100 attempts and a cursor to the rest; the attempts route pages on', async () => {
      const detail = await call(api.url, `/webhooks/project/${p}/deliveries/evt-many`, hsToken('alice'));
      assert.equal(detail.status, 200);
      assert.equal(detail.body.attempts, ATTEMPTS);
      const first = detail.body.attemptLog as Attempt[];
      assert.deepEqual(
        first.map((a) => a.attempt),
        Array.from({ length: 100 }, (_, i) => i + 1),
      );
      assert.deepEqual(
        first.map((a) => a.durationMs),
        Array.from({ length: 100 }, (_, i) => i + 1),
      );
      assert.equal(typeof detail.body.nextAttemptsCursor, 'string');

      const seen = [...first];
      let cursor = detail.body.nextAttemptsCursor as string | null;
      let pages = 0;
      while (cursor) {
        const page = await call(
          api.url,
          `/webhooks/project/${p}/deliveries/evt-many/attempts?limit=20&cursor=${cursor}`,
          hsToken('alice'),
        );
        assert.equal(page.status, 200, JSON.stringify(page.body));
        assert.deepEqual(Object.keys(page.body).sort(), ['items', 'nextCursor']);
        seen.push(...(page.body.items as Attempt[]));
        cursor = page.body.nextCursor as string | null;
        pages += 1;
      }
      assert.equal(pages, 3);
      assert.deepEqual(
        seen.map((a) => [a.attempt, a.durationMs]),
        Array.from({ length: ATTEMPTS }, (_, i) => [i + 1, i + 1]),
      );
      // The delivery's last attempt is the log's last, not the first page's.
      assert.equal(detail.body.lastAttemptAt, seen.at(-1)!.at);

      const firstPage = await call(api.url, `/webhooks/project/${p}/deliveries/evt-many/attempts`, hsToken('alice'));
      assert.deepEqual(
        (firstPage.body.items as Attempt[]).map((a) => a.attempt),
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
    });

    it('a delivery with few attempts: all of them, no cursor (the detail as before)', async () => {
      const detail = await call(api.url, `/webhooks/project/${p}/deliveries/evt-few`, hsToken('alice'));
      assert.deepEqual(
        (detail.body.attemptLog as Attempt[]).map((a) => [a.attempt, a.statusCode]),
        [[1, 200]],
      );
      assert.equal(detail.body.nextAttemptsCursor, null);
      const page = await call(api.url, `/webhooks/project/${p}/deliveries/evt-few/attempts`, hsToken('alice'));
      assert.deepEqual(page.body, { items: detail.body.attemptLog, nextCursor: null });
    });

    it('a bad limit or cursor is a 400; another project’s delivery a 404; a non-member a 403', async () => {
      const path = `/webhooks/project/${p}/deliveries/evt-many/attempts`;
      for (const query of [
        'limit=0',
        'limit=101',
        'cursor=bm9wZQ',
        `cursor=${Buffer.from('[0]').toString('base64url')}`,
      ])
        assert.equal((await call(api.url, `${path}?${query}`, hsToken('alice'))).status, 400, query);
      const foreign = await call(api.url, `/webhooks/project/${other}/deliveries/evt-many/attempts`, hsToken('alice'));
      assert.equal(foreign.status, 404);
      assert.equal((await call(api.url, path, hsToken('mallory'))).status, 403);
    });
  });

  describe('reads through tokens and portal links have a per-project rate', () => {
    let api: LocalServer;
    let now = 0;
    const ring = [{ id: 'k1', key: randomBytes(32) }];
    const tokens = createPortalTokens(portalSigningKeys(ring));

    before(async () => {
      const deps: AppDeps = {
        db: t.db,
        secretBox: createSecretBox(ring[0]!.key),
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: TEST_JWT_SECRET },
        sendTestEvent: () => Promise.reject(new Error('not used')),
        portal: { tokens },
        readLimits: { perSecond: 3, clock: () => now },
      };
      api = await listenLocal(createApp(deps).callback());
    });
    after(async () => {
      await api?.close();
    });

    async function project(): Promise<string> {
      const id = newProjectId();
      await store.addProject(t.db, id);
      await store.addMember(t.db, id, 'alice');
      await store.upsertDelivery(t.db, { id: `${id}-evt`, projectId: id, type: 'TEST', workflowId: 'wf' }, 'skipped');
      return id;
    }

    async function readLink(projectId: string): Promise<string> {
      const response = await fetch(`${api.url}/webhooks/project/${projectId}/portal-sessions`, {
        method: 'POST',
        headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
        body: JSON.stringify({ capabilities: ['read'] }),
      });
      assert.equal(response.status, 201);
      return String(((await response.json()) as { token: string }).token);
    }

    it('a read-only link past the rate gets 429 problem+json with Retry-After on every read; another project does not', async () => {
      const [a, b] = [await project(), await project()];
      const link = await readLink(a);
      const reads = (projectId: string) => [
        `/webhooks/project/${projectId}/deliveries?status=skipped`,
        `/webhooks/project/${projectId}/deliveries/${projectId}-evt`,
        `/webhooks/project/${projectId}/health`,
      ];
      for (const path of reads(a)) assert.equal((await call(api.url, path, link)).status, 200, path);
      for (const path of [...reads(a), `/webhooks/project/${a}/deliveries/${a}-evt/attempts`]) {
        const refused = await call(api.url, path, link);
        assert.equal(refused.status, 429, path);
        assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.equal(refused.headers.get('retry-after'), '1');
        assert.equal(refused.body.detail, `At most 3 reads a second per project: project ${a} reached the limit`);
      }
      // The project's members share its rate: a bearer token is refused too.
      assert.equal((await call(api.url, reads(a)[0]!, hsToken('alice'))).status, 429);
      // Another project's calls, by the same member, are not.
      for (const path of reads(b)) assert.equal((await call(api.url, path, hsToken('alice'))).status, 200, path);

      // A third of a second later one read is back; a second later, the whole second's worth.
      now += 334;
      assert.equal((await call(api.url, reads(a)[0]!, link)).status, 200);
      assert.equal((await call(api.url, reads(a)[0]!, link)).status, 429);
      now += 1_000;
      for (const path of reads(a)) assert.equal((await call(api.url, path, link)).status, 200, path);
    });

    it('Retry-After says when a read is back; callers who are not members draw nothing from the project', async () => {
      const a = await project();
      for (let i = 0; i < 3; i += 1) await call(api.url, `/webhooks/project/${a}/health`, hsToken('alice'));
      const refused = await call(api.url, `/webhooks/project/${a}/health`, hsToken('alice'));
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('retry-after'), '1');

      const c = await project();
      for (let i = 0; i < 10; i += 1)
        assert.equal((await call(api.url, `/webhooks/project/${c}/deliveries`, hsToken('mallory'))).status, 403);
      assert.equal((await call(api.url, `/webhooks/project/${c}/deliveries`, hsToken('alice'))).status, 200);
    });
  });

  it('config: READ_CALLS_PER_SECOND is 10 by default, a whole number from 1 to 100,000', () => {
    assert.equal(loadConfig({}).READ_CALLS_PER_SECOND, 10);
    assert.equal(loadConfig({ READ_CALLS_PER_SECOND: '100000' }).READ_CALLS_PER_SECOND, 100_000);
    for (const value of ['0', '100001', '2.5', 'many'])
      assert.throws(() => loadConfig({ READ_CALLS_PER_SECOND: value }), /READ_CALLS_PER_SECOND/, value);
  });

  describe('startApi applies READ_CALLS_PER_SECOND', () => {
    let running: RunningApi | undefined;
    after(async () => {
      await running?.close();
    });

    it('the fifth read of a second is refused with READ_CALLS_PER_SECOND=4', async () => {
      const config = loadConfig(
        {
          PORT: '0',
          DATABASE_URL: t.url,
          JWT_SECRET: TEST_JWT_SECRET,
          WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
          READ_CALLS_PER_SECOND: '4',
        },
        { database: true, auth: true },
      );
      running = await startApi(config, pino({ level: 'silent' }), {
        db: t.db,
        sendTestEvent: () => Promise.reject(new Error('not used')),
      });
      const { port } = running.server.address() as AddressInfo;
      const p = newProjectId();
      await store.addProject(t.db, p);
      await store.addMember(t.db, p, 'alice');
      const statuses: number[] = [];
      for (let i = 0; i < 5; i += 1)
        statuses.push(
          (await call(`http://127.0.0.1:${port}`, `/webhooks/project/${p}/health`, hsToken('alice'))).status,
        );
      assert.deepEqual(statuses, [200, 200, 200, 200, 429]);
    });
  });
});

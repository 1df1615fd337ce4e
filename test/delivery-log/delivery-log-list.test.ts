// The delivery log's list over the API: newest first in pages behind an opaque cursor, filtered by status, type and
// time, with no delivery skipped or repeated across pages when many share a millisecond; and a member of another
// project refused on every delivery-log route without learning another project's ids.
import assert from 'node:assert/strict';
import * as store from '../../db';
import { useDeliveryLogSuite, type LogItem, type Reply } from './fixture';

describe('delivery log list: pages, filters and who may read it', function () {
  this.timeout(60_000);
  const { fx, call, project, list, detail, seed } = useDeliveryLogSuite();

  it('pages newest first with an opaque cursor, and filters by status, type and time', async () => {
    const p = await project('alice');
    const newestFirst = await seed(p, 25);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const reply: Reply<{ items: LogItem[]; nextCursor: string | null }> = await list(
        p,
        `?limit=10${cursor ? `&cursor=${cursor}` : ''}`,
      );
      assert.equal(reply.status, 200);
      seen.push(...reply.body.items.map((item) => item.id));
      cursor = reply.body.nextCursor;
      pages += 1;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, newestFirst);
    assert.equal((await list(p)).body.items.length, 20, 'the default page holds 20');

    const failed = await list(p, '?status=failed&limit=100');
    assert.deepEqual(
      failed.body.items.map((item) => item.id),
      newestFirst.filter((id) => Number(id.slice(-2)) % 3 === 0),
    );
    const vital = await list(p, '?type=VITAL_THRESHOLD&status=delivered&limit=100');
    assert.ok(vital.body.items.length > 0);
    assert.ok(vital.body.items.every((item) => item.type === 'VITAL_THRESHOLD' && item.status === 'delivered'));
    const window = await list(p, '?since=2026-01-01T00:05:00Z&until=2026-01-01T00:08:00Z');
    assert.deepEqual(
      window.body.items.map((item) => item.id.slice(-2)),
      ['07', '06', '05'],
    );

    for (const [query, problem] of [
      ['?limit=0', 'limit must be an integer from 1 to 100'],
      ['?limit=101', 'limit must be an integer from 1 to 100'],
      ['?status=lost', 'status must be one of pending, held, delivered, failed, skipped'],
      ['?type=FALL', 'type must be one of FALL_DETECTION, VITAL_THRESHOLD, TEST'],
      ['?since=yesterday', 'since must be an ISO 8601 date-time with a time zone, such as 2026-01-01T00:00:00Z'],
      ['?cursor=bm90LWEtY3Vyc29y', 'cursor is not one this API returned'],
    ] as const) {
      const reply = await list(p, query);
      assert.equal(reply.status, 400, query);
      assert.match(reply.contentType, /^application\/problem\+json/);
      assert.equal(reply.body.detail, `The query is invalid: ${problem}`);
    }
  });

  it('pages without skipping or repeating deliveries created in the same millisecond or microsecond', async () => {
    const p = await project('alice');
    // Microseconds as PostgreSQL keeps them: a JS Date (milliseconds) cannot tell most of these apart.
    const times = [
      '2026-01-01T00:00:00.123999Z',
      '2026-01-01T00:00:00.123500Z',
      '2026-01-01T00:00:00.123500Z',
      '2026-01-01T00:00:00.123500Z',
      '2026-01-01T00:00:00.123001Z',
      '2026-01-01T00:00:00.123000Z',
      '2026-01-01T00:00:00.123000Z',
      '2026-01-01T00:00:00.122999Z',
    ];
    const newestFirst: string[] = [];
    for (const [i, time] of times.entries()) {
      // Ids descend with the time, so each id is where the (created_at, id) order puts it.
      const id = `same-ms-${p}-${String(9 - i)}`;
      await store.upsertDelivery(
        fx.database.db,
        { id, projectId: p, type: 'FALL_DETECTION', workflowId: id },
        'failed',
      );
      await fx.database
        .db('deliveries')
        .where({ id })
        .update({ created_at: fx.database.db.raw('?::timestamptz', [time]) });
      newestFirst.push(id);
    }
    for (const limit of [1, 2, 3]) {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const reply: Reply<{ items: LogItem[]; nextCursor: string | null }> = await list(
          p,
          `?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`,
        );
        assert.equal(reply.status, 200);
        seen.push(...reply.body.items.map((item) => item.id));
        cursor = reply.body.nextCursor;
      } while (cursor && seen.length <= times.length);
      assert.deepEqual(seen, newestFirst, `pages of ${limit}`);
    }
  });

  it('BOLA: a member of another project gets 403 on every route and never sees another project’s ids', async () => {
    const a = await project('alice');
    const b = await project('bob');
    const [aId] = await seed(a, 2);
    const routes: [string, string, unknown?][] = [
      ['GET', `/webhooks/project/${a}/deliveries`],
      ['GET', `/webhooks/project/${a}/deliveries/${aId}`],
      ['POST', `/webhooks/project/${a}/deliveries/${aId}/redeliver`],
      ['POST', `/webhooks/project/${a}/deliveries/recover`, { since: '2026-01-01T00:00:00Z' }],
      ['GET', `/webhooks/project/${a}/health`],
    ];
    for (const [method, path, body] of routes) {
      const forbidden = await call(method, path, { user: 'bob', body });
      assert.equal(forbidden.status, 403, `${method} ${path}`);
      assert.equal(forbidden.body.detail, 'The caller is not a member of this project');
      assert.ok(!forbidden.text.includes(aId!), 'a 403 names no delivery');
      const unknown = await call(method, path.replace(a, 'no-such-project'), { user: 'bob', body });
      assert.equal(unknown.status, 404, `${method} ${path}`);
      assert.equal(unknown.body.detail, 'No project with id no-such-project was found');
      assert.equal((await call(method, path, { body })).status, 401);
    }
    // Through bob's own project, alice's delivery does not exist.
    const viaB = await detail(b, aId!, 'bob');
    assert.equal(viaB.status, 404);
    assert.equal(viaB.body.detail, `No delivery with id ${aId} was found`);
    const redeliverViaB = await call('POST', `/webhooks/project/${b}/deliveries/${aId}/redeliver`, { user: 'bob' });
    assert.equal(redeliverViaB.status, 404);
    assert.equal(redeliverViaB.body.detail, `No delivery with id ${aId} was found`);
    const recoverViaB = await call('POST', `/webhooks/project/${b}/deliveries/recover`, {
      user: 'bob',
      body: { since: '2020-01-01T00:00:00Z' },
    });
    assert.deepEqual(recoverViaB.body, { count: 0 });
    assert.deepEqual((await list(b, '', 'bob')).body.items, []);
    assert.equal((await store.findDelivery(fx.database.db, a, aId!))?.status, 'delivered', 'untouched');
  });
});

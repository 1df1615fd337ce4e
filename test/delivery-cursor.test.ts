// The delivery log's list query and its opaque cursor (api/deliveries.ts, db/deliveries.ts): pure parsing, then
// paging on a real PostgreSQL. No Temporal: the rows are written the way the activities write them.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DEFAULT_PAGE_SIZE, listDeliveries, parseListQuery } from '../api/deliveries';
import { addMember, addProject, upsertDelivery, type DeliveryStatus } from '../db';
import { newProjectId } from './support/deliveries';
import { createTestDatabase, type TestDatabase } from './support/postgres';

const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** The 400's message for a query, or 'valid'. */
function problemOf(query: Record<string, string | string[] | undefined>): string {
  try {
    parseListQuery(query);
    return 'valid';
  } catch (error) {
    return (error as Error).message;
  }
}

describe('delivery list query and cursor (pure)', () => {
  it('defaults to a page of DEFAULT_PAGE_SIZE with no filter', () => {
    assert.deepEqual(parseListQuery({}), { limit: DEFAULT_PAGE_SIZE });
  });

  it('reads every filter and a cursor it issued', () => {
    // A position as PostgreSQL writes it: the creation time to the microsecond, then the id.
    const at = '2026-11-24T10:00:00.123456Z';
    assert.deepEqual(
      parseListQuery({
        status: 'failed',
        type: 'VITAL_THRESHOLD',
        since: '2026-11-01T00:00:00Z',
        until: '2026-11-24T00:00:00.000Z',
        limit: '100',
        cursor: cursorOf([at, 'webhook-event-1']),
      }),
      {
        status: 'failed',
        type: 'VITAL_THRESHOLD',
        since: new Date('2026-11-01T00:00:00Z'),
        until: new Date('2026-11-24T00:00:00.000Z'),
        limit: 100,
        after: { createdAt: at, id: 'webhook-event-1' },
      },
    );
    assert.equal(parseListQuery({ limit: '1' }).limit, 1);
  });

  it('refuses every cursor it did not issue, naming the cursor', () => {
    for (const cursor of [
      'bm90LWEtY3Vyc29y',
      '',
      '%%%',
      cursorOf({ createdAt: 1, id: 'x' }),
      cursorOf([1]),
      cursorOf([1, 'x', 2]),
      cursorOf(['1', 'x']),
      cursorOf([1.5, 'x']),
      cursorOf([2 ** 53, 'x']),
      cursorOf([1, 2]),
      cursorOf(null),
    ])
      assert.equal(
        problemOf({ cursor }),
        'The query is invalid: cursor is not one this API returned',
        `cursor ${JSON.stringify(cursor)}`,
      );
  });

  it('names every problem of a query at once', () => {
    assert.equal(
      problemOf({ status: 'lost', type: 'PANIC', since: 'yesterday', until: '2026-13-45T00:00:00Z', limit: '0' }),
      'The query is invalid: status must be one of pending, delivered, failed, skipped; ' +
        'type must be one of FALL_DETECTION, VITAL_THRESHOLD, TEST; ' +
        'since must be an ISO 8601 date-time with a time zone, such as 2026-01-01T00:00:00Z; ' +
        'until must be an ISO 8601 date-time with a time zone, such as 2026-01-01T00:00:00Z; ' +
        'limit must be an integer from 1 to 100',
    );
    for (const limit of ['101', '1.5', '-1', '1e2', ' 5', 'ten'])
      assert.match(problemOf({ limit }), /limit must be an integer from 1 to 100$/, `limit ${limit}`);
    assert.equal(
      problemOf({ status: ['failed', 'delivered'], cursor: ['a', 'b'] }),
      'The query is invalid: status must be given once; cursor must be given once',
    );
  });
});

describe('delivery list paging (real PostgreSQL)', () => {
  let t: TestDatabase;
  before(async () => (t = await createTestDatabase()));
  after(() => t?.destroy());

  /** A project with `count` deliveries one second apart, newest last, in the statuses given in turn. */
  async function projectWithDeliveries(count: number, statuses: DeliveryStatus[] = ['delivered']) {
    const projectId = newProjectId();
    await addProject(t.db, projectId);
    await addMember(t.db, projectId, 'alice');
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const id = `webhook-event-${randomUUID()}`;
      const type = i % 2 === 0 ? 'FALL_DETECTION' : 'VITAL_THRESHOLD';
      await upsertDelivery(t.db, { id, projectId, type, workflowId: id }, statuses[i % statuses.length]!);
      await t
        .db('deliveries')
        .where({ id })
        .update({ created_at: new Date(Date.parse('2026-11-24T00:00:00Z') + i * 1_000) });
      ids.push(id);
    }
    return { projectId, ids };
  }

  async function pages(projectId: string, query: Record<string, string>) {
    const seen: string[][] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<typeof listDeliveries>> = await listDeliveries({ db: t.db }, 'alice', projectId, {
        ...query,
        ...(cursor && { cursor }),
      });
      seen.push(page.items.map((item) => item.id));
      cursor = page.nextCursor;
    } while (cursor && seen.length < 20);
    return seen;
  }

  it('pages newest first, each delivery once, and says when there is no next page', async () => {
    const { projectId, ids } = await projectWithDeliveries(5);
    const newestFirst = [...ids].reverse();
    assert.deepEqual(await pages(projectId, { limit: '2' }), [
      newestFirst.slice(0, 2),
      newestFirst.slice(2, 4),
      newestFirst.slice(4),
    ]);
    assert.deepEqual(await pages(projectId, { limit: '5' }), [newestFirst], 'a full last page has no next cursor');
  });

  it('filters by status, type and time, and keeps the filter across pages', async () => {
    const { projectId, ids } = await projectWithDeliveries(6, ['failed', 'failed', 'delivered']);
    // Statuses failed, failed, delivered, failed, failed, delivered; types alternate, FALL_DETECTION first.
    assert.deepEqual((await pages(projectId, { status: 'failed', limit: '1' })).flat(), [
      ids[4],
      ids[3],
      ids[1],
      ids[0],
    ]);
    assert.deepEqual((await pages(projectId, { type: 'VITAL_THRESHOLD', limit: '2' })).flat(), [
      ids[5],
      ids[3],
      ids[1],
    ]);
    assert.deepEqual(
      (await pages(projectId, { since: '2026-11-24T00:00:01Z', until: '2026-11-24T00:00:04Z' })).flat(),
      [ids[3], ids[2], ids[1]],
      'since inclusive, until exclusive',
    );
  });
});

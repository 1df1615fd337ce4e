// The delivery log's list query, its opaque cursor and the recover window (api/deliveries/query.ts,
// api/deliveries/schemas.ts): pure parsing, then paging on a real PostgreSQL. No Temporal: the rows are written the way
// the activities write them.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import knex from 'knex';
import { DEFAULT_PAGE_SIZE, listDeliveries, parseListQuery, recoverAsOperator } from '../../api/deliveries/deliveries';
import { MAX_CURSOR_LENGTH, encodeCursor } from '../../api/deliveries/query';
import { validateRecoverBody } from '../../api/deliveries/schemas';
import { addMember, addProject, upsertDelivery, type DeliveryStatus } from '../../db';
import { newProjectId } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

type Done = (error: Error | undefined, connection: unknown) => void;

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
      // What this API writes, with a third element: only the pair is a position.
      cursorOf(['2026-11-24T10:00:00.123456Z', 'evt-1', 'extra']),
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
      'The query is invalid: status must be one of pending, held, delivered, failed, skipped; ' +
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

describe('delivery list cursor bounds and recover window (pure)', () => {
  const at = '2026-11-24T10:00:00.123456Z';
  const CURSOR_REFUSED = 'The query is invalid: cursor is not one this API returned';

  it('reads back every cursor it writes, a 300-character id and the year 1 included', () => {
    for (const position of [
      { createdAt: at, id: 'webhook-event-1' },
      { createdAt: at, id: '~'.repeat(300) },
      { createdAt: '0001-01-01T00:00:00.000000Z', id: 'x' },
      { createdAt: '9999-12-31T23:59:59.999999Z', id: '!' },
    ]) {
      const cursor = encodeCursor(position);
      assert.ok(cursor.length <= MAX_CURSOR_LENGTH, `${cursor.length} characters`);
      assert.deepEqual(parseListQuery({ cursor }).after, position);
    }
  });

  it('refuses a cursor longer than MAX_CURSOR_LENGTH before decoding it, and one outside base64url', () => {
    // JSON allows spaces: the same position, padded to exactly the bound and one character past it.
    const padded = (length: number) => {
      const json = JSON.stringify([at, 'x']);
      const bytes = (length / 4) * 3 - json.length;
      return Buffer.from(`[${' '.repeat(bytes)}${json.slice(1)}`).toString('base64url');
    };
    assert.equal(padded(MAX_CURSOR_LENGTH).length, MAX_CURSOR_LENGTH);
    assert.deepEqual(parseListQuery({ cursor: padded(MAX_CURSOR_LENGTH) }).after, { createdAt: at, id: 'x' });
    const tooLong = padded(MAX_CURSOR_LENGTH + 4);
    assert.equal(problemOf({ cursor: tooLong }), CURSOR_REFUSED, `${tooLong.length} characters`);
    const cursor = encodeCursor({ createdAt: at, id: 'webhook-event-1?' });
    assert.equal(parseListQuery({ cursor }).after?.id, 'webhook-event-1?');
    for (const altered of [`${cursor}=`, `.${cursor}`, cursor.replace('_', '/')])
      assert.equal(problemOf({ cursor: altered }), CURSOR_REFUSED, altered);
  });

  it('refuses a cursor time PostgreSQL would not read back as written', () => {
    for (const createdAt of [
      '0000-01-01T00:00:00.000000Z',
      '2026-02-30T00:00:00.000000Z',
      '2026-06-30T23:59:60.000000Z',
      '9999-99-99T00:00:00.000000Z',
      '2026-11-24T10:00:00.123Z',
      '2026-11-24T10:00:00.123456+00:00',
      ' 2026-11-24T10:00:00.123456Z',
      '2026-11-24T10:00:00.123456Z ',
      '+275760-09-13T00:00:00.000000Z',
    ])
      assert.equal(problemOf({ cursor: cursorOf([createdAt, 'x']) }), CURSOR_REFUSED, createdAt);
  });

  it('names every filter given twice', () => {
    assert.equal(
      problemOf({ type: ['TEST', 'TEST'], since: [at, at], until: [at, at], limit: ['1', '2'] }),
      'The query is invalid: type must be given once; since must be given once; until must be given once; ' +
        'limit must be given once',
    );
  });

  it('takes a recover window with since, and until later than since', () => {
    assert.deepEqual(validateRecoverBody({ since: '2026-11-01T00:00:00Z' }), { since: '2026-11-01T00:00:00Z' });
    const window = { since: '2026-11-01T00:00:00Z', until: '2026-11-01T00:00:00.001Z' };
    assert.deepEqual(validateRecoverBody(window), window);
  });

  it('names every problem of a recover window', () => {
    const problemsOf = (body: unknown) => {
      try {
        validateRecoverBody(body);
        return 'valid';
      } catch (error) {
        return (error as Error).message;
      }
    };
    assert.equal(problemsOf({}), "The request body is invalid: / must have required property 'since'");
    assert.equal(problemsOf([]), 'The request body is invalid: / must be object');
    assert.equal(
      problemsOf({ since: '2026-11-01T00:00:00Z', status: 'failed' }),
      'The request body is invalid: / must NOT have additional property status',
    );
    assert.equal(
      problemsOf({ since: 'yesterday' }),
      'The request body is invalid: /since must match format "date-time"',
    );
    assert.equal(
      problemsOf({ since: '2026-06-30T23:59:60Z', until: '2026-12-31T23:59:60Z' }),
      'The request body is invalid: /since is a leap second (:60), which this API cannot take: use :59; ' +
        '/until is a leap second (:60), which this API cannot take: use :59',
    );
    assert.equal(
      problemsOf({ since: '2026-11-01T00:00:00Z', until: 1 }),
      'The request body is invalid: /until must be string',
    );
    assert.equal(
      problemsOf({ since: 'yesterday', until: 1, status: 'failed' }),
      'The request body is invalid: / must NOT have additional property status; ' +
        '/since must match format "date-time"; /until must be string',
    );
    for (const until of ['2026-11-01T00:00:00Z', '2026-11-01T01:00:00+02:00'])
      assert.equal(
        problemsOf({ since: '2026-11-01T00:00:00Z', until }),
        'The request body is invalid: /until must be later than since',
        until,
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

  it('pages the same in a session whose time zone is not UTC: the cursor’s time is UTC whatever the session', async () => {
    const { projectId, ids } = await projectWithDeliveries(5);
    // A pool whose sessions run at UTC+05:30, as a database configured with another TimeZone would.
    const kolkata = knex({
      client: 'pg',
      connection: t.url,
      pool: {
        min: 0,
        max: 1,
        afterCreate: (connection: { query: (sql: string, done: (error?: Error) => void) => void }, done: Done) =>
          connection.query("SET TIME ZONE 'Asia/Kolkata'", (error) => done(error, connection)),
      },
    });
    try {
      const seen: string[][] = [];
      let cursor: string | null = null;
      do {
        const page: Awaited<ReturnType<typeof listDeliveries>> = await listDeliveries(
          { db: kolkata },
          'alice',
          projectId,
          {
            limit: '2',
            ...(cursor && { cursor }),
          },
        );
        seen.push(page.items.map((item) => item.id));
        cursor = page.nextCursor;
      } while (cursor && seen.length < 20);
      const newestFirst = [...ids].reverse();
      assert.deepEqual(seen, [newestFirst.slice(0, 2), newestFirst.slice(2, 4), newestFirst.slice(4)]);
    } finally {
      await kolkata.destroy();
    }
  });

  it('a recovery takes at most 500 failed deliveries a call (MAX_RECOVER_BATCH); the next call the rest', async () => {
    const projectId = newProjectId();
    await addProject(t.db, projectId);
    // 501, written out: the documented bound is under test, not whatever the constant says.
    for (let i = 0; i < 501; i += 1) {
      const id = `webhook-event-${randomUUID()}`;
      await upsertDelivery(t.db, { id, projectId, type: 'FALL_DETECTION', workflowId: id }, 'failed');
    }
    const started: string[] = [];
    const deps = {
      db: t.db,
      recoverRatePerSecond: 1_000,
      redelivery: (row: { id: string }) => {
        started.push(row.id);
        return Promise.resolve(`webhook-redelivery-${randomUUID()}`);
      },
    };
    const window = { since: '2000-01-01T00:00:00Z' };
    assert.deepEqual(await recoverAsOperator(deps, projectId, window), { count: 500 });
    assert.equal(started.length, 500);
    assert.deepEqual(await recoverAsOperator(deps, projectId, window), { count: 1 });
    assert.equal(new Set(started).size, 501, 'each once');
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

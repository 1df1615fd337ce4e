import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as store from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

describe('db: registrations', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
    await store.addProject(t.db, 'p1');
  });
  after(() => t.destroy());

  it('allows one registration per project, whatever the race', async () => {
    const attempts = await Promise.all(
      Array.from({ length: 10 }, () =>
        store.insertRegistration(t.db, {
          id: randomUUID(),
          projectId: 'p1',
          url: 'https://a.example/h',
          types: ['FALL_DETECTION'],
          secretSealed: 'x',
        }),
      ),
    );
    assert.equal(attempts.filter(Boolean).length, 1);
    const row = await store.findRegistration(t.db, 'p1');
    assert.deepEqual(row?.types, ['FALL_DETECTION']);
  });
});

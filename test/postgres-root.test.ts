// Embedded PostgreSQL started as root from a directory the `postgres` user cannot enter: a clear stop, not EACCES.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../dev/postgres';
import {
  assertReachableByPostgresUser,
  embeddedPostgresBinDir,
  firstUntraversableDirectory,
} from '../dev/postgres-user';
import { freePort } from '../dev/ports';

describe('dev: embedded PostgreSQL from a directory its OS user cannot enter', () => {
  let home: string;
  let locked: string;
  before(() => {
    home = mkdtempSync(join(tmpdir(), 'webhooks-root-'));
    chmodSync(home, 0o755); // mkdtemp makes it 0700; only the folder below is the locked one
    locked = join(home, 'locked');
    mkdirSync(join(locked, 'checkout'), { recursive: true });
    chmodSync(locked, 0o700); // a home folder: only its owner may enter
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  const stranger = { name: 'postgres', uid: 4_000_000, gids: [4_000_000] };
  const owner = { name: 'me', uid: process.getuid!(), gids: [] };

  it('finds the first directory on the way that a user may not traverse, by owner, group and other bits', () => {
    const dataDir = join(locked, 'checkout', '.data', 'postgres');
    assert.equal(firstUntraversableDirectory(dataDir, stranger), locked);
    assert.equal(firstUntraversableDirectory(dataDir, owner), undefined);
    chmodSync(locked, 0o701);
    try {
      assert.equal(firstUntraversableDirectory(dataDir, stranger), undefined, 'o+x lets others through');
    } finally {
      chmodSync(locked, 0o700);
    }
    assert.throws(
      () => assertReachableByPostgresUser({ binDir: '/', dataDir }, stranger),
      (error: Error) =>
        error.message.includes(`postgres cannot enter ${locked}`) &&
        error.message.includes(`setfacl -m u:postgres:x ${locked}`) &&
        error.message.includes('DATABASE_URL'),
    );
  });

  it('finds the installed PostgreSQL binaries', async () => {
    assert.ok(existsSync(join(await embeddedPostgresBinDir(), 'initdb')));
  });

  it('as root, stops before initdb with the message; as another user, starts (the folder is its own)', async () => {
    const dataDir = join(locked, 'checkout', '.data', 'postgres');
    const starting = startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
    if (process.getuid?.() === 0) {
      await assert.rejects(starting, new RegExp(`postgres cannot enter ${locked}.*setfacl`, 's'));
      assert.equal(existsSync(dataDir), false, 'nothing was initialised');
    } else {
      const running = await starting;
      await running.stop();
    }
  });
});

// Embedded PostgreSQL started as root from a directory the `postgres` user cannot enter: it works, not EACCES.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../../dev/postgres';
import { REACHABLE_ROOT, loadReachableEmbeddedPostgres, reachableDataDir } from '../../dev/postgres-relocate';
import { embeddedPostgresBinDir, firstUntraversableDirectory, postgresOsUser } from '../../dev/postgres-user';
import { freePort } from '../../dev/ports';

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
  });

  it('finds the installed PostgreSQL binaries', async () => {
    assert.ok(existsSync(join(await embeddedPostgresBinDir(), 'initdb')));
  });

  it('copies the binaries where the postgres user can reach them, once, and loads the library from there', async () => {
    const library = (await loadReachableEmbeddedPostgres(await embeddedPostgresBinDir())) as { default: unknown };
    assert.equal(typeof library.default, 'function');
    const copied = join(REACHABLE_ROOT, 'node_modules');
    assert.equal(firstUntraversableDirectory(REACHABLE_ROOT, stranger), undefined);
    assert.ok(existsSync(REACHABLE_ROOT) && !existsSync(copied), 'a copy per version, never a bare node_modules');
  });

  it('starts from a locked folder: as root the data lives under /var/tmp (the same place at every start)', async () => {
    const dataDir = join(locked, 'checkout', '.data', 'postgres');
    const running = await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
    try {
      const { Client } = await import('pg');
      const client = new Client({ connectionString: running.url });
      await client.connect();
      const { rows } = await client.query<{ answer: number }>('SELECT 1 + 1 AS answer');
      await client.end();
      assert.equal(rows[0]?.answer, 2);
    } finally {
      await running.stop();
    }
    if (process.getuid?.() === 0) {
      assert.ok(firstUntraversableDirectory(dataDir, postgresOsUser()), 'the folder really is locked for postgres');
      assert.equal(reachableDataDir(dataDir), reachableDataDir(join(dataDir, '.')), 'stable across starts');
      assert.equal(existsSync(join(locked, 'checkout', '.data', 'postgres', 'PG_VERSION')), false);
    }
  });
});

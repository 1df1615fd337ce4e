#!/usr/bin/env node
// Operator CLI: `npm run cli -- <command>` or the `webhooks` bin.
import { createInterface } from 'node:readline';
import { ConfigError } from '../common/config';
import { CliError, UsageError, type CliCommand, type CliIo } from './command';
import { memberAdd, memberRemove } from './commands/member';
import { migrate } from './commands/migrate';
import { projectAdd } from './commands/project';
import { token } from './commands/token';
import { eventEmit } from './commands/event';
import { start } from './commands/start';
import { deliveriesList, deliveriesRecover, deliveriesRedeliver } from './commands/deliveries';
import { dataKeysRewrap, secretsReseal } from './commands/secrets';
import { auditDigest, auditExport, auditKeygen, auditPrune, auditPublicKey, auditVerify } from './commands/audit';
import { erasureCertificateCommand, erasureRequest, erasureStatusCommand } from './commands/erasure';
import { projectPurge, purgeCertificateCommand, purgeStatusCommand } from './commands/purge';

/** Every command by its words; add one with one line. */
export const commands: Record<string, CliCommand> = {
  migrate,
  'project add': projectAdd,
  'project purge': projectPurge,
  'member add': memberAdd,
  'member remove': memberRemove,
  token,
  'event emit': eventEmit,
  start,
  'deliveries list': deliveriesList,
  'deliveries redeliver': deliveriesRedeliver,
  'deliveries recover': deliveriesRecover,
  'secrets reseal': secretsReseal,
  'data-keys rewrap': dataKeysRewrap,
  'audit verify': auditVerify,
  'audit prune': auditPrune,
  'audit export': auditExport,
  'audit digest': auditDigest,
  'audit public-key': auditPublicKey,
  'audit keygen': auditKeygen,
  'erasure request': erasureRequest,
  'erasure status': erasureStatusCommand,
  'erasure certificate': erasureCertificateCommand,
  'purge status': purgeStatusCommand,
  'purge certificate': purgeCertificateCommand,
};

export function usage(): string {
  const width = Math.max(...Object.values(commands).map((c) => c.usage.length));
  const lines = Object.values(commands).map((c) => `  ${c.usage.padEnd(width)}  ${c.summary}`);
  return ['Usage: webhooks <command>', '', 'Commands:', ...lines].join('\n');
}

/** The command whose words start argv, the longest match first ("member add" before "member"). */
function findCommand(argv: string[]): { name: string; command: CliCommand; args: string[] } | undefined {
  const names = Object.keys(commands).sort((a, b) => b.split(' ').length - a.split(' ').length);
  for (const name of names) {
    const words = name.split(' ');
    if (words.every((word, i) => argv[i] === word))
      return { name, command: commands[name]!, args: argv.slice(words.length) };
  }
  return undefined;
}

/** One line of stdin, the prompt on stderr; undefined when stdin ends first. */
function readLine(prompt: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY });
    let answered = false;
    lines.once('line', (line) => {
      answered = true;
      resolve(line);
      lines.close();
    });
    lines.once('close', () => {
      if (!answered) resolve(undefined);
    });
    lines.setPrompt(prompt);
    lines.prompt();
  });
}

const processIo: CliIo = {
  env: process.env,
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
  readLine,
};

/** Runs one command and resolves to the process exit code. */
export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    (argv.length === 0 ? io.err : io.out)(usage());
    return argv.length === 0 ? 2 : 0;
  }
  const found = findCommand(argv);
  if (!found) {
    io.err(`Unknown command: ${argv.join(' ')}\n\n${usage()}`);
    return 2;
  }
  try {
    return (await found.command.run(found.args, io)) ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${found.name}: ${error.message}\nUsage: webhooks ${found.command.usage}`);
      return error.exitCode;
    }
    if (error instanceof CliError || error instanceof ConfigError) {
      io.err(`${found.name}: ${error.message}`);
      return error instanceof CliError ? error.exitCode : 1;
    }
    io.err(`${found.name} failed: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exitCode = 1;
    },
  );
}

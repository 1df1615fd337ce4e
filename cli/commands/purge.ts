import { ApiError, ProjectNotFoundError } from '../../api/http/errors';
import {
  createPurgeStarter,
  purgeCertificate,
  purgeStatus,
  requestPurge,
  type PurgeDeps,
  type PurgeView,
} from '../../api/purges/purges';
import { connectTemporalClient } from '../../common/temporal/connection';
import * as store from '../../db';
import { CliError, UsageError, cliActor, parseCommandArgs, withDb, type CliCommand, type CliIo } from '../command';

/** How often a waiting `project purge` reads the purge's record. */
const WAIT_POLL_MS = 1_000;

/** A refusal of the purge domain (404, 409), printed as the API would word it. */
const asCliError = (error: unknown): unknown => (error instanceof ApiError ? new CliError(error.detail) : error);

/** Runs work with the database and a Temporal client to start the job, closing both. */
async function withPurges<T>(io: CliIo, work: (deps: PurgeDeps) => Promise<T>): Promise<T> {
  return withDb(
    io,
    async (db, config) => {
      const client = await connectTemporalClient(config, { connectTimeout: config.TEMPORAL_CONNECT_TIMEOUT_MS });
      try {
        return await work({ db, start: createPurgeStarter(client, config) });
      } catch (error) {
        throw asCliError(error);
      } finally {
        await client.connection.close();
      }
    },
    // The request's audit row is chained like the API's.
    { temporal: true, audit: true },
  );
}

/** Reads with the database only. */
const readPurge = <T>(io: CliIo, read: Parameters<typeof withDb<T>>[1]) =>
  withDb(io, async (db, config) => {
    try {
      return await read(db, config);
    } catch (error) {
      throw asCliError(error);
    }
  });

/** The operator types the project id again (or passes --yes): a purge cannot be undone. */
async function confirm(io: CliIo, projectId: string): Promise<void> {
  const typed = await io.readLine?.(
    `This destroys everything of project ${projectId} for good (Temporal histories, registration and secrets, ` +
      'contacts, portal links, members, delivery log, data keys). Type the project id again to confirm: ',
  );
  if (typed === undefined) {
    io.err('');
    throw new UsageError('confirm by typing the project id on stdin, or pass --yes');
  }
  if (typed.trim() !== projectId)
    throw new CliError(`Not confirmed: what was typed is not ${projectId}; nothing was purged`);
}

export const projectPurge: CliCommand = {
  usage: 'project purge <projectId> [--yes] [--no-wait]',
  summary:
    "purge a customer's project for good (asks to type the id again; --yes skips): prints the purge's id and status, " +
    'waits for it and prints it as JSON (--no-wait: does not wait); run again, finishes a failed or interrupted one',
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(
      args,
      { yes: { type: 'boolean' }, 'no-wait': { type: 'boolean' } },
      ['projectId'],
    );
    const [projectId] = positionals as [string];
    // An unknown project is said before the operator is asked to confirm anything.
    const known = await readPurge(
      io,
      async (db) =>
        (await store.projectExists(db, projectId)) || (await store.unfinishedPurge(db, projectId)) !== undefined,
    );
    if (!known) throw asCliError(new ProjectNotFoundError(projectId));
    if (!values.yes) await confirm(io, projectId);
    const { purge, outcome } = await withPurges(io, (deps) => requestPurge(deps, cliActor(io), { projectId }));
    io.out(`${purge.id}\t${purge.status}`);
    if (outcome !== 'started')
      io.err(
        outcome === 'resumed'
          ? `purge ${purge.id} had failed: run again from its step ${purge.step}`
          : `purge ${purge.id} is already under way`,
      );
    if (values['no-wait']) return;
    const done = await readPurge(io, async (db) => {
      for (;;) {
        const now: PurgeView = await purgeStatus(db, purge.id);
        if (now.status !== 'pending') return now;
        await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
      }
    });
    io.out(JSON.stringify(done, null, 2));
    if (done.status !== 'completed')
      throw new CliError(`purge ${done.id} failed: ${done.failure ?? 'unknown'}; run the command again to finish it`);
  },
};

export const purgeStatusCommand: CliCommand = {
  usage: 'purge status <purgeId>',
  summary: 'print a purge as JSON: status (pending, completed, failed), step and counts',
  async run(args, io) {
    const [id] = parseCommandArgs(args, {}, ['purgeId']).positionals as [string];
    io.out(JSON.stringify(await readPurge(io, (db) => purgeStatus(db, id)), null, 2));
  },
};

export const purgeCertificateCommand: CliCommand = {
  usage: 'purge certificate <purgeId>',
  summary: "print a completed purge's certificate of destruction as JSON, to hand to the customer",
  async run(args, io) {
    const [id] = parseCommandArgs(args, {}, ['purgeId']).positionals as [string];
    io.out(JSON.stringify(await readPurge(io, (db) => purgeCertificate(db, id)), null, 2));
  },
};

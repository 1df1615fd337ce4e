import { ApiError, InvalidRequestError } from '../../api/http/errors';
import {
  createErasureStarter,
  erasureCertificate,
  erasureStatus,
  requestErasure,
  type ErasureDeps,
} from '../../api/erasures/erasures';
import { validateErasureRequest } from '../../api/erasures/schemas';
import { resolvePersonHashKey } from '../../common/crypto/person-hash-key';
import { connectTemporalClient } from '../../common/temporal/connection';
import { CliError, UsageError, cliActor, parseCommandArgs, withDb, type CliCommand, type CliIo } from '../command';

/** A refusal of the erasure domain (404, 409), printed as the API would word it. */
const asCliError = (error: unknown): unknown => (error instanceof ApiError ? new CliError(error.detail) : error);

/** Runs work with the database, the person hash key and a Temporal client to start the job, closing both. */
async function withErasures<T>(io: CliIo, work: (deps: ErasureDeps) => Promise<T>): Promise<T> {
  return withDb(
    io,
    async (db, config) => {
      const client = await connectTemporalClient(config, { connectTimeout: config.TEMPORAL_CONNECT_TIMEOUT_MS });
      try {
        return await work({
          db,
          personHashKey: resolvePersonHashKey(config),
          start: createErasureStarter(client, config),
        });
      } catch (error) {
        throw asCliError(error);
      } finally {
        await client.connection.close();
      }
    },
    // The request's audit row is chained like the API's; production asks for PERSON_HASH_KEY.
    { temporal: true, audit: true, persons: true },
  );
}

/** Reads one erasure with the database only. */
const readErasure = <T>(io: CliIo, read: Parameters<typeof withDb<T>>[1]) =>
  withDb(io, async (db, config) => {
    try {
      return await read(db, config);
    } catch (error) {
      throw asCliError(error);
    }
  });

export const erasureRequest: CliCommand = {
  usage: 'erasure request <userUUID>',
  summary:
    "erase one person's deliveries (Temporal histories, delivery log rows; open ones once they end); prints the erasure's id and status",
  async run(args, io) {
    const [userUUID] = parseCommandArgs(args, {}, ['userUUID']).positionals as [string];
    try {
      validateErasureRequest({ userUUID });
    } catch (error) {
      if (error instanceof InvalidRequestError) throw new UsageError(`<userUUID> ${error.errors[0]!.detail}`);
      throw error;
    }
    const erasure = await withErasures(io, (deps) => requestErasure(deps, cliActor(io), { userUUID }));
    io.out(`${erasure.id}\t${erasure.status}`);
  },
};

export const erasureStatusCommand: CliCommand = {
  usage: 'erasure status <id>',
  summary: 'print an erasure as JSON: status (pending, waiting-for-open-deliveries, completed, failed) and counts',
  async run(args, io) {
    const [id] = parseCommandArgs(args, {}, ['id']).positionals as [string];
    io.out(JSON.stringify(await readErasure(io, (db) => erasureStatus(db, id)), null, 2));
  },
};

export const erasureCertificateCommand: CliCommand = {
  usage: 'erasure certificate <id>',
  summary: "print a completed erasure's certificate of destruction as JSON, to export and keep",
  async run(args, io) {
    const [id] = parseCommandArgs(args, {}, ['id']).positionals as [string];
    io.out(JSON.stringify(await readErasure(io, (db) => erasureCertificate(db, id)), null, 2));
  },
};

import { ApiError } from '../../api/http/errors';
import { parseListQuery, recoverAndRecord, redeliverAsOperator } from '../../api/deliveries/deliveries';
import { validateRecoverBody } from '../../api/deliveries/schemas';
import { createRedeliveryStarter } from '../../api/deliveries/redelivery';
import { connectTemporalClient } from '../../common/temporal/connection';
import { personHashKeyIfHeld } from '../../common/crypto/person-hash-key';
import { listDeliveries } from '../../db';
import { CliError, UsageError, cliActor, parseCommandArgs, withDb, type CliCommand, type CliIo } from '../command';

/** A refusal of the delivery domain (404, 409, 410), printed as the API would word it. */
function asCliError(error: unknown): unknown {
  return error instanceof ApiError ? new CliError(error.detail) : error;
}

/** Runs work with the database and a Temporal client, closing both. */
async function withRedelivery<T>(
  io: CliIo,
  work: (deps: Parameters<typeof redeliverAsOperator>[0]) => Promise<T>,
): Promise<T> {
  return withDb(
    io,
    async (db, config) => {
      const client = await connectTemporalClient(config);
      try {
        const redelivery = createRedeliveryStarter(client, config, { personHashKey: personHashKeyIfHeld(config) });
        return await work({ db, redelivery, recoverRatePerSecond: config.RECOVER_RATE_PER_SECOND });
      } catch (error) {
        throw asCliError(error);
      } finally {
        await client.connection.close();
      }
    },
    { temporal: true },
  );
}

export const deliveriesList: CliCommand = {
  usage: 'deliveries list <projectId> [--status <status>] [--type <type>] [--since <iso>] [--limit <n>]',
  summary: 'print a project’s deliveries, newest first: id, status, type, attempts, last status, created',
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(
      args,
      { status: { type: 'string' }, type: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' } },
      ['projectId'],
    );
    let filter;
    try {
      filter = parseListQuery({ status: values.status, type: values.type, since: values.since, limit: values.limit });
    } catch (error) {
      throw error instanceof ApiError ? new UsageError(error.detail.replace('The query is invalid: ', '')) : error;
    }
    const rows = await withDb(io, (db) => listDeliveries(db, positionals[0]!, filter));
    for (const row of rows.slice(0, filter.limit))
      io.out(
        [
          row.id,
          row.status,
          row.type,
          row.attempts,
          row.lastStatusCode ?? '-',
          row.createdAt.toISOString(),
          row.lastError ?? '',
        ].join('\t'),
      );
  },
};

export const deliveriesRedeliver: CliCommand = {
  usage: 'deliveries redeliver <projectId> <id>',
  summary: 'send a delivered or failed event again with its X-Webhook-Id; prints the redelivery’s workflow id',
  async run(args, io) {
    const [projectId, id] = parseCommandArgs(args, {}, ['projectId', 'id']).positionals as [string, string];
    const started = await withRedelivery(io, (deps) => redeliverAsOperator(deps, projectId, id, cliActor(io)));
    io.out(started.id);
  },
};

export const deliveriesRecover: CliCommand = {
  usage: 'deliveries recover <projectId> --since <iso> [--until <iso>]',
  summary: 'redeliver every failed delivery created in the window, at RECOVER_RATE_PER_SECOND',
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, { since: { type: 'string' }, until: { type: 'string' } }, [
      'projectId',
    ]);
    if (!values.since) throw new UsageError('--since <iso> is required');
    let window;
    try {
      window = validateRecoverBody({ since: values.since, ...(values.until && { until: values.until }) });
    } catch (error) {
      throw error instanceof ApiError ? new UsageError(error.detail) : error;
    }
    const { count } = await withRedelivery(io, (deps) => recoverAndRecord(deps, positionals[0]!, window, cliActor(io)));
    io.out(`${count} failed deliveries of project ${positionals[0]} redelivering`);
  },
};

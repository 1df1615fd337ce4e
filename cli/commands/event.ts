import { readFile } from 'node:fs/promises';
import { emitWebhookEvent, WebhookEventAlreadyEmittedError } from '../../client/emit';
import { InvalidWebhookEventError } from '../../common/contract/validate';
import { connectTemporalClient } from '../../common/temporal/connection';
import { installTracing } from '../../common/telemetry/tracing-sdk';
import { personHashKeyIfHeld } from '../../common/crypto/person-hash-key';
import { SUBSCRIBABLE_TYPES, type SubscribableType, type EventPayload } from '../../common/contract';
import { CliError, UsageError, commandConfig, parseCommandArgs, type CliCommand } from '../command';

async function readData(data: string): Promise<unknown> {
  let text = data;
  if (data.startsWith('@')) {
    try {
      text = await readFile(data.slice(1), 'utf8');
    } catch (error) {
      throw new CliError(`cannot read ${data.slice(1)}: ${(error as Error).message}`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new CliError(`--data is not valid JSON: ${(error as Error).message}`);
  }
}

export const eventEmit: CliCommand = {
  usage: `event emit <projectId> <${SUBSCRIBABLE_TYPES.join('|')}> --user <uuid> --data <json|@file> [--id <eventId>]`,
  summary: 'start the delivery of one event; prints its workflow id',
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(
      args,
      { user: { type: 'string' }, data: { type: 'string' }, id: { type: 'string' } },
      ['projectId', 'type'],
    );
    const [projectId, type] = positionals as [string, string];
    if (!(SUBSCRIBABLE_TYPES as readonly string[]).includes(type))
      throw new UsageError(`<type> must be one of ${SUBSCRIBABLE_TYPES.join(', ')}`);
    if (!values.user) throw new UsageError('--user <uuid> is required');
    if (!values.data) throw new UsageError('--data <json|@file> is required');
    const payload = await readData(values.data);
    const config = commandConfig(io, { temporal: true });
    const event = {
      projectId,
      webhookType: type as SubscribableType,
      userUUID: values.user,
      payload: payload as EventPayload,
    };
    // The trace starts here when the OTEL_* variables turn tracing on; it is exported before the command returns.
    const tracing = installTracing('webhooks-cli', io.env);
    const client = await connectTemporalClient(config, { connectTimeout: config.TEMPORAL_CONNECT_TIMEOUT_MS });
    try {
      const workflowId = await emitWebhookEvent(client, event, {
        eventId: values.id,
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        personHashKey: personHashKeyIfHeld(config),
      });
      io.out(workflowId);
    } catch (error) {
      if (error instanceof InvalidWebhookEventError) throw new CliError(`${error.message}; nothing was emitted`);
      if (error instanceof WebhookEventAlreadyEmittedError)
        throw new CliError(
          `Event ${error.eventId} was already emitted as workflow ${error.workflowId}; not emitted again`,
        );
      throw error;
    } finally {
      await Promise.allSettled([client.connection.close(), tracing?.flush()]);
    }
  },
};

// The payload key of the history recorded with tracing on (test/worker/tracing.test.ts) and replayed by test/workflows/replay.test.ts:
// a test constant, like the made-up person in that history.
import type { DataConverter } from '@temporalio/common';
import type { Knex } from 'knex';
import { encryptedDataConverter, workerPayloadCodecFromConfig } from '../../common/crypto/payload-codec';
import { dataKeyStore } from '../../db';

/** Its event id: the input is sealed for its workflow id, which a replay reads from the history's start. */
export const TRACED_EVENT_ID = 'traced-retried-fall';

export const TRACED_HISTORY_PAYLOAD_KEYS = `trace-test:${Buffer.alloc(32, 7).toString('base64')}`;

/**
 * The worker's converter for that history; with `db`, the data keys of the database the history was made with (a
 * history the tracing test has just made). The recorded one predates the data keys: its payloads are under the ring.
 */
export const tracedHistoryDataConverter = (db?: Knex): DataConverter =>
  encryptedDataConverter(
    workerPayloadCodecFromConfig(
      {
        PAYLOAD_ENCRYPTION_KEYS: TRACED_HISTORY_PAYLOAD_KEYS,
        NODE_ENV: 'development',
        DATA_DIR: '.data',
        ALLOW_UNENCRYPTED_EVENTS: false,
      },
      undefined,
      db && dataKeyStore(db),
    ),
  );

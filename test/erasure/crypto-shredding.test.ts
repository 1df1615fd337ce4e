// A backup of Temporal's database cannot be edited by an erasure or a purge: what makes it unreadable is the project's
// data key, destroyed by the purge. A copy of the database taken before the purge, opened by a fresh Temporal dev
// server, still holds every history; through the codec, the purged project's inputs no longer decode and another
// project's still do.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { emitWebhookEvent } from '../../client/emit';
import { loadConfig } from '../../common/config';
import { ProjectDataKeys } from '../../common/crypto/data-keys';
import {
  DATA_KEY_ID_METADATA_KEY,
  EncryptionCodec,
  KEY_ID_METADATA_KEY,
  PayloadDecryptionError,
  generatePayloadKey,
  parsePayloadKeyRing,
} from '../../common/crypto/payload-codec';
import { connectTemporalClient } from '../../common/temporal/connection';
import { createPurgeStarter, requestPurge } from '../../api/purges/purges';
import { purgeWorkflowId } from '../../common/purge';
import { dataKeyStore, findPurge, liveProjectDataKey } from '../../db';
import { startWorker } from '../../worker/start';
import { Registrations, captureLogger, fallEvent, newProjectId } from '../support/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';

/** Temporal's SQLite database and the files SQLite keeps beside it (its write-ahead log), copied as a backup is. */
function copyDatabase(from: string, to: string): void {
  for (const suffix of ['', '-wal', '-shm']) if (existsSync(from + suffix)) copyFileSync(from + suffix, to + suffix);
}

describe('crypto-shredding: a purged project’s histories in a backup of Temporal’s database decode no more (Temporal dev server)', function () {
  this.timeout(180_000);
  const folder = mkdtempSync(join(tmpdir(), 'temporal-backup-'));
  const live = join(folder, 'temporal.db');
  const backup = join(folder, 'backup.db');
  const ring = generatePayloadKey();
  let database: TestDatabase;
  let registrations: Registrations;
  let receiver: TestReceiver;
  let env: TestWorkflowEnvironment | undefined;

  before(async () => {
    database = await createTestDatabase();
    registrations = new Registrations(database.db);
    receiver = await startTestReceiver();
  });
  after(async () => {
    await env?.teardown();
    await receiver?.close();
    await database?.destroy();
    rmSync(folder, { recursive: true, force: true });
  });

  const configFor = (address: string, taskQueue: string) =>
    loadConfig(
      {
        DATABASE_URL: database.url,
        TEMPORAL_ADDRESS: address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        WEBHOOK_SECRET_KEY: registrations.key,
        ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
        PAYLOAD_ENCRYPTION_KEYS: ring,
      },
      { database: true },
    );

  /** A codec as a fresh process has it: the ring, and the service database's data keys (nothing cached). */
  const freshCodec = () =>
    new EncryptionCodec(parsePayloadKeyRing(ring), {
      dataKeys: new ProjectDataKeys(parsePayloadKeyRing(ring), dataKeyStore(database.db)),
    });

  /** The start input of a delivery as the history holds it (sealed). */
  async function sealedInput(client: Client, workflowId: string): Promise<Payload> {
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    return history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
  }

  const opened = async (payload: Payload) =>
    defaultPayloadConverter.fromPayload<{ projectId: string; userUUID: string }>(
      (await freshCodec().decode([payload]))[0]!,
    );

  it('a copy taken before the purge (by the real worker) decodes the other project’s inputs and none of the purged one’s', async () => {
    const purged = newProjectId();
    const kept = newProjectId();
    for (const projectId of [purged, kept]) await registrations.register(projectId, receiver.url, ['FALL_DETECTION']);

    // Both projects' events delivered on a dev server whose database is a file.
    env = await createLocalEnvironment({ dbFilename: live });
    const taskQueue = uniqueTaskQueue('shredding');
    const config = configFor(env.address, taskQueue);
    const worker = await startWorker(config, captureLogger().logger);
    const client = await connectTemporalClient(config);
    const workflows: Record<string, string[]> = { [purged]: [], [kept]: [] };
    try {
      for (const projectId of [purged, kept])
        for (let i = 0; i < 2; i++) {
          const workflowId = await emitWebhookEvent(client, fallEvent(projectId), { taskQueue });
          assert.equal((await client.workflow.getHandle(workflowId).result()).status, 'delivered');
          workflows[projectId]!.push(workflowId);
        }
      // Each project's inputs are sealed under its own data key; before the purge, the fresh codec opens both.
      for (const projectId of [purged, kept]) {
        const key = await liveProjectDataKey(database.db, projectId);
        for (const workflowId of workflows[projectId]!) {
          const input = await sealedInput(client, workflowId);
          assert.equal(Buffer.from(input.metadata![DATA_KEY_ID_METADATA_KEY]!).toString(), key?.id);
          assert.equal((await opened(input)).projectId, projectId);
        }
      }
    } finally {
      await client.connection.close();
      await worker.shutdown();
    }
    // The backup: a copy of Temporal's database while its server is stopped.
    await env.teardown();
    env = undefined;
    copyDatabase(live, backup);

    // The purge, on the live database again, by the real worker: its executions deleted, its data key destroyed.
    const destroyedKey = (await liveProjectDataKey(database.db, purged))!.id;
    env = await createLocalEnvironment({ dbFilename: live });
    const after = configFor(env.address, taskQueue);
    const purger = await startWorker(after, captureLogger().logger);
    const operator = await connectTemporalClient(after);
    try {
      const { purge } = await requestPurge(
        { db: database.db, start: createPurgeStarter(operator, after, { lateWritesMs: 0 }) },
        { kind: 'cli', subject: 'ops-test' },
        { projectId: purged },
      );
      const workflow = operator.workflow.getHandle(purgeWorkflowId(purge.id));
      assert.equal((await workflow.result()).status, 'completed');
      assert.deepEqual((await findPurge(database.db, purge.id))?.dataKeysDestroyed, [destroyedKey]);
      // The purge's own input is sealed under the ring, not under the key it destroys: its history stays readable.
      const input = await sealedInput(operator, purgeWorkflowId(purge.id));
      assert.equal(Buffer.from(input.metadata![KEY_ID_METADATA_KEY]!).toString(), parsePayloadKeyRing(ring)[0]!.id);
      assert.equal((await opened(input)).projectId, purged);
    } finally {
      await operator.connection.close();
      await purger.shutdown();
    }
    await env.teardown();
    env = undefined;

    // A fresh dev server on the copy: every history is still there; only the kept project's inputs decode.
    env = await createLocalEnvironment({ dbFilename: backup });
    const reader = await connectTemporalClient(configFor(env.address, taskQueue));
    try {
      for (const workflowId of workflows[kept]!)
        assert.equal((await opened(await sealedInput(reader, workflowId))).projectId, kept);
      for (const workflowId of workflows[purged]!) {
        const input = await sealedInput(reader, workflowId);
        await assert.rejects(
          freshCodec().decode([input]),
          (error: unknown) =>
            error instanceof PayloadDecryptionError &&
            error.message.includes(`data key "${destroyedKey}" of project "${purged}", destroyed`) &&
            !error.message.includes('Pat'),
        );
      }
    } finally {
      await reader.connection.close();
    }
  });
});

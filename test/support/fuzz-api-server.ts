// The API as the fuzzer sees it: a real PostgreSQL (DATABASE_URL, else an embedded one) holding real ids to reach every
// operation past a 404 (a project with a registration and a failed delivery, a spare project to register and delete),
// a completed erasure and purge), a caller who is a member of both and an operator (for /codec, erasures and purges),
// and no Temporal (the test endpoint, redeliver, recover, and requests of an erasure or a purge then answer their
// documented 503). Prints one JSON line: the base URL, a token and the ids.
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { startApi } from '../../api';
import { loadConfig } from '../../common/config';
import { createLogger } from '../../common/telemetry/logger';
import { createSecretBox } from '../../common/crypto/secrets';
import {
  addMember,
  addProject,
  closeErasure,
  closePurge,
  createDb,
  createRegistration,
  createScratchDatabase,
  insertErasure,
  insertPurge,
  markDeliveryFailed,
  migrateToLatest,
  recordDeliveryAttempt,
  recordEndpointFailure,
} from '../../db';
import { startEmbeddedPostgres } from '../../dev/postgres';
import { freePort } from '../../dev/ports';

export const FUZZ_PROJECT = 'fuzz-project';
/** A project without a registration: POST /webhooks/register and DELETE take turns on it. */
export const FUZZ_SPARE_PROJECT = 'fuzz-spare-project';
export const FUZZ_DELIVERY = 'fuzz-delivery-1';
export const FUZZ_USER = 'fuzz-user';
/** A completed erasure and a completed purge (of a project gone since), so their status and certificate are read. */
export const FUZZ_ERASURE = '3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f';
export const FUZZ_PURGE = '8d0a6c4e-2b1f-4e3a-9c5d-7f6e5d4c3b2a';

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-fuzz-'));
  const embedded = process.env.DATABASE_URL
    ? undefined
    : await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
  const scratch = await createScratchDatabase(process.env.DATABASE_URL ?? embedded!.url, 'webhooks_fuzz');
  const db = createDb(scratch.url, { max: 2 });
  await migrateToLatest(db);
  const secretKey = randomBytes(32);
  for (const projectId of [FUZZ_PROJECT, FUZZ_SPARE_PROJECT]) {
    await addProject(db, projectId);
    await addMember(db, projectId, FUZZ_USER);
  }
  await createRegistration(db, createSecretBox(secretKey), {
    projectId: FUZZ_PROJECT,
    url: 'https://receiver.example/hook',
    types: ['FALL_DETECTION', 'VITAL_THRESHOLD'],
  });
  const key = { id: FUZZ_DELIVERY, projectId: FUZZ_PROJECT, type: 'FALL_DETECTION', workflowId: FUZZ_DELIVERY };
  const error = 'Receiver answered HTTP 500';
  await recordDeliveryAttempt(db, key, { runAttempt: 1, statusCode: 500, durationMs: 12, error, delivered: false });
  await recordEndpointFailure(db, FUZZ_PROJECT, error);
  await markDeliveryFailed(db, key, error);
  const requestedBy = { kind: 'cli' } as const;
  await insertErasure(db, { id: FUZZ_ERASURE, personHash: 'a'.repeat(64), requestedBy });
  await closeErasure(db, FUZZ_ERASURE, { status: 'completed' });
  await insertPurge(db, { id: FUZZ_PURGE, projectId: 'fuzz-purged-project', requestedBy });
  await closePurge(db, FUZZ_PURGE, { status: 'completed' });
  await db.destroy();

  const secret = randomBytes(32).toString('hex');
  const config = loadConfig(
    {
      PORT: '0',
      DATABASE_URL: scratch.url,
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      TEMPORAL_CONNECT_TIMEOUT_MS: '200',
      JWT_SECRET: secret,
      WEBHOOK_SECRET_KEY: secretKey.toString('hex'),
      PAYLOAD_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
      OPERATOR_SUBJECTS: FUZZ_USER,
      // Fuzzing reads faster than a person: the read rate would answer most of them 429 before any logic ran.
      READ_CALLS_PER_SECOND: '1000',
      // And writes faster: one subject's write calls would be answered 429 past the per-caller limit.
      AUDITED_WRITES_PER_MINUTE: '1000000',
      // The document's bound of a pause's hours: every hours the schema allows is then accepted.
      PAUSE_MAX_HOURS: '720',
      DATA_DIR: dataDir,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    },
    { database: true, auth: true },
  );
  const api = await startApi(config, createLogger(config.LOG_LEVEL, 'webhooks', process.stderr));
  const token = jwt.sign({ sub: FUZZ_USER }, secret, { algorithm: 'HS256', expiresIn: 3600 });
  const { port } = api.server.address() as AddressInfo;
  const started = {
    url: `http://127.0.0.1:${port}`,
    token,
    projectId: FUZZ_PROJECT,
    spareProjectId: FUZZ_SPARE_PROJECT,
    deliveryId: FUZZ_DELIVERY,
    erasureId: FUZZ_ERASURE,
    purgeId: FUZZ_PURGE,
  };
  process.stdout.write(`${JSON.stringify(started)}\n`);

  const stop = async () => {
    await api.close();
    await scratch.drop();
    await embedded?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const)
    process.once(signal, () => {
      stop().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
}

main().catch((error: unknown) => {
  process.stderr.write(`fuzz API failed to start: ${String(error)}\n`);
  process.exit(1);
});

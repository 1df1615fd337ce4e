// The API as the fuzzer sees it: a real PostgreSQL (DATABASE_URL, else an embedded one), one project with one member,
// and no Temporal (the test endpoint then answers its documented 503). Prints one JSON line: the base URL and a token.
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { startApi } from '../../api';
import { loadConfig } from '../../common/config';
import { createLogger } from '../../common/logger';
import { addMember, addProject, createDb, createScratchDatabase, migrateToLatest } from '../../db';
import { startEmbeddedPostgres } from '../../dev/postgres';
import { freePort } from '../../dev/ports';

export const FUZZ_PROJECT = 'fuzz-project';
export const FUZZ_USER = 'fuzz-user';

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-fuzz-'));
  const embedded = process.env.DATABASE_URL
    ? undefined
    : await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
  const scratch = await createScratchDatabase(process.env.DATABASE_URL ?? embedded!.url, 'webhooks_fuzz');
  const db = createDb(scratch.url, { max: 2 });
  await migrateToLatest(db);
  await addProject(db, FUZZ_PROJECT);
  await addMember(db, FUZZ_PROJECT, FUZZ_USER);
  await db.destroy();

  const secret = randomBytes(32).toString('hex');
  const config = loadConfig(
    {
      PORT: '0',
      DATABASE_URL: scratch.url,
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      TEMPORAL_CONNECT_TIMEOUT_MS: '200',
      JWT_SECRET: secret,
      WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    },
    { database: true, auth: true },
  );
  const api = await startApi(config, createLogger(config.LOG_LEVEL, 'webhooks', process.stderr));
  const token = jwt.sign({ sub: FUZZ_USER }, secret, { algorithm: 'HS256', expiresIn: 3600 });
  const { port } = api.server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}`, token, projectId: FUZZ_PROJECT })}\n`);

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

// The audit trail's cost: register, the test button and a codec decode, each served by the real API
// (createApp) in the bench's process on the run's PostgreSQL, once writing every audit row and once with a writer that
// writes none (AppDeps.auditWriter, which only the bench sets). Rounds alternate the order, so neither variant always
// runs on a warmer database.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import type Koa from 'koa';
import jwt from 'jsonwebtoken';
import type { Knex } from 'knex';
import pino from 'pino';
import { createApp } from '../api/app';
import type { AuditWriter } from '../api/http/audited-actions';
import { EncryptionCodec, parsePayloadKeyRing } from '../common/crypto/payload-codec';
import { createSecretBox } from '../common/crypto/secrets';
import { addMember, addProject, configureAuditTrail, createDb, createRegistration } from '../db';
import { API_CONNECTIONS, apiRegisterDeleteCycle, apiResult, type ApiResult } from './stages';

export type AuditVariant = 'audit' | 'no-audit';
export const AUDIT_OPERATIONS = ['register', 'test', 'decode'] as const;
export type AuditOperation = (typeof AUDIT_OPERATIONS)[number];

export interface AuditStageRow {
  operation: AuditOperation;
  variant: AuditVariant;
  /** Mean over the rounds. */
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Audit rows the variant's calls wrote: one per 2xx with the trail, none without it. */
  auditRows: number;
  rounds: ApiResult[];
}

export interface AuditStageResult {
  seconds: number;
  rounds: number;
  connections: number;
  rows: AuditStageRow[];
  /** Per operation: the requests per second with the rows written, in percent of those without. */
  withRowsPercent: Record<AuditOperation, number>;
}

const MEMBER = 'bench-audit-member';
const OPERATOR = 'bench-audit-operator';
/** The bench's stand-in for the trail's append: writes nothing. */
const writeNothing: AuditWriter = () => Promise.resolve();

async function listen(app: Koa): Promise<{ url: string; server: Server }> {
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * POST /webhooks/test/project/:id, each call on the next project of a pool far larger than the connections: one TEST
 * is in flight per project, and a project's turn comes again only after the whole pool's.
 */
async function testCalls(apiUrl: string, token: string, projectIds: string[], seconds: number): Promise<ApiResult> {
  let next = 0;
  const result = await autocannon({
    url: apiUrl,
    connections: API_CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        setupRequest: (request) => ({
          ...request,
          path: `/webhooks/test/project/${encodeURIComponent(projectIds[next++ % projectIds.length]!)}`,
        }),
      },
    ],
  });
  return apiResult(result, API_CONNECTIONS, seconds);
}

async function decodeCalls(apiUrl: string, token: string, body: string, seconds: number): Promise<ApiResult> {
  const result = await autocannon({
    url: `${apiUrl}/codec/decode`,
    method: 'POST',
    connections: API_CONNECTIONS,
    duration: seconds,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-namespace': 'default' },
    body,
  });
  return apiResult(result, API_CONNECTIONS, seconds);
}

const auditCount = async (db: Knex) => Number((await db('audit_events').count<{ n: string }[]>('* as n'))[0]!.n);

/** The trail's row count once the calls still in the server when autocannon stopped have ended. */
async function settledAuditCount(db: Knex): Promise<number> {
  let count = await auditCount(db);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const again = await auditCount(db);
    if (again === count) return count;
    count = again;
  }
}

export async function auditStage(
  databaseUrl: string,
  options: { seconds: number; rounds: number; log: (message: string) => void },
): Promise<AuditStageResult> {
  const runId = randomBytes(4).toString('hex');
  // The rows this process writes are chained as the API's: under a key of the run's own (no journal).
  configureAuditTrail({ hmacKeys: [{ id: `bench-${runId}`, key: randomBytes(32) }] });
  const jwtSecret = randomBytes(32).toString('hex');
  const secretBox = createSecretBox(randomBytes(32));
  const codec = new EncryptionCodec(parsePayloadKeyRing(`bench:${randomBytes(32).toString('base64')}`));
  // The production pool's size: 10 connections.
  const db = createDb(databaseUrl, { max: 10 });
  const servers: Server[] = [];
  try {
    const project = async (name: string, registered: boolean) => {
      const id = `bench-audit-${runId}-${name}`;
      await addProject(db, id);
      await addMember(db, id, MEMBER);
      if (registered)
        await createRegistration(db, secretBox, {
          projectId: id,
          url: 'https://receiver.example.com/hooks',
          types: ['FALL_DETECTION'],
        });
      return id;
    };
    const variants: AuditVariant[] = ['audit', 'no-audit'];
    const testProjects: Record<AuditVariant, string[]> = { audit: [], 'no-audit': [] };
    for (const variant of variants)
      for (let i = 0; i < 20 * API_CONNECTIONS; i += 1)
        testProjects[variant].push(await project(`${variant}-test-${i}`, true));
    const urls = {} as Record<AuditVariant, string>;
    for (const variant of variants) {
      const app = createApp({
        db,
        secretBox,
        logger: pino({ level: 'silent' }),
        auth: { mode: 'secret', secret: jwtSecret },
        // The API's side of the test button: the send itself (Temporal, the receiver) is the api stage's round trip.
        sendTestEvent: () =>
          Promise.resolve({
            delivered: true,
            statusCode: 200,
            durationMs: 1,
            workflowId: `bench-test-${randomUUID()}`,
          }),
        testEventLimits: { perMinute: 1_000_000, waitMs: 15_000 },
        codec: { codec, operators: { subjects: new Set([OPERATOR]) }, corsOrigins: [] },
        ...(variant === 'no-audit' && { auditWriter: writeNothing }),
      });
      const { url, server } = await listen(app);
      servers.push(server);
      urls[variant] = url;
    }
    const member = jwt.sign({ sub: MEMBER }, jwtSecret, { algorithm: 'HS256', expiresIn: 3600 });
    const operator = jwt.sign({ sub: OPERATOR }, jwtSecret, { algorithm: 'HS256', expiresIn: 3600 });
    const plain = {
      metadata: { encoding: Buffer.from('json/plain').toString('base64') },
      data: Buffer.from(JSON.stringify({ type: 'FALL_DETECTION', patientId: 'bench' })).toString('base64'),
    };
    const encoded = await fetch(`${urls.audit}/codec/encode`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json', 'x-namespace': 'default' },
      body: JSON.stringify({ payloads: [plain] }),
    });
    if (encoded.status !== 200) throw new Error(`codec encode answered ${encoded.status}`);
    const decodeBody = await encoded.text();

    const measured = new Map<string, { rounds: ApiResult[]; auditRows: number }>();
    for (let round = 0; round < options.rounds; round += 1) {
      const order = round % 2 === 0 ? variants : [...variants].reverse();
      for (const operation of AUDIT_OPERATIONS)
        for (const variant of order) {
          options.log(
            `audit: ${operation} ${variant === 'audit' ? 'with' : 'without'} the audit rows, round ${round + 1}`,
          );
          const url = urls[variant];
          const before = await settledAuditCount(db);
          let result: ApiResult;
          if (operation === 'register') {
            const pool: string[] = [];
            for (let i = 0; i < 256; i += 1) pool.push(await project(`${variant}-r${round}-${i}`, false));
            result = await apiRegisterDeleteCycle(url, member, pool, options.seconds);
          } else if (operation === 'test')
            result = await testCalls(url, member, testProjects[variant], options.seconds);
          else result = await decodeCalls(url, operator, decodeBody, options.seconds);
          const key = `${operation}/${variant}`;
          const entry = measured.get(key) ?? { rounds: [], auditRows: 0 };
          entry.rounds.push(result);
          entry.auditRows += (await settledAuditCount(db)) - before;
          measured.set(key, entry);
        }
    }
    const mean = (values: number[]) => Math.round((values.reduce((a, b) => a + b, 0) / values.length) * 10) / 10;
    const rows: AuditStageRow[] = AUDIT_OPERATIONS.flatMap((operation) =>
      variants.map((variant) => {
        const { rounds, auditRows } = measured.get(`${operation}/${variant}`)!;
        return {
          operation,
          variant,
          requestsPerSecond: mean(rounds.map((r) => r.requestsPerSecond)),
          p50Ms: mean(rounds.map((r) => r.p50Ms)),
          p99Ms: mean(rounds.map((r) => r.p99Ms)),
          auditRows,
          rounds,
        };
      }),
    );
    const rate = (operation: AuditOperation, variant: AuditVariant) =>
      rows.find((row) => row.operation === operation && row.variant === variant)!.requestsPerSecond;
    const withRowsPercent = Object.fromEntries(
      AUDIT_OPERATIONS.map((operation) => [
        operation,
        Math.round((rate(operation, 'audit') / Math.max(rate(operation, 'no-audit'), 0.1)) * 1000) / 10,
      ]),
    ) as Record<AuditOperation, number>;
    return { seconds: options.seconds, rounds: options.rounds, connections: API_CONNECTIONS, rows, withRowsPercent };
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    await db.destroy();
  }
}

/** What the stage's figures say is wrong: a call refused, or rows written where none (or one per call) should be. */
export function auditStageProblems(result: AuditStageResult): string[] {
  const problems: string[] = [];
  for (const row of result.rows) {
    const label = `audit ${row.operation} ${row.variant}`;
    const ok = row.rounds.reduce((sum, r) => sum + r.requests - r.non2xx, 0);
    const failed = row.rounds.reduce((sum, r) => sum + r.non2xx + r.errors, 0);
    if (failed) problems.push(`${label}: ${failed} call(s) not answered 2xx`);
    if (row.variant === 'no-audit' && row.auditRows !== 0)
      problems.push(`${label}: ${row.auditRows} audit row(s) written`);
    if (row.variant === 'audit' && row.auditRows < ok)
      problems.push(`${label}: ${row.auditRows} audit rows for ${ok} calls`);
  }
  return problems;
}

import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import pino from 'pino';
import type { ActivityConfig } from '../../activities';
import { createSecretBox, type SecretBox } from '../../common/crypto/secrets';
import type { FallDetectionPayload, SubscribableType, VitalThresholdPayload } from '../../common/contract';
import { addProject, createRegistration, deleteRegistration } from '../../db';

/** Short timeouts and back-offs so retries on a real server take milliseconds. */
export const fastConfig: ActivityConfig = {
  WEBHOOK_TIMEOUT_MS: 1_000,
  ALLOW_PRIVATE_WEBHOOK_URLS: true,
  DELIVERY_INITIAL_INTERVAL_MS: 100,
  DELIVERY_BACKOFF_COEFFICIENT: 1,
  DELIVERY_MAX_INTERVAL_MS: 200,
  DELIVERY_GIVE_UP_AFTER_MS: 60_000,
};

export const USER = '3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f';

export const fallPayload: FallDetectionPayload = {
  userUUID: USER,
  reasons: ['fall'],
  happenedAt: '2025-03-01T08:15:00.000Z',
  email: 'ada@example.com',
  firstName: 'Ada',
  lastName: 'Lovelace',
};

export const vitalPayload: VitalThresholdPayload = {
  triggeredVitals: [
    { vitalType: 'heartrate', badValue: 182, thresholdValue: 150, vital_id: 'v-1', reason: 'high' },
    { vitalType: 'pulseox', badValue: 86, thresholdValue: 90, vital_id: 'v-2', reason: null },
  ],
  userUUID: USER,
  email: 'ada@example.com',
  firstName: 'Ada',
  lastName: 'Lovelace',
};

export const fallEvent = (projectId: string) => ({
  projectId,
  webhookType: 'FALL_DETECTION' as const,
  userUUID: USER,
  payload: fallPayload,
});

/** Registrations written the way the API writes them: the secret sealed with the row's AAD. */
export class Registrations {
  /** The at-rest key, as WEBHOOK_SECRET_KEY would carry it. */
  readonly key = randomBytes(32).toString('hex');
  readonly secretBox: SecretBox = createSecretBox(Buffer.from(this.key, 'hex'));
  constructor(private readonly db: Knex) {}

  async register(projectId: string, url: string, types: SubscribableType[]): Promise<string> {
    await addProject(this.db, projectId);
    const created = await createRegistration(this.db, this.secretBox, { projectId, url, types });
    assert.ok(created, `project ${projectId} already has a registration`);
    return created.secret;
  }

  delete(projectId: string): Promise<boolean> {
    return deleteRegistration(this.db, projectId);
  }
}

export const newProjectId = () => `proj-${randomUUID().slice(0, 8)}`;

/** A pino logger whose lines the test can read. */
export function captureLogger() {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  return { logger, lines, raw };
}

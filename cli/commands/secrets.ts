import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { DEV_SECRET_KEY_FILE, createSecretBox, resolveSecretKeyRing } from '../../common/crypto/secrets';
import { configureAuditTrail, resealRegistrationSecrets, rewrapDataKeys } from '../../db';
import { parsePayloadKeyRing } from '../../common/crypto/payload-codec';
import { auditTrailKeysFromConfig } from '../../common/crypto/audit-keys';
import { CliError, cliActor, type CliCommand, parseCommandArgs, withDb } from '../command';

export const secretsReseal: CliCommand = {
  usage: 'secrets reseal',
  summary:
    'seal every stored webhook secret, previous ones in an overlap too, under the newest WEBHOOK_SECRET_KEYS key',
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    // Warnings (a development key in use) go to stderr, apart from the result.
    const logger = pino({ level: 'warn' }, { write: (line: string) => io.err(line.trimEnd()) });
    const report = await withDb(io, async (db, config) => {
      // A reseal under a key nobody configured would only refuse; it must not leave a new development key behind.
      const devKey = join(config.DATA_DIR, DEV_SECRET_KEY_FILE);
      if (!config.WEBHOOK_SECRET_KEYS && !config.WEBHOOK_SECRET_KEY && !existsSync(devKey))
        throw new CliError(
          `WEBHOOK_SECRET_KEYS is not set and there is no development key (${devKey}): ` +
            'set the key ring the API and workers run with; nothing was resealed',
        );
      const ring = resolveSecretKeyRing(config, logger);
      try {
        // Only now: a refused reseal leaves no development audit key behind either.
        configureAuditTrail(auditTrailKeysFromConfig(config));
        const keyId = ring[0]!.id;
        const audit = { actor: cliActor(io), keyId };
        return { ...(await resealRegistrationSecrets(db, createSecretBox(ring), { audit })), keyId };
      } catch (error) {
        throw new CliError((error as Error).message);
      }
    });
    io.out(`Resealed ${report.resealed} of ${report.total} webhook secrets under key ${report.keyId}`);
  },
};

export const dataKeysRewrap: CliCommand = {
  usage: 'data-keys rewrap',
  summary: "wrap every project's data key under the newest PAYLOAD_ENCRYPTION_KEYS key (before an old key is dropped)",
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    const report = await withDb(io, async (db, config) => {
      if (!config.PAYLOAD_ENCRYPTION_KEYS)
        throw new CliError(
          'PAYLOAD_ENCRYPTION_KEYS is not set: set the ring the API and workers run with; nothing was rewrapped',
        );
      try {
        return await rewrapDataKeys(db, parsePayloadKeyRing(config.PAYLOAD_ENCRYPTION_KEYS));
      } catch (error) {
        throw new CliError((error as Error).message);
      }
    });
    io.out(`Rewrapped ${report.rewrapped} project data keys under key ${report.keyId}`);
    // Keys wrapped by a ring key this ring lacks: whoever holds that key must rewrap them before it is dropped.
    for (const key of report.unopened) io.err(`left as it was: ${key.reason}`);
  },
};

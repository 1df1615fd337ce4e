import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { DEV_SECRET_KEY_FILE, createSecretBox, resolveSecretKeyRing } from '../../common/crypto/secrets';
import { configureAuditTrail, resealRegistrationSecrets } from '../../db';
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

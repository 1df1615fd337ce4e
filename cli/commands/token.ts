import jwt from 'jsonwebtoken';
import { CliError, UsageError, type CliCommand, commandConfig, parseCommandArgs } from '../command';
import { resolveJwtSecret } from '../jwt-secret';

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
const MAX_TTL_SECONDS = 30 * 86400;

/** "90s", "15m", "1h", "7d" in seconds. */
export function parseTtl(text: string): number {
  const match = /^(\d{1,7})([smhd])$/.exec(text);
  const seconds = match ? Number(match[1]) * UNIT_SECONDS[match[2]!]! : NaN;
  if (!(seconds > 0 && seconds <= MAX_TTL_SECONDS))
    throw new UsageError(`--ttl must be a duration like 90s, 15m, 1h or 7d, at most 30d (got ${text})`);
  return seconds;
}

export const token: CliCommand = {
  usage: 'token <userId> [--ttl 1h]',
  summary: 'print a development HS256 bearer token for a user (needs JWT_SECRET)',
  // eslint-disable-next-line @typescript-eslint/require-await
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, { ttl: { type: 'string', default: '1h' } }, ['userId']);
    const expiresIn = parseTtl(values.ttl);
    const config = commandConfig(io);
    if (config.JWT_JWKS_URI)
      throw new CliError('JWT_JWKS_URI is set: tokens come from the identity provider, not this CLI');
    const secret = resolveJwtSecret(config);
    const signed = jwt.sign({ sub: positionals[0] }, secret, {
      algorithm: 'HS256',
      expiresIn,
      ...(config.JWT_ISSUER && { issuer: config.JWT_ISSUER }),
      ...(config.JWT_AUDIENCE && { audience: config.JWT_AUDIENCE }),
    });
    io.err(`Token for ${positionals[0]}, valid for ${values.ttl}:`);
    io.out(signed);
  },
};

import type { Config } from '../common/config';
import { devJwtSecret } from '../dev/stack';
import { CliError } from './command';

/**
 * The HS256 key development tokens are signed with: JWT_SECRET, or outside production the development secret
 * `npm start` keeps in DATA_DIR, so tokens minted here work against it.
 */
export function resolveJwtSecret(
  config: Pick<Config, 'JWT_SECRET' | 'JWT_JWKS_URI' | 'NODE_ENV' | 'DATA_DIR'>,
): string {
  const secret = devJwtSecret(config);
  if (secret) return secret;
  throw new CliError(
    'JWT_SECRET is not set: the token command signs development HS256 tokens with it (32+ characters)',
  );
}

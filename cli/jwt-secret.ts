import type { Config } from '../common/config';
import { CliError } from './command';

/** The HS256 key development tokens are signed with; the API must verify with the same JWT_SECRET. */
export function resolveJwtSecret(config: Pick<Config, 'JWT_SECRET'>): string {
  if (config.JWT_SECRET) return config.JWT_SECRET;
  throw new CliError(
    'JWT_SECRET is not set: the token command signs development HS256 tokens with it (32+ characters)',
  );
}

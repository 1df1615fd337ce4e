// Ids that travel in URLs, workflow ids, search attributes and HTTP headers: one safe alphabet for all of them.
import { MAX_PROJECT_ID_LENGTH } from './events';

/**
 * Letters, digits, `.`, `_`, `:` and `-`, starting with a letter or digit: ASCII only, so an id never breaks a
 * header (undici refuses anything outside Latin-1), a database text column (no NUL) or a URL path.
 */
export const SAFE_ID_PATTERN = `^[A-Za-z0-9][A-Za-z0-9._:-]{0,${MAX_PROJECT_ID_LENGTH - 1}}$`;

/** How the safe alphabet reads in an error message. */
export const SAFE_ID_RULE = `1 to ${MAX_PROJECT_ID_LENGTH} characters from A-Z a-z 0-9 . _ : - starting with a letter or digit`;

const SAFE_ID = new RegExp(SAFE_ID_PATTERN);

/** Whether a project id (or event id) is in the safe alphabet and length. */
export const isSafeId = (id: unknown): id is string => typeof id === 'string' && SAFE_ID.test(id);

// The audit trail's keys in tests, and the person hash key: fixed, so every process a test starts chains and signs as
// this one verifies, and hashes a person as this one does.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditTrailKeysFromConfig } from '../../common/crypto/audit-keys';
import { configureAuditTrail } from '../../db/audit/chain';

export const TEST_AUDIT_HMAC_KEYS = `test-a1:${'5a'.repeat(32)}`;
export const TEST_AUDIT_SIGNING_KEY = `test-s1:${Buffer.alloc(32, 0x21).toString('base64')}`;
/** PERSON_HASH_KEY of a production-configured process of a test. */
export const TEST_PERSON_HASH_KEY = '3c'.repeat(32);

/**
 * The variables a production-configured process of a test needs beside the payload and secret keys: the audit keys,
 * with a digest directory of its own, and the person hash key.
 */
export function testAuditEnv(digestDir = mkdtempSync(join(tmpdir(), 'webhooks-audit-'))): Record<string, string> {
  return {
    AUDIT_HMAC_KEYS: TEST_AUDIT_HMAC_KEYS,
    AUDIT_SIGNING_KEY: TEST_AUDIT_SIGNING_KEY,
    AUDIT_DIGEST_DIR: digestDir,
    PERSON_HASH_KEY: TEST_PERSON_HASH_KEY,
  };
}

/** Installs the test keys in this process, with `digestDir` (none: rows are chained, no journal is written). */
export function useTestAuditTrail(digestDir?: string, options: { replace?: boolean } = {}): void {
  const keys = auditTrailKeysFromConfig({
    NODE_ENV: 'production',
    DATA_DIR: '.data',
    AUDIT_HMAC_KEYS: TEST_AUDIT_HMAC_KEYS,
    AUDIT_SIGNING_KEY: TEST_AUDIT_SIGNING_KEY,
    AUDIT_DIGEST_DIR: digestDir ?? tmpdir(),
  });
  configureAuditTrail({ ...keys, ...(digestDir === undefined && { digestDir: undefined }), ...options });
}

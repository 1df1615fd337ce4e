// @ts-check
// Mutation testing (npm run test:mutation, docs/development.md#mutation-testing): StrykerJS over the modules whose
// logic is pure or database-only, with the unit and database test files that cover them.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'mocha',
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'perTest',
  mutate: [
    'activities/retry-after.ts',
    'common/signature.ts',
    'activities/ssrf.ts',
    'common/webhook-url.ts',
    'common/config.ts',
    'common/secrets.ts',
    'common/payload-codec.ts',
    'common/log-redaction.ts',
    'api/delivery-query.ts',
    'api/delivery-schemas.ts',
    'api/test-limits.ts',
    'db/send-limits.ts',
    'db/breakers.ts',
    'activities/breaker.ts',
    'db/secret-rotation.ts',
    'db/secret-reseal.ts',
  ],
  mochaOptions: {
    spec: [
      'test/retry-after.test.ts',
      'test/signature.test.ts',
      'test/standard-webhooks.test.ts',
      'test/ssrf.test.ts',
      'test/egress-proxy.test.ts',
      'test/custom-headers.test.ts',
      'test/webhook-url.test.ts',
      'test/properties.test.ts',
      'test/config.test.ts',
      'test/secrets.test.ts',
      'test/secret-keys.test.ts',
      'test/payload-codec.test.ts',
      'test/log-redaction.test.ts',
      'test/delivery-cursor.test.ts',
      'test/test-endpoint-limits.test.ts',
      'test/send-limits.test.ts',
      'test/redelivery-limits.test.ts',
      'test/test-slot-release.test.ts',
      'test/breaker-state.test.ts',
      'test/breaker-attempts.test.ts',
      'test/breaker.test.ts',
      'test/secret-rotation-store.test.ts',
    ],
    // tsx compiles the instrumented TypeScript in Stryker's sandbox as it does in npm test.
    require: ['tsx/cjs', 'test/support/global-fixtures.ts'],
    // Suites on a Temporal server would start one per mutant, and the test that starts the API as a process can kill
    // no mutant in this one: they are left to npm test.
    grep: '^(?!.*(Temporal dev server|time-skipping|stops the API server at start-up))',
  },
  // A full run takes about 42 min on a quiet 2-core machine: runs reuse the committed results of the mutants
  // and tests that did not change, so only changed code and tests are tried again.
  incremental: true,
  incrementalFile: 'stryker-incremental.json',
  ignorePatterns: ['dist', '.data', 'bench/results', '.schemathesis', 'reports', 'stryker-incremental.json'],
  timeoutMS: 20_000,
  concurrency: 2,
  thresholds: { high: 90, low: 80, break: 80 },
  reporters: ['clear-text', 'progress', 'html', 'json'],
  tempDirName: '.stryker-tmp',
};

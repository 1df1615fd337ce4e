// Mocha global fixtures: run once for the whole test run.
import { useTestAuditTrail } from './audit-keys';

export { mochaGlobalTeardown } from './postgres';

// Code a test drives in process (createApp, activities, db functions) writes audit rows: chained with the test keys.
useTestAuditTrail();

import type { Knex } from 'knex';
import * as initial from './001_initial';
import * as secretRotation from './002_secret_rotation';
import * as deliveryLog from './003_delivery_log';
import * as circuitBreaker from './004_circuit_breaker';
import * as breakerWaiters from './005_breaker_waiters';
import * as waiterLeases from './006_waiter_leases';
import * as sendLimits from './007_send_limits';
import * as portalLinks from './008_portal_links';
import * as deliveryRun from './009_delivery_run';
import * as deliveryLogIndexes from './010_delivery_log_indexes';
import * as auditEvents from './011_audit_events';
import * as customHeaders from './012_custom_headers';
import * as pause from './013_pause';
import * as clientCertificates from './014_client_certificates';
import * as notices from './015_notices';
import * as auditFailedOutcome from './016_audit_failed_outcome';
import * as waiterHandover from './017_waiter_handover';
import * as portalLinkCount from './018_portal_link_count';
import * as pauseNotices from './019_pause_notices';
import * as auditKeyedChain from './020_audit_keyed_chain';
import * as personHash from './021_person_hash';
import * as erasures from './022_erasures';
import * as projectDataKeys from './023_project_data_keys';
import * as purges from './024_purges';
import * as signingKeys from './025_signing_keys';
import * as oauth from './026_oauth';
import * as rateLimits from './027_rate_limits';
import * as gone from './028_gone';
import * as partitionedDeliveryLog from './029_partitioned_delivery_log';

// Named in code rather than read from disk, so the same names hold under tsx and compiled JavaScript.
const migrations: Record<string, Knex.Migration> = {
  '001_initial': initial,
  '002_secret_rotation': secretRotation,
  '003_delivery_log': deliveryLog,
  '004_circuit_breaker': circuitBreaker,
  '005_breaker_waiters': breakerWaiters,
  '006_waiter_leases': waiterLeases,
  '007_send_limits': sendLimits,
  '008_portal_links': portalLinks,
  '009_delivery_run': deliveryRun,
  '010_delivery_log_indexes': deliveryLogIndexes,
  '011_audit_events': auditEvents,
  '012_custom_headers': customHeaders,
  '013_pause': pause,
  '014_client_certificates': clientCertificates,
  '015_notices': notices,
  '016_audit_failed_outcome': auditFailedOutcome,
  '017_waiter_handover': waiterHandover,
  '018_portal_link_count': portalLinkCount,
  '019_pause_notices': pauseNotices,
  '020_audit_keyed_chain': auditKeyedChain,
  '021_person_hash': personHash,
  '022_erasures': erasures,
  '023_project_data_keys': projectDataKeys,
  '024_purges': purges,
  '025_signing_keys': signingKeys,
  '026_oauth': oauth,
  '027_rate_limits': rateLimits,
  '028_gone': gone,
  '029_partitioned_delivery_log': partitionedDeliveryLog,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: () => Promise.resolve(Object.keys(migrations)),
  getMigrationName: (name) => name,
  getMigration: (name) => Promise.resolve(migrations[name] as Knex.Migration),
};

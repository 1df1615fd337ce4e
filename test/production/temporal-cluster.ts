// The Temporal server as a cluster (docker-compose.cluster.yml), started natively: one process per service, each
// with its own ports on 127.0.0.1, two frontends, two history hosts sharing the shards, two matching hosts, the
// internal frontend and the worker service, finding each other through the shared database's cluster_membership.
// Clients reach the frontends through Debian's HAProxy in TCP mode: TLS passes through, so mTLS stays end to end.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createDb } from '../../db';
import { freePort } from '../../dev/ports';
import {
  ServiceProcess,
  freeLowPort,
  freeTemporalPorts,
  namespaceSetupEnvironment,
  root,
  schemaEnvironment,
  temporalCli,
  temporalServerEnvironment,
  type Certificates,
  type OAuthClient,
  type PostgresServer,
  type TemporalAuth,
  type TemporalDatabases,
  type TemporalPorts,
  type TemporalService,
} from './topology';

const run = promisify(execFile);

/** The hosts, by name, and the one service each runs. */
export const CLUSTER_HOSTS = {
  'history-1': 'history',
  'history-2': 'history',
  'matching-1': 'matching',
  'matching-2': 'matching',
  'internal-frontend': 'internal-frontend',
  worker: 'worker',
  'frontend-1': 'frontend',
  'frontend-2': 'frontend',
} as const satisfies Record<string, TemporalService>;
export type ClusterHostName = keyof typeof CLUSTER_HOSTS;

/** More than one shard per history host, so a lost host's shards move to the survivor. */
export const CLUSTER_HISTORY_SHARDS = 8;

/**
 * Each host's PostgreSQL pools: eight hosts with the template's 20 + 10 would pass the test server's 100 connections
 * (a restarted host then finds none free); history and matching, the busy ones, get the most.
 */
const SQL_CONNECTIONS: Record<TemporalService, { main: number; visibility: number }> = {
  history: { main: 10, visibility: 2 },
  matching: { main: 6, visibility: 2 },
  frontend: { main: 3, visibility: 3 },
  'internal-frontend': { main: 2, visibility: 2 },
  worker: { main: 2, visibility: 2 },
};

/** The template's port variables of each service: a second host of a service gets its own values of these. */
const PORT_VARIABLES: Record<TemporalService, (keyof TemporalPorts)[]> = {
  frontend: ['FRONTEND_GRPC_PORT', 'FRONTEND_HTTP_PORT', 'FRONTEND_MEMBERSHIP_PORT'],
  'internal-frontend': [
    'INTERNAL_FRONTEND_GRPC_PORT',
    'INTERNAL_FRONTEND_HTTP_PORT',
    'INTERNAL_FRONTEND_MEMBERSHIP_PORT',
  ],
  history: ['HISTORY_GRPC_PORT', 'HISTORY_MEMBERSHIP_PORT'],
  matching: ['MATCHING_GRPC_PORT', 'MATCHING_MEMBERSHIP_PORT'],
  worker: ['WORKER_GRPC_PORT', 'WORKER_MEMBERSHIP_PORT'],
};

export interface ClusterHost {
  name: ClusterHostName;
  service: TemporalService;
  ports: TemporalPorts;
  /** The gRPC port this host serves (frontends: what the balancer forwards to). */
  grpcPort: string;
  membershipPort: string;
  process: ServiceProcess;
}

export interface TemporalCluster {
  /** The balancer's address: what every client dials. */
  address: string;
  hosts: Record<ClusterHostName, ClusterHost>;
  balancer: ServiceProcess;
  /** The ids of the live members at this host's membership port (a restarted host joins under a new id). */
  memberIds(host: ClusterHostName): Promise<string[]>;
  kill(): Promise<void>;
  dropDatabases(): Promise<void>;
}

/** The cluster on its own databases, mTLS on, namespace and search attributes registered through the balancer. */
export async function startTemporalCluster(
  serverDir: string,
  pg: PostgresServer,
  certs: Certificates,
  auth: TemporalAuth & { admin: OAuthClient },
): Promise<TemporalCluster> {
  const suffix = randomBytes(4).toString('hex');
  const databases = { DBNAME: `temporal_prod_${suffix}`, VISIBILITY_DBNAME: `temporal_prod_${suffix}_visibility` };
  const sqlEnv = { ...process.env, ...schemaEnvironment(pg, databases), TEMPORAL_SQL_TOOL: join(serverDir, 'sql') };
  await run('sh', [join(root, 'deploy', 'temporal-schema.sh')], { env: sqlEnv });
  const dropDatabases = async () => {
    for (const db of Object.values(databases))
      await run(join(serverDir, 'sql'), ['--db', db, 'drop-database', '--force'], { env: sqlEnv }).catch(
        () => undefined,
      );
  };
  try {
    return { ...(await startOnFreePorts(serverDir, pg, databases, certs, auth)), dropDatabases };
  } catch (error) {
    // A port picked free was taken before a host bound it (other processes share the machine): once more, on other
    // ports, with the same databases.
    if (!/exited/.test((error as Error).message)) throw error;
    return { ...(await startOnFreePorts(serverDir, pg, databases, certs, auth)), dropDatabases };
  }
}

async function startOnFreePorts(
  serverDir: string,
  pg: PostgresServer,
  databases: TemporalDatabases,
  certs: Certificates,
  auth: TemporalAuth & { admin: OAuthClient },
): Promise<Omit<TemporalCluster, 'dropDatabases'>> {
  // Every host reads the same ports for the services it does not run (the first host of each service's), and its
  // own for the one it runs.
  const shared = await freeTemporalPorts();
  const seen = new Set<TemporalService>();
  const hosts = {} as Record<ClusterHostName, ClusterHost>;
  for (const [name, service] of Object.entries(CLUSTER_HOSTS) as [ClusterHostName, TemporalService][]) {
    const ports = { ...shared };
    if (seen.has(service))
      for (const variable of PORT_VARIABLES[service]) ports[variable] = String(await freeLowPort());
    seen.add(service);
    const [grpc, membership] = [PORT_VARIABLES[service][0]!, PORT_VARIABLES[service].at(-1)!];
    const env = temporalServerEnvironment(pg, databases, certs, ports, auth, {
      services: [service],
      historyShards: CLUSTER_HISTORY_SHARDS,
      sqlConnections: SQL_CONNECTIONS[service],
    });
    hosts[name] = {
      name,
      service,
      ports,
      grpcPort: ports[grpc],
      membershipPort: ports[membership],
      process: new ServiceProcess(`temporal ${name}`, join(serverDir, 'server'), ['start'], env, () => true),
    };
  }
  const all = Object.values(hosts);
  const membershipDb = createDb(
    `postgres://${encodeURIComponent(pg.user)}:${encodeURIComponent(pg.password)}@${pg.host}:${pg.port}/${databases.DBNAME}`,
    { max: 1 },
  );
  const memberIds = async (host: ClusterHost) => {
    const { rows } = await membershipDb.raw<{ rows: { id: string }[] }>(
      `SELECT encode(host_id, 'hex') AS id FROM cluster_membership
        WHERE rpc_port IN (?, ?) AND record_expiry > now() AT TIME ZONE 'UTC'`,
      [Number(host.membershipPort), Number(host.grpcPort)],
    );
    return rows.map((row) => row.id);
  };
  // One host at a time, each until it has joined: every host saves the cluster's metadata as it starts, and hosts
  // starting together on a fresh database lose that write to each other ("SaveClusterMetadata encountered version
  // mismatch") and exit.
  try {
    for (const host of all) {
      await host.process.start();
      const joined = Date.now();
      while ((await memberIds(host)).length === 0) {
        const child = host.process.process?.child;
        if (child && (child.exitCode !== null || child.signalCode !== null)) assert.fail(`${host.name} exited`);
        if (Date.now() - joined > 60_000) assert.fail(`${host.name} did not join the cluster within 60 s`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    const outputs = all.map((h) => `--- ${h.process.name}\n${h.process.output().slice(-1_500)}`);
    await Promise.allSettled(all.map((host) => host.process.kill()));
    await membershipDb.destroy();
    throw new Error(`the Temporal cluster did not come up: ${(error as Error).message}\n${outputs.join('\n')}`);
  }
  const frontends = all.filter((host) => host.service === 'frontend');
  const balancer = await startBalancer(frontends);
  const address = `127.0.0.1:${balancer.env.PORT}`;
  const kill = async () => {
    await Promise.allSettled([balancer, ...all.map((host) => host.process)].map((p) => p.kill()));
    rmSync(balancer.env.DIR!, { recursive: true, force: true });
  };
  try {
    const exited = Promise.race(
      [balancer, ...all.map((host) => host.process)].map((service) =>
        service.process!.exited.then(() => assert.fail(`${service.name} exited`)),
      ),
    );
    exited.catch(() => undefined);
    await Promise.race([
      exited,
      run('sh', [join(root, 'deploy', 'temporal-namespace.sh')], {
        env: {
          ...process.env,
          ...namespaceSetupEnvironment(address, certs, auth.admin),
          CURL_CA_BUNDLE: auth.jwksCa,
          TEMPORAL_CLI: temporalCli(),
        },
        timeout: 180_000,
      }),
    ]);
  } catch (error) {
    const outputs = [balancer, ...all.map((h) => h.process)].map((s) => `--- ${s.name}\n${s.output().slice(-1_500)}`);
    await kill();
    await membershipDb.destroy();
    throw new Error(`the Temporal cluster did not come up: ${(error as Error).message}\n${outputs.join('\n')}`);
  }
  return {
    address,
    hosts,
    balancer,
    memberIds: (name) => memberIds(hosts[name]),
    async kill() {
      await membershipDb.destroy();
      await kill();
    },
  };
}

/**
 * HAProxy in TCP mode in front of the frontends: the TLS handshake passes through (clients verify the frontend's
 * certificate and present theirs), a connect check every second per frontend, and a dead frontend's connections closed
 * at once so clients reconnect to the survivor. gRPC keeps a connection open: balancing is per connection.
 */
async function startBalancer(frontends: ClusterHost[]): Promise<ServiceProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-haproxy-'));
  const port = await freePort();
  const config = join(dir, 'haproxy.cfg');
  writeFileSync(config, haproxyConfig(`127.0.0.1:${port}`, frontends, join(dir, 'stats.sock')));
  const binary = process.env.HAPROXY_PATH ?? (existsSync('/usr/sbin/haproxy') ? '/usr/sbin/haproxy' : 'haproxy');
  // PORT and DIR are not read by HAProxy: they keep where it listens, and what to remove, with the process.
  const balancer = new ServiceProcess(
    'haproxy',
    binary,
    ['-db', '-f', config],
    { PORT: String(port), DIR: dir },
    () => true,
  );
  await balancer.start();
  const deadline = Date.now() + 30_000;
  while (!(await accepts(port))) {
    if (balancer.process!.child.exitCode !== null)
      assert.fail(`haproxy exited (scripts/ensure-haproxy.sh installs it): ${balancer.output()}`);
    if (Date.now() > deadline) assert.fail(`haproxy did not listen on ${port}: ${balancer.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return balancer;
}

/** The balancer's configuration (docs/operators.md, "The Temporal cluster"; deploy/haproxy/haproxy.cfg). */
export const haproxyConfig = (
  bind: string,
  frontends: { name: string; grpcPort: string }[],
  statsSocket?: string,
): string =>
  [
    'global',
    '  log stdout format raw local0 notice',
    // The suite reads each frontend's current sessions here: which clients' connections a loss cut.
    ...(statsSocket ? [`  stats socket ${statsSocket} mode 600 level user`] : []),
    '  maxconn 4096',
    'defaults',
    '  mode tcp',
    '  log global',
    '  timeout connect 2s',
    '  timeout client 1h',
    '  timeout server 1h',
    '  retries 2',
    '  option redispatch',
    'frontend temporal',
    `  bind ${bind}`,
    '  default_backend temporal-frontends',
    'backend temporal-frontends',
    '  balance leastconn',
    '  default-server check inter 1s fall 1 rise 2 on-marked-down shutdown-sessions',
    ...frontends.map((f) => `  server ${f.name} 127.0.0.1:${f.grpcPort}`),
    '',
  ].join('\n');

/** Each frontend's current client connections through the balancer (HAProxy's `show stat`, column scur). */
export function balancerSessions(balancer: ServiceProcess): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const socket = connect(join(balancer.env.DIR!, 'stats.sock'));
    let csv = '';
    socket.on('data', (chunk: Buffer) => (csv += chunk.toString()));
    socket.once('error', reject);
    socket.once('connect', () => socket.write('show stat\n'));
    socket.once('end', () => {
      const [header, ...rows] = csv.trim().split('\n');
      const columns = header!.replace(/^# /, '').split(',');
      const [pxname, svname, scur] = ['pxname', 'svname', 'scur'].map((name) => columns.indexOf(name));
      resolve(
        Object.fromEntries(
          rows
            .map((row) => row.split(','))
            .filter((cells) => cells[pxname!] === 'temporal-frontends' && cells[svname!]!.startsWith('frontend-'))
            .map((cells) => [cells[svname!]!, Number(cells[scur!])]),
        ),
      );
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

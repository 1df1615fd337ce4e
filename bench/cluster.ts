// `--engine cluster`: the delivery load against the real Temporal server as the production suite runs it (the cluster
// of test/production/temporal-cluster.ts: 2 frontends behind HAProxy, 2 history hosts sharing 8 shards, 2 matching
// hosts, the internal frontend and the worker service), with mTLS and the authorizer on, so the per-delivery figures
// are those of the shape docs/capacity.md scales. Its databases and the service's live in one embedded PostgreSQL
// (the bench measures each database's share of it); the identity provider issues the workers' and the bench's tokens.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import pino from 'pino';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import type { Config } from '../common/config';
import { startDevStack } from '../dev/stack';
import { freePort } from '../dev/ports';
import { startIdentityProvider } from '../test/production/identity-provider';
import { CLUSTER_HISTORY_SHARDS, startTemporalCluster } from '../test/production/temporal-cluster';
import {
  ensureTemporalServer,
  makeCertificates,
  oauthEnvironment,
  postgresServerOf,
  type OAuthClient,
} from '../test/production/topology';

const TEMPORAL_RESOURCE = 'urn:webhooks:temporal';

/** One process of the Temporal server: its host name and the service it runs (summed per service in the report). */
export interface TemporalProcess {
  name: string;
  service: string;
  pid: number;
}

export interface ClusterStack {
  databaseUrl: string;
  temporalAddress: string;
  postgresPid?: number;
  temporalProcesses: TemporalProcess[];
  historyShards: number;
  /** What the worker, the API and the bench's own client add to their environment to reach the cluster. */
  clientEnv: Record<string, string>;
  stop(): Promise<void>;
}

export async function startClusterStack(options: { dataDir: string; config: Config }): Promise<ClusterStack> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const step of stops.reverse()) await step().catch(() => undefined);
  };
  try {
    // The embedded PostgreSQL alone: a TEMPORAL_ADDRESS keeps the dev stack from starting its dev server.
    const devStack = await startDevStack({
      config: { ...options.config, NODE_ENV: 'development', DATA_DIR: options.dataDir, TEMPORAL_ADDRESS: 'cluster' },
      logger: pino({ level: 'silent' }),
      env: { ...process.env, DEV_POSTGRES_PORT: String(await freePort()) },
    });
    stops.push(() => devStack.stop());
    const databaseUrl = devStack.env.DATABASE_URL;
    if (!databaseUrl) throw new Error('--engine cluster starts its own PostgreSQL: unset DATABASE_URL');
    const serverDir = ensureTemporalServer();
    const certs = await makeCertificates(['temporal'], ['webhooks', 'admin-tools']);
    const providerCerts = await makeCertificates(['receiver'], [], 'receivers-ca');
    stops.push(() => {
      for (const made of [certs, providerCerts]) rmSync(made.dir, { recursive: true, force: true });
      return Promise.resolve();
    });
    // The bench's own token fetches reach the provider as the services do with NODE_EXTRA_CA_CERTS.
    const dispatcher = getGlobalDispatcher();
    setGlobalDispatcher(
      new Agent({ connect: { ca: [...rootCertificates, readFileSync(providerCerts.internodeCa, 'utf8')] } }),
    );
    stops.push(() => Promise.resolve(setGlobalDispatcher(dispatcher)));
    const clients = {
      webhooks: { clientId: 'webhooks', clientSecret: randomBytes(16).toString('hex'), permissions: ['default:write'] },
      'admin-tools': {
        clientId: 'admin-tools',
        clientSecret: randomBytes(16).toString('hex'),
        permissions: ['default:admin'],
      },
    };
    const idp = await startIdentityProvider({
      tls: {
        key: readFileSync(providerCerts.of('receiver').key),
        cert: readFileSync(providerCerts.of('receiver').cert),
        ca: readFileSync(providerCerts.internodeCa),
      },
      people: [],
      processes: Object.values(clients),
      // An hour: no renewal falls inside a stage.
      accessTokenSeconds: 3600,
      temporalResource: TEMPORAL_RESOURCE,
      apiResource: 'urn:webhooks:api',
    });
    stops.push(() => idp.close());
    const oauth = (clientId: keyof typeof clients): OAuthClient => ({
      tokenUrl: idp.tokenUrl,
      clientId,
      clientSecret: clients[clientId].clientSecret,
      resource: TEMPORAL_RESOURCE,
    });
    const cluster = await startTemporalCluster(serverDir, postgresServerOf(databaseUrl), certs, {
      jwksUri: idp.jwksUri,
      jwksCa: providerCerts.internodeCa,
      admin: oauth('admin-tools'),
    });
    stops.push(() => cluster.kill());
    const temporalProcesses: TemporalProcess[] = Object.values(cluster.hosts).map((host) => ({
      name: `temporal ${host.name}`,
      service: host.service,
      pid: host.process.process!.child.pid!,
    }));
    temporalProcesses.push({ name: 'haproxy', service: 'haproxy', pid: cluster.balancer.process!.child.pid! });
    return {
      databaseUrl,
      temporalAddress: cluster.address,
      postgresPid: devStack.pids.postgres,
      temporalProcesses,
      historyShards: CLUSTER_HISTORY_SHARDS,
      clientEnv: {
        TEMPORAL_TLS_CA_PATH: certs.internodeCa,
        TEMPORAL_TLS_CERT_PATH: certs.of('webhooks').cert,
        TEMPORAL_TLS_KEY_PATH: certs.of('webhooks').key,
        TEMPORAL_TLS_SERVER_NAME: 'temporal',
        ...oauthEnvironment(oauth('webhooks')),
        NODE_EXTRA_CA_CERTS: providerCerts.internodeCa,
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

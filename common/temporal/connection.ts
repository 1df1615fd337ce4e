import { readFileSync } from 'node:fs';
import {
  Client,
  Connection,
  type ClientOptions,
  type ConnectionLike,
  type ConnectionOptions,
} from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import type { Config } from '../config';
import type { PayloadCodec } from '@temporalio/common';
import { encryptedDataConverter, payloadCodecFromConfig } from '../crypto/payload-codec';
import { fetchClientCredentialsToken, startTokenRefresher, type TokenRefresher, type TokenSettings } from './token';
import { tracingEnabled } from '../telemetry/tracing';
import { createDb, dataKeyStore } from '../../db';

type TemporalSettings = Pick<
  Config,
  | 'TEMPORAL_ADDRESS'
  | 'TEMPORAL_API_KEY'
  | 'TEMPORAL_TLS_CERT_PATH'
  | 'TEMPORAL_TLS_KEY_PATH'
  | 'TEMPORAL_TLS_CA_PATH'
  | 'TEMPORAL_TLS_SERVER_NAME'
>;

/**
 * Connection options for the configured Temporal (TLS and API key optional, for a hosted Temporal). A bearer token,
 * an API key or the identity provider's, never travels in plaintext: either turns TLS on.
 */
export function temporalConnectionOptions(
  config: TemporalSettings & Partial<Pick<TokenSettings, 'TEMPORAL_OAUTH_TOKEN_URL'>>,
): ConnectionOptions {
  const mtls = config.TEMPORAL_TLS_CERT_PATH && config.TEMPORAL_TLS_KEY_PATH;
  const tls =
    mtls || config.TEMPORAL_TLS_CA_PATH || config.TEMPORAL_API_KEY || config.TEMPORAL_OAUTH_TOKEN_URL
      ? {
          serverNameOverride: config.TEMPORAL_TLS_SERVER_NAME,
          serverRootCACertificate: config.TEMPORAL_TLS_CA_PATH ? readFileSync(config.TEMPORAL_TLS_CA_PATH) : undefined,
          clientCertPair: mtls
            ? { crt: readFileSync(config.TEMPORAL_TLS_CERT_PATH!), key: readFileSync(config.TEMPORAL_TLS_KEY_PATH!) }
            : undefined,
        }
      : undefined;
  return { address: config.TEMPORAL_ADDRESS ?? 'localhost:7233', tls, apiKey: config.TEMPORAL_API_KEY };
}

/** Where renewals and failed renewals of the access token are reported (a pino logger fits). */
export interface TokenLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * With TEMPORAL_OAUTH_TOKEN_URL: the first access token for Temporal's authorizer (rejects when the provider refuses
 * the credentials, so the process fails at start) and its renewals, each handed to `onRenewed`; otherwise undefined.
 */
export async function temporalTokenRefresher(
  config: TokenSettings,
  log?: TokenLog,
  onRenewed?: (token: string) => void | Promise<void>,
): Promise<TokenRefresher | undefined> {
  if (!config.TEMPORAL_OAUTH_TOKEN_URL) return undefined;
  return startTokenRefresher({
    fetchToken: () => fetchClientCredentialsToken(config),
    onRenewed,
    onRenewedLog: (renewals, lifetimeMs) =>
      log?.info({ renewals, expiresInSeconds: lifetimeMs / 1000 }, 'Temporal access token renewed'),
    onError: (error, retryInMs) =>
      log?.warn(
        { err: error.message, retryInMs },
        'Temporal access token renewal failed; the current one still serves',
      ),
  });
}

/**
 * A client that encrypts what it sends and decrypts what it reads (PAYLOAD_ENCRYPTION_KEYS), failure messages
 * included, like the worker. A production worker refuses events from a client that does not.
 */
export async function connectTemporalClient(
  config: TemporalSettings &
    Partial<TokenSettings> &
    Pick<Config, 'TEMPORAL_NAMESPACE' | 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'> &
    Partial<Pick<Config, 'DATABASE_URL'>>,
  /** Added to the configured connection options (timeouts, channel arguments). */
  connectOptions: Partial<ConnectionOptions> = {},
  /**
   * Read from the configuration unless a caller that read it earlier (to fail at start) hands it over. From the
   * configuration with DATABASE_URL, each project's payloads are sealed and opened with its data key (a pool of one
   * connection, closed with the client's connection); without it, with the ring key only.
   */
  payloadCodec?: PayloadCodec,
): Promise<Client> {
  // A caller that keeps its own token source hands it over as connectOptions.apiKey.
  const tokens = connectOptions.apiKey ? undefined : await temporalTokenRefresher(config);
  const keysDb = payloadCodec || !config.DATABASE_URL ? undefined : createDb(config.DATABASE_URL, { max: 1 });
  const codec = payloadCodec ?? payloadCodecFromConfig(config, undefined, keysDb && dataKeyStore(keysDb));
  const connection = await Connection.connect({
    ...temporalConnectionOptions(config),
    // Read on every call, so each call carries the newest token.
    ...(tokens && { apiKey: () => tokens.current() }),
    ...connectOptions,
  }).catch(async (error: unknown) => {
    tokens?.stop();
    await keysDb?.destroy();
    throw error;
  });
  if (tokens || keysDb) {
    const close = connection.close.bind(connection);
    connection.close = async () => {
      tokens?.stop();
      await Promise.all([close(), keysDb?.destroy()]);
    };
  }
  return temporalClientOn(connection, config, codec);
}

/**
 * A client on a connection someone else opened and closes: a worker's NativeConnection in `npm start`, on which
 * starts may ask for eager execution by that worker.
 */
export function temporalClientOn(
  connection: ConnectionLike,
  config: Pick<Config, 'TEMPORAL_NAMESPACE' | 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'>,
  payloadCodec: PayloadCodec = payloadCodecFromConfig(config),
): Client {
  return new Client({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    dataConverter: encryptedDataConverter(payloadCodec),
    ...tracingClientInterceptors(),
  });
}

/**
 * With tracing on, a client's starts carry the caller's trace context to the workflow (Temporal's OpenTelemetry
 * interceptor); off, no interceptor. For a Client built by hand (the bench).
 */
export const tracingClientInterceptors = (): Pick<ClientOptions, 'interceptors'> =>
  tracingEnabled() ? { interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } } : {};

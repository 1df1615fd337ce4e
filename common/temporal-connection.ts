import { readFileSync } from 'node:fs';
import {
  Client,
  Connection,
  type ClientOptions,
  type ConnectionLike,
  type ConnectionOptions,
} from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import type { Config } from './config';
import type { PayloadCodec } from '@temporalio/common';
import { encryptedDataConverter, payloadCodecFromConfig } from './payload-codec';
import { tracingEnabled } from './tracing';

type TemporalSettings = Pick<
  Config,
  | 'TEMPORAL_ADDRESS'
  | 'TEMPORAL_API_KEY'
  | 'TEMPORAL_TLS_CERT_PATH'
  | 'TEMPORAL_TLS_KEY_PATH'
  | 'TEMPORAL_TLS_CA_PATH'
  | 'TEMPORAL_TLS_SERVER_NAME'
>;

/** Connection options for the configured Temporal (TLS and API key optional, for a hosted Temporal). */
export function temporalConnectionOptions(config: TemporalSettings): ConnectionOptions {
  const mtls = config.TEMPORAL_TLS_CERT_PATH && config.TEMPORAL_TLS_KEY_PATH;
  const tls =
    mtls || config.TEMPORAL_TLS_CA_PATH || config.TEMPORAL_API_KEY
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

/**
 * A client that encrypts what it sends and decrypts what it reads (PAYLOAD_ENCRYPTION_KEYS), failure messages
 * included, like the worker. A production worker refuses events from a client that does not.
 */
export async function connectTemporalClient(
  config: TemporalSettings & Pick<Config, 'TEMPORAL_NAMESPACE' | 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'>,
  /** Added to the configured connection options (timeouts, channel arguments). */
  connectOptions: Partial<ConnectionOptions> = {},
  /** Read from the configuration unless a caller that read it earlier (to fail at start) hands it over. */
  payloadCodec: PayloadCodec = payloadCodecFromConfig(config),
): Promise<Client> {
  const connection = await Connection.connect({ ...temporalConnectionOptions(config), ...connectOptions });
  return temporalClientOn(connection, config, payloadCodec);
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

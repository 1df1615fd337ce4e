import type { Client } from '@temporalio/client';
import type { Config } from '../../common/config';
import type { PayloadCodec } from '@temporalio/common';
import { payloadCodecFromConfig } from '../../common/crypto/payload-codec';
import { connectTemporalClient, temporalTokenRefresher, type TokenLog } from '../../common/temporal/connection';
import type { TokenRefresher } from '../../common/temporal/token';
import { DependencyUnavailableError } from './errors';

type LazySettings = Parameters<typeof connectTemporalClient>[0] &
  Pick<Config, 'TEMPORAL_NAMESPACE' | 'PAYLOAD_ENCRYPTION_KEYS' | 'DATA_DIR' | 'NODE_ENV'> &
  Partial<Pick<Config, 'TEMPORAL_CONNECT_TIMEOUT_MS'>>;

/** A Temporal client the API opens on first use, so it starts (and serves registrations) while Temporal is down. */
export interface LazyTemporalClient {
  /** The connected client; rejects with a 503 DependencyUnavailableError while Temporal cannot be reached. */
  get(): Promise<Client>;
  /** The access token the connected client carries (TEMPORAL_OAUTH_*), for the readiness probe; '' without one. */
  accessToken(): string;
  close(): Promise<void>;
}

/** Reconnect quickly once Temporal is back (gRPC's default backoff grows to two minutes). */
const CHANNEL_ARGS = { 'grpc.initial_reconnect_backoff_ms': 500, 'grpc.max_reconnect_backoff_ms': 5_000 };

export function lazyTemporalClient(
  config: LazySettings,
  tokenLog?: TokenLog,
  /** The API's codec (with its data keys); read from the configuration, ring only, unless given. */
  codec?: PayloadCodec,
): LazyTemporalClient {
  // Read at once: an API without the payload key ring must not start (it could neither encrypt nor decrypt).
  const payloadCodec = codec ?? payloadCodecFromConfig(config);
  let connecting: Promise<Client> | undefined;
  let tokens: TokenRefresher | undefined;
  let closed = false;
  const connect = async (): Promise<Client> => {
    try {
      // One token source for the process's life, renewed on its own schedule across reconnections.
      tokens ??= await temporalTokenRefresher(config, tokenLog);
      const renewed = tokens;
      return await connectTemporalClient(
        config,
        {
          connectTimeout: config.TEMPORAL_CONNECT_TIMEOUT_MS ?? 5_000,
          channelArgs: CHANNEL_ARGS,
          ...(renewed && { apiKey: () => renewed.current() }),
        },
        payloadCodec,
      );
    } catch (error) {
      // The next request tries again: no restart needed when Temporal comes up.
      connecting = undefined;
      throw Object.assign(new DependencyUnavailableError('Temporal'), { cause: error });
    }
  };
  return {
    get() {
      if (closed) return Promise.reject(new DependencyUnavailableError('Temporal'));
      return (connecting ??= connect());
    },
    accessToken: () => tokens?.current() ?? '',
    async close() {
      closed = true;
      tokens?.stop();
      const client = await connecting?.catch(() => undefined);
      await client?.connection.close();
    },
  };
}

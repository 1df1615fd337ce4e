// The Temporal UI server of compose's temporal-ui service, started natively: built from its Go module at the image's
// version (scripts/ensure-temporal-ui.sh), configured by the image's own template (config/docker.yaml) from the same
// variables compose sets. test/operations/compose.test.ts checks the two agree.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { root, ServiceProcess, type Certificates } from './topology';

export const ENSURE_UI_SCRIPT = join(root, 'scripts', 'ensure-temporal-ui.sh');

/** The UI server version the ensure script builds (compose's temporalio/ui image tag). */
export const TEMPORAL_UI_SERVER_VERSION = /^TEMPORAL_UI_VERSION=v(\S+)$/m.exec(
  readFileSync(ENSURE_UI_SCRIPT, 'utf8'),
)![1]!;

/** The folder with `server` and `config/docker.yaml`, built once by scripts/ensure-temporal-ui.sh. */
export function ensureTemporalUi(): string {
  return execFileSync('sh', [ENSURE_UI_SCRIPT], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface UiSettings {
  temporalAddress: string;
  certs: Certificates;
  port: number;
  /** The API's codec endpoint, https (the UI passes the access token to no other). */
  codecEndpoint: string;
  oidc: { issuer: string; clientId: string; clientSecret: string; callbackUrl: string };
  /** The CA of the identity provider's certificate (a test CA here, trusted through Go's SSL_CERT_FILE). */
  providerCa: string;
}

/** The UI's environment, named as compose's temporal-ui service names it. */
export const temporalUiEnvironment = (s: UiSettings): Record<string, string> => ({
  TEMPORAL_ADDRESS: s.temporalAddress,
  TEMPORAL_DEFAULT_NAMESPACE: 'default',
  TEMPORAL_TLS_CA: s.certs.internodeCa,
  TEMPORAL_TLS_CERT: s.certs.of('temporal-ui').cert,
  TEMPORAL_TLS_KEY: s.certs.of('temporal-ui').key,
  TEMPORAL_TLS_SERVER_NAME: 'temporal',
  TEMPORAL_TLS_ENABLE_HOST_VERIFICATION: 'true',
  TEMPORAL_DISABLE_WRITE_ACTIONS: 'true',
  TEMPORAL_CODEC_ENDPOINT: s.codecEndpoint,
  TEMPORAL_CODEC_PASS_ACCESS_TOKEN: 'true',
  TEMPORAL_AUTH_ENABLED: 'true',
  TEMPORAL_AUTH_TYPE: 'oidc',
  TEMPORAL_AUTH_PROVIDER_URL: s.oidc.issuer,
  TEMPORAL_AUTH_ISSUER_URL: s.oidc.issuer,
  TEMPORAL_AUTH_CLIENT_ID: s.oidc.clientId,
  TEMPORAL_AUTH_CLIENT_SECRET: s.oidc.clientSecret,
  TEMPORAL_AUTH_CALLBACK_URL: s.oidc.callbackUrl,
  TEMPORAL_AUTH_SCOPES: 'openid,profile,email,offline_access',
  // Compose publishes the container's 8080 on the host; here the process listens where the suite has room.
  TEMPORAL_UI_PORT: String(s.port),
  TEMPORAL_CORS_ORIGINS: `http://127.0.0.1:${s.port}`,
  SSL_CERT_FILE: s.providerCa,
});
/** Variables the suite sets that compose leaves to the container's defaults or the host's trust store, with why. */
export const TEST_ONLY_UI_VARIABLES = ['TEMPORAL_UI_PORT', 'TEMPORAL_CORS_ORIGINS', 'SSL_CERT_FILE'];

/** Starts the UI server and waits until it serves its page. */
export async function startTemporalUi(dir: string, env: Record<string, string>): Promise<ServiceProcess> {
  const ui = new ServiceProcess(
    'temporal ui',
    join(dir, 'server'),
    ['--root', dir, '--env', 'docker', 'start'],
    env,
    () => true,
  );
  await ui.start();
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await fetch(`http://127.0.0.1:${env.TEMPORAL_UI_PORT}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (up) return ui;
    if (Date.now() > deadline || ui.process?.child.exitCode !== null)
      assert.fail(`the Temporal UI did not come up: ${ui.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** https in front of an http server, as the ingress in front of the API in production (the codec must be https). */
export async function startTlsFront(
  target: () => string,
  tls: { key: Buffer; cert: Buffer },
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(tls, (req, res) => {
    const { hostname, port } = new URL(target());
    const upstream = httpRequest(
      { hostname, port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

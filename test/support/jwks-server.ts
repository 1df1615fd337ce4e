// A local identity provider for tests: a JWKS endpoint on 127.0.0.1 and the private keys behind it.
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import jwt from 'jsonwebtoken';

export interface LocalServer {
  url: string;
  close(): Promise<void>;
}

/** Any request listener on 127.0.0.1 and a free port; https with `tls`. */
export async function listenLocal(
  listener: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>,
  tls?: Pick<ServerOptions, 'key' | 'cert'>,
): Promise<LocalServer> {
  const handle = (req: IncomingMessage, res: ServerResponse) => void listener(req, res);
  const server = tls ? createHttpsServer(tls, handle) : createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

export interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export interface JwksServer extends LocalServer {
  jwksUri: string;
  rsa: SigningKey;
  ec: SigningKey;
  /** How many times the JWKS was fetched. */
  fetches: number;
  /** Serves these public keys from now on instead (a key rotation at the identity provider). */
  publish(keys: SigningKey[]): void;
  /** A token for `sub` signed by one of the published keys. */
  sign(
    sub: string,
    options?: { key?: SigningKey; kid?: string; expiresIn?: number; issuer?: string; audience?: string },
  ): string;
}

export function rsaKey(kid: string): SigningKey {
  return { kid, alg: 'RS256', ...generateKeyPairSync('rsa', { modulusLength: 2048 }) };
}

export function ecKey(kid: string): SigningKey {
  return { kid, alg: 'ES256', ...generateKeyPairSync('ec', { namedCurve: 'P-256' }) };
}

/** Signs with any key, published or not (a forged token uses an unpublished key under a published kid). */
export function signWith(
  key: SigningKey,
  sub: string,
  options: { kid?: string; expiresIn?: number; issuer?: string; audience?: string } = {},
): string {
  return jwt.sign({ sub }, key.privateKey, {
    algorithm: key.alg,
    keyid: options.kid ?? key.kid,
    expiresIn: options.expiresIn ?? 3600,
    ...(options.issuer && { issuer: options.issuer }),
    ...(options.audience && { audience: options.audience }),
  });
}

const jwksOf = (keys: SigningKey[]) => ({
  keys: keys.map((k) => ({ ...k.publicKey.export({ format: 'jwk' }), kid: k.kid, alg: k.alg, use: 'sig' })),
});

export async function startJwksServer(tls?: Pick<ServerOptions, 'key' | 'cert'>): Promise<JwksServer> {
  const rsa = rsaKey('rsa-test-key');
  const ec = ecKey('ec-test-key');
  let jwks = jwksOf([rsa, ec]);
  const state = { fetches: 0 };
  const local = await listenLocal((req, res) => {
    if (req.url !== '/.well-known/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    state.fetches += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  }, tls);
  return {
    ...local,
    jwksUri: `${local.url}/.well-known/jwks.json`,
    rsa,
    ec,
    get fetches() {
      return state.fetches;
    },
    publish: (keys) => void (jwks = jwksOf(keys)),
    sign: (sub, options = {}) => signWith(options.key ?? rsa, sub, options),
  };
}

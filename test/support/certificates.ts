import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClientCertificateUpload } from '../../common/registration/client-certificate';

/**
 * A receiver's own CA, server certificates for 127.0.0.1 and for localhost, and client certificates it signed, made
 * with openssl: the one a hospital's integration engine would hand out, one that expires in 10 days, and one of another
 * CA.
 */
export function makeCertificates() {
  const dir = mkdtempSync(join(tmpdir(), 'mtls-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const key = (name: string) =>
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`);
  const ca = (name: string, cn: string) => {
    key(name);
    openssl('req', '-x509', '-new', '-key', `${name}.key`, '-out', `${name}.pem`, '-days', '2', '-subj', `/CN=${cn}`);
  };
  const signed = (name: string, subject: string, by: string, days: number, extensions?: string) => {
    key(name);
    openssl('req', '-new', '-key', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
    if (extensions) writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${by}.pem`,
      '-CAkey',
      `${by}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      String(days),
      ...(extensions ? ['-extfile', `${name}.ext`] : []),
    );
  };
  ca('ca', 'Receiver CA');
  ca('other-ca', 'Some other CA');
  signed('server', '/CN=127.0.0.1', 'ca', 2, 'subjectAltName=IP:127.0.0.1\n');
  // For the name only: a client that checked it against the address it connected to would refuse it.
  signed('named-server', '/CN=localhost', 'ca', 2, 'subjectAltName=DNS:localhost\n');
  signed('client', '/CN=hospital-client/O=Webhook Service', 'ca', 90);
  signed('soon', '/CN=expiring-client', 'ca', 10);
  signed('stranger', '/CN=stranger', 'other-ca', 90);
  openssl('pkey', '-in', 'client.key', '-aes256', '-passout', 'pass:secret', '-out', 'client-encrypted.key');
  const read = (file: string) => readFileSync(join(dir, file), 'utf8');
  const pair = (name: string): ClientCertificateUpload => ({
    certificate: read(`${name}.pem`),
    privateKey: read(`${name}.key`),
  });
  const certificates = {
    ca: read('ca.pem'),
    server: { cert: read('server.pem'), key: read('server.key') },
    /** A server certificate for `localhost`, not for 127.0.0.1. */
    namedServer: { cert: read('named-server.pem'), key: read('named-server.key') },
    client: pair('client'),
    soon: pair('soon'),
    stranger: pair('stranger'),
    encryptedKey: read('client-encrypted.key'),
  };
  rmSync(dir, { recursive: true, force: true });
  return certificates;
}

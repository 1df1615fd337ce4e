// A registration's client certificate for receivers that require mutual TLS: checked once when it
// is uploaded, then presented on every attempt. The private key is sealed at rest like the signing secret.
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';

/** What a member uploads: PEM text, the certificate (intermediates may follow it) and its unencrypted private key. */
export interface ClientCertificateUpload {
  certificate: string;
  privateKey: string;
}

/** What the API shows of an uploaded certificate (never the key) and what the worker names in a refusal. */
export interface ClientCertificateInfo {
  subject: string;
  notAfter: Date;
  /** SHA-256 of the leaf certificate, colon-separated hex, as openssl prints it. */
  fingerprint: string;
}

/** The PEM fields' cap: a leaf, a few intermediates and a 4096-bit RSA key fit with room. */
export const MAX_CLIENT_CERTIFICATE_PEM_LENGTH = 32_768;

/** The portal and the health route warn this many days before the certificate expires. */
export const CLIENT_CERTIFICATE_WARNING_DAYS = 14;

const DAY_MS = 86_400_000;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

export interface CertificateProblem {
  pointer: '/clientCertificate/certificate' | '/clientCertificate/privateKey';
  detail: string;
}

/**
 * The certificate's facts, or every problem with the upload: a certificate that is not PEM, not yet or no longer
 * valid; a key that is not PEM, is encrypted, or does not belong to the certificate.
 */
export function inspectClientCertificate(
  upload: ClientCertificateUpload,
  now = Date.now(),
): { info: ClientCertificateInfo } | { problems: CertificateProblem[] } {
  const problems: CertificateProblem[] = [];
  const leaf = parseLeaf(upload.certificate);
  if (!leaf)
    problems.push({
      pointer: '/clientCertificate/certificate',
      detail: 'must be a PEM X.509 certificate (-----BEGIN CERTIFICATE-----)',
    });
  else if (Date.parse(leaf.validTo) <= now)
    problems.push({
      pointer: '/clientCertificate/certificate',
      detail: `has expired (notAfter ${new Date(leaf.validTo).toISOString()})`,
    });
  else if (Date.parse(leaf.validFrom) > now)
    problems.push({
      pointer: '/clientCertificate/certificate',
      detail: `is not valid yet (notBefore ${new Date(leaf.validFrom).toISOString()})`,
    });
  const key = parseKey(upload.privateKey);
  if (typeof key === 'string') problems.push({ pointer: '/clientCertificate/privateKey', detail: key });
  else if (leaf && !leaf.checkPrivateKey(key))
    problems.push({ pointer: '/clientCertificate/privateKey', detail: 'does not match the certificate' });
  if (problems.length > 0 || !leaf) return { problems };
  return {
    info: {
      subject: leaf.subject.replace(/\n/g, ', '),
      notAfter: new Date(leaf.validTo),
      fingerprint: leaf.fingerprint256,
    },
  };
}

function parseLeaf(pem: string): X509Certificate | undefined {
  const first = PEM_CERTIFICATE.exec(pem)?.[0];
  if (!first) return undefined;
  try {
    return new X509Certificate(first);
  } catch {
    return undefined;
  }
}

/** The key, or why it cannot be used. */
function parseKey(pem: string): KeyObject | string {
  // PKCS#8 (BEGIN ENCRYPTED PRIVATE KEY) or the traditional forms' Proc-Type header.
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(pem))
    return 'must not be encrypted: upload the key without a passphrase';
  try {
    return createPrivateKey(pem);
  } catch {
    return 'must be a PEM private key (-----BEGIN PRIVATE KEY-----)';
  }
}

/** Where a certificate stands at `now`: valid, expiring within the warning days, or expired. */
export function certificateExpiry(
  notAfter: Date,
  now = Date.now(),
): { state: 'valid' | 'expiring' | 'expired'; daysLeft: number } {
  const leftMs = notAfter.getTime() - now;
  const daysLeft = Math.floor(leftMs / DAY_MS);
  if (leftMs <= 0) return { state: 'expired', daysLeft: 0 };
  return { state: leftMs <= CLIENT_CERTIFICATE_WARNING_DAYS * DAY_MS ? 'expiring' : 'valid', daysLeft };
}

/** OpenSSL's alert codes of a handshake the receiver refused over the client certificate (TLS 1.2 and 1.3). */
const REFUSED_OVER_CERTIFICATE =
  /ALERT_(CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|CERTIFICATE_EXPIRED|BAD_CERTIFICATE|UNKNOWN_CA|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED)$/;

/**
 * The failure message of a TLS handshake the receiver refused over the client certificate, naming what to fix: none
 * uploaded, or the uploaded one expired, or refused. Undefined for any other error (worded as an unreachable receiver).
 */
export function handshakeRefusal(
  errorCode: string,
  certificate: Pick<ClientCertificateInfo, 'notAfter' | 'subject'> | undefined,
  now = Date.now(),
): string | undefined {
  if (!REFUSED_OVER_CERTIFICATE.test(errorCode)) return undefined;
  if (!certificate)
    return `Receiver refused the TLS handshake: it requires a client certificate and the webhook has none (${errorCode})`;
  if (errorCode.endsWith('_CERTIFICATE_EXPIRED') || certificate.notAfter.getTime() <= now)
    return (
      `Receiver refused the TLS handshake: the webhook's client certificate expired ` +
      `(notAfter ${certificate.notAfter.toISOString()}) (${errorCode})`
    );
  return `Receiver refused the webhook's client certificate (${certificate.subject}) (${errorCode})`;
}

import { lookup as dnsLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { buildConnector } from 'undici';

/** ipaddr.js range names in words; any other non-unicast range (6to4, Teredo, benchmarking, …) is "reserved". */
const RANGE_WORDS: Record<string, string> = {
  private: 'private',
  loopback: 'loopback',
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  carrierGradeNat: 'carrier-grade NAT',
  multicast: 'multicast',
  broadcast: 'broadcast',
  unspecified: 'unspecified',
  unparseable: 'unparseable',
};

/** The kind of address a refusal names, e.g. "link-local address": never the address itself. */
export const targetCategory = (range: string): string => `${RANGE_WORDS[range] ?? 'reserved'} address`;

/**
 * Raised when a webhook URL resolves to, or connects to, an address a receiver may not live at. The message, which
 * the delivery log and the endpoint's health show to members, names the category of address, never the address.
 */
export class ForbiddenTargetError extends Error {
  override name = 'ForbiddenTargetError';
  readonly code = 'ERR_WEBHOOK_TARGET_FORBIDDEN';
  readonly category: string;
  constructor(
    readonly address: string,
    readonly range: string,
  ) {
    const category = targetCategory(range);
    super(
      `Refused to deliver: the webhook URL leads to a ${category}, which webhook receivers may not use ` +
        '(set ALLOW_PRIVATE_WEBHOOK_URLS=true for local development)',
    );
    this.category = category;
  }
}

/**
 * Why an address may not be a receiver, or undefined when it is public unicast. Covers loopback, RFC 1918,
 * link-local (169.254.169.254 metadata included), CGNAT, unique-local (fd00:ec2::254 metadata included),
 * multicast, reserved and unspecified ranges, IPv4-mapped/compatible and NAT64/6to4/Teredo forms of IPv6.
 */
export function forbiddenRange(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return 'unparseable';
  let ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv6') {
    const v6 = ip as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) ip = v6.toIPv4Address();
    else if (v6.range() === 'unicast' && v6.parts.slice(0, 6).every((part) => part === 0)) {
      // IPv4-compatible ::a.b.c.d (deprecated) still names an IPv4 host; ipaddr.js calls it unicast (:: and ::1 are
      // its unspecified and loopback ranges, however they are written).
      const [hi = 0, lo = 0] = v6.parts.slice(6);
      ip = new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
    }
  }
  const range = ip.range();
  return range === 'unicast' ? undefined : range;
}

/** `lookup` (dns.lookup, or a test's own) refusing a hostname when any address it resolves to is forbidden. */
export function createGuardedLookup(lookup: LookupFunction = dnsLookup): LookupFunction {
  return (hostname, options, callback) =>
    lookup(hostname, { ...options, all: true }, (error, answer, family) => {
      if (error) return callback(error, []);
      const addresses = typeof answer === 'string' ? [{ address: answer, family: family ?? 4 }] : answer;
      for (const { address } of addresses) {
        const range = forbiddenRange(address);
        if (range) return callback(new ForbiddenTargetError(address, range), []);
      }
      if (options.all) return callback(null, addresses);
      const [first] = addresses;
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
}

/** dns.lookup that refuses a hostname when any address it resolves to is forbidden. */
export const guardedLookup = createGuardedLookup();

/** The TLS options of a delivery's connection to the receiver: the registration's client certificate, trusted CAs. */
export interface ConnectionTls {
  cert?: string;
  key?: string;
  ca?: string[];
}

/**
 * An undici connector that resolves through guardedLookup and checks the peer address of every new
 * socket, so neither an IP-literal URL nor a DNS answer that changes between checks (rebinding) gets through.
 */
export function createGuardedConnector(options: {
  timeoutMs: number;
  allowPrivate: boolean;
  /** TLS options of the connections it makes: a client certificate, extra trusted CAs. */
  tls?: ConnectionTls;
  /** How host names are resolved: dns.lookup unless a test gives its own. */
  lookup?: LookupFunction;
}): buildConnector.connector {
  const lookup = options.allowPrivate ? options.lookup : createGuardedLookup(options.lookup);
  const base = buildConnector({ timeout: options.timeoutMs, ...options.tls, ...(lookup && { lookup }) });
  if (options.allowPrivate) return base;
  return (connectOptions, callback) => {
    // undici passes an IPv6 literal without its brackets.
    const { hostname } = connectOptions;
    if (ipaddr.isValid(hostname)) {
      const range = forbiddenRange(hostname);
      if (range) return callback(new ForbiddenTargetError(hostname, range), null);
    }
    base(connectOptions, (error, socket) => {
      if (error) return callback(error, null);
      const peer = socket.remoteAddress ?? '';
      const range = forbiddenRange(peer);
      if (range) {
        socket.destroy();
        return callback(new ForbiddenTargetError(peer, range), null);
      }
      callback(null, socket);
    });
  };
}

/**
 * The address a connection made by someone else (the egress proxy) is to go to: the host resolved once, here, and
 * refused when forbidden (unless allowPrivate), so that the proxy is only ever asked for an address that was checked.
 */
export async function resolveTarget(
  hostname: string,
  options: { allowPrivate: boolean; lookup?: LookupFunction },
): Promise<{ address: string; family: number }> {
  // The WHATWG parser keeps an IPv6 literal's brackets; undici passes it without.
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  const literal = isIP(host);
  if (literal) {
    const range = options.allowPrivate ? undefined : forbiddenRange(host);
    if (range) throw new ForbiddenTargetError(host, range);
    return { address: host, family: literal };
  }
  const lookup = options.allowPrivate ? (options.lookup ?? dnsLookup) : createGuardedLookup(options.lookup);
  return new Promise((resolve, reject) =>
    lookup(host, { all: false }, (error, address, family) => {
      // Asked for one address, lookup answers with a string.
      if (error || typeof address !== 'string') return reject(error ?? new Error(`no address for ${host}`));
      resolve({ address, family: family ?? isIP(address) });
    }),
  );
}

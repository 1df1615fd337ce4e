#!/bin/sh
# Makes two private CAs and certificates signed by them, for Temporal's mTLS (docker-compose.yml, docs/operators.md).
#   deploy/make-certs.sh DIR server NAME...   the Temporal server's own certificate, e.g. `temporal`
#   deploy/make-certs.sh DIR client NAME...   one per client, e.g. `webhooks` (API and workers), `temporal-ui`,
#                                             `admin-tools` and `monitoring` (the system that emits events)
# A server certificate is signed by the internode CA (DIR/internode-ca.pem): valid for server and client
# authentication, since the server's roles (frontend, history, matching, worker) call each other with it. A client
# certificate is signed by the clients' CA (DIR/ca.pem) and valid for client authentication only. The internode ports
# accept only the internode CA's certificates, so no client certificate opens them; the frontend accepts the clients'.
# Each CA is made once and kept when present (its key DIR/*ca.key signs later certificates). Every certificate is an
# ECDSA P-256 key for CN=NAME with subjectAltName DNS:NAME, DNS:localhost, IP:127.0.0.1 (DIR/NAME.pem, DIR/NAME.key).
# `npm run test:production` makes its certificates with this script, so the recipe stays proven.
set -eu
usage() {
  echo "usage: $0 DIR server|client NAME..." >&2
  exit 2
}
[ $# -ge 3 ] || usage
dir=$1
kind=$2
shift 2
case $kind in
  server)
    ca=internode-ca
    usage=serverAuth,clientAuth
    ;;
  client)
    ca=ca
    usage=clientAuth
    ;;
  *) usage ;;
esac
days=${CERT_DAYS:-825}
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/$ca.pem" ]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -subj "/CN=${CA_NAME:-webhooks-temporal-$ca}" -keyout "$dir/$ca.key" -out "$dir/$ca.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2> /dev/null
fi
for name in "$@"; do
  ext=$(mktemp)
  cat > "$ext" <<CONF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$usage
subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1
CONF
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2> /dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca.key" -CAcreateserial -days "$days" \
    -extfile "$ext" -out "$dir/$name.pem" 2> /dev/null
  rm -f "$ext" "$dir/$name.csr"
done
# Keys stay private: the containers' users (temporal and node) are both uid 1000, so `chown 1000 DIR/*.key` lets them
# read theirs. Keep the CAs' keys (ca.key, internode-ca.key) out of the volume: they only sign new certificates.
chmod 644 "$dir"/*.pem
chmod 600 "$dir"/*.key

#!/bin/sh
# Makes a private CA and certificates signed by it, for Temporal's mTLS (docker-compose.yml, docs/operators.md).
#   deploy/make-certs.sh DIR NAME...
# DIR gets ca.pem and ca.key (made once; kept when present) and, for each NAME, NAME.pem and NAME.key: an ECDSA P-256
# certificate for CN=NAME with subjectAltName DNS:NAME, DNS:localhost, IP:127.0.0.1, valid for server and client
# authentication. Compose needs `temporal` (the server: frontend and internode) and one per client, e.g.
# `webhooks` (API and workers), `temporal-ui`, `admin-tools` and `monitoring` (the system that emits events).
# `npm run test:production` makes its certificates with this script, so the recipe stays proven.
set -eu
[ $# -ge 2 ] || {
  echo "usage: $0 DIR NAME..." >&2
  exit 2
}
dir=$1
shift
days=${CERT_DAYS:-825}
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -subj "/CN=${CA_NAME:-webhooks-temporal-ca}" -keyout "$dir/ca.key" -out "$dir/ca.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2> /dev/null
fi
for name in "$@"; do
  ext=$(mktemp)
  cat > "$ext" <<CONF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1
CONF
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2> /dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days "$days" \
    -extfile "$ext" -out "$dir/$name.pem" 2> /dev/null
  rm -f "$ext" "$dir/$name.csr"
done
# Keys stay private: the containers' users (temporal and node) are both uid 1000, so `chown 1000 DIR/*.key` lets them
# read theirs. Keep ca.key out of the volume: it only signs new certificates.
chmod 644 "$dir"/*.pem
chmod 600 "$dir"/*.key

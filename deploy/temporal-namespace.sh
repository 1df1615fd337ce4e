#!/bin/sh
# Registers the namespace and the search attributes operators filter deliveries by, once the server serves;
# idempotent (docker-compose.yml's temporal-init service, and `npm run test:production`).
# Connection: the Temporal CLI's TEMPORAL_ADDRESS and TEMPORAL_TLS_* variables; TEMPORAL_NAMESPACE (default).
set -eu
cli=${TEMPORAL_CLI:-temporal}
namespace=${TEMPORAL_NAMESPACE:-default}
tries=0
until "$cli" operator cluster health > /dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -lt 120 ] || {
    echo "Temporal at $TEMPORAL_ADDRESS is not serving" >&2
    exit 1
  }
  sleep 0.5
done
if "$cli" operator namespace describe --namespace "$namespace" > /dev/null 2>&1; then
  echo "namespace $namespace already registered"
else
  "$cli" operator namespace create --namespace "$namespace" --retention "${TEMPORAL_RETENTION:-72h}"
fi
# A new namespace reaches every server role within seconds (namespace cache refresh).
tries=0
until "$cli" operator search-attribute list --namespace "$namespace" > /dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -lt 60 ] || {
    echo "namespace $namespace not ready" >&2
    exit 1
  }
  sleep 1
done
for name in ProjectId WebhookType; do
  if "$cli" operator search-attribute list --namespace "$namespace" | grep -qw "$name"; then
    echo "search attribute $name already registered"
  else
    "$cli" operator search-attribute create --namespace "$namespace" --name "$name" --type Keyword
  fi
done

#!/bin/sh
# Registers the namespace and the search attributes operators filter deliveries by (and an erasure finds a person's
# deliveries by: PersonHash), once the server serves;
# idempotent (docker-compose.yml's temporal-init service, and `npm run test:production`).
# Connection: the Temporal CLI's TEMPORAL_ADDRESS and TEMPORAL_TLS_* variables; TEMPORAL_NAMESPACE (default).
# Behind Temporal's authorizer this is the one caller with `<namespace>:admin`: with TEMPORAL_OAUTH_TOKEN_URL,
# TEMPORAL_OAUTH_CLIENT_ID and TEMPORAL_OAUTH_CLIENT_SECRET (and TEMPORAL_OAUTH_RESOURCE / _AUDIENCE / _SCOPE, as the
# service reads them) it fetches its access token by client credentials into TEMPORAL_API_KEY, which the CLI sends.
set -eu
cli=${TEMPORAL_CLI:-temporal}
namespace=${TEMPORAL_NAMESPACE:-default}
if [ -n "${TEMPORAL_OAUTH_TOKEN_URL:-}" ]; then
  reply=$(curl --silent --show-error --fail --max-time 30 --user "$TEMPORAL_OAUTH_CLIENT_ID:$TEMPORAL_OAUTH_CLIENT_SECRET" \
    --data grant_type=client_credentials \
    ${TEMPORAL_OAUTH_RESOURCE:+--data-urlencode "resource=$TEMPORAL_OAUTH_RESOURCE"} \
    ${TEMPORAL_OAUTH_AUDIENCE:+--data-urlencode "audience=$TEMPORAL_OAUTH_AUDIENCE"} \
    ${TEMPORAL_OAUTH_SCOPE:+--data-urlencode "scope=$TEMPORAL_OAUTH_SCOPE"} \
    "$TEMPORAL_OAUTH_TOKEN_URL")
  TEMPORAL_API_KEY=$(printf '%s' "$reply" | sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
  [ -n "$TEMPORAL_API_KEY" ] || {
    echo "no access token from $TEMPORAL_OAUTH_TOKEN_URL" >&2
    exit 1
  }
  export TEMPORAL_API_KEY
fi
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
for name in ProjectId WebhookType PersonHash; do
  if "$cli" operator search-attribute list --namespace "$namespace" | grep -qw "$name"; then
    echo "search attribute $name already registered"
  else
    "$cli" operator search-attribute create --namespace "$namespace" --name "$name" --type Keyword
  fi
done

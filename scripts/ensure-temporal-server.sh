#!/bin/sh
# Makes the real Temporal server and its SQL schema tool available for `npm run test:production`: built from their Go
# modules at the version docker-compose.yml runs (temporalio/server), into a stable cache folder, only when missing.
# A fresh build takes about 5-7 minutes on 2 cores; later runs reuse it. Prints the folder on stdout.
# The server needs a newer Go than some machines have: GOTOOLCHAIN=auto fetches it from the Go module proxy.
set -eu
TEMPORAL_SERVER_VERSION=v1.32.2
dir="${TEMPORAL_SERVER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/webhook-service/temporal-server-$TEMPORAL_SERVER_VERSION}"

# build <binary> <package>: go install into a scratch folder, then move into place, so a half-built binary never
# looks present.
build() {
  [ -x "$dir/$1" ] && return 0
  command -v go > /dev/null 2>&1 || {
    echo "ensure-temporal-server: Go is needed to build the Temporal server ($2@$TEMPORAL_SERVER_VERSION)" >&2
    exit 1
  }
  echo "Building $2@$TEMPORAL_SERVER_VERSION into $dir (a few minutes, once)" >&2
  mkdir -p "$dir"
  scratch=$(mktemp -d "$dir/.build-XXXXXX")
  GOTOOLCHAIN=auto GOBIN="$scratch" CGO_ENABLED=0 go install "$2@$TEMPORAL_SERVER_VERSION" >&2
  mv "$scratch/$(basename "$2")" "$dir/$1"
  rmdir "$scratch"
}

build server go.temporal.io/server/cmd/server
build sql go.temporal.io/server/cmd/tools/sql
echo "$dir"

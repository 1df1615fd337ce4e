#!/bin/sh
# Makes Jaeger v2 (all-in-one: OTLP in, in-memory storage, query API and UI out) available for the tracing test:
# built from its Go module into a stable cache folder, only when missing. Prints the binary's path on stdout.
# Jaeger's go.mod has a `replace` directive, so `go install …@version` refuses: the module is downloaded, copied to a
# writable scratch folder and built there. A fresh build takes several minutes on 2 cores; later runs reuse it.
set -eu
JAEGER_VERSION=v1.76.0
dir="${JAEGER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/webhook-service/jaeger-$JAEGER_VERSION}"
binary="$dir/jaeger"

if [ ! -x "$binary" ]; then
  command -v go > /dev/null 2>&1 || {
    echo "ensure-jaeger: Go is needed to build Jaeger (github.com/jaegertracing/jaeger@$JAEGER_VERSION)" >&2
    exit 1
  }
  echo "Building github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION into $dir (a few minutes, once)" >&2
  mkdir -p "$dir"
  module=$(GOTOOLCHAIN=auto GOFLAGS=-mod=mod go mod download -json "github.com/jaegertracing/jaeger@$JAEGER_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$module" ] || {
    echo "ensure-jaeger: go mod download did not name the module's folder" >&2
    exit 1
  }
  # The module cache is read-only; the scratch copy is writable and removed afterwards, so a half-built binary never
  # looks present.
  scratch=$(mktemp -d "$dir/.build-XXXXXX")
  cp -R "$module/." "$scratch/src"
  chmod -R u+w "$scratch/src"
  (cd "$scratch/src" && GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$scratch/jaeger" ./cmd/jaeger) >&2
  mv "$scratch/jaeger" "$binary"
  rm -rf "$scratch"
fi
echo "$binary"

#!/bin/sh
# Builds Jaeger UI's static assets (index.html and static/) from a jaeger-ui source tree the caller provides, into a
# stable cache folder, only when missing. Prints the folder on stdout: hand it to the tracing test as JAEGER_UI_ASSETS.
# Only the trace screenshot (`TRACE_SCREENSHOT=1 npx mocha test/worker/tracing.test.ts`, docs/trace-fall-detection.png) needs
# it; nothing else runs the UI, and CI does not build it.
#
#   scripts/ensure-jaeger-ui.sh SOURCE_DIR
#
# SOURCE_DIR is a checkout (or `git archive`) of github.com/jaegertracing/jaeger-ui, the tag matching the Jaeger the
# tests build (v1.76.0, scripts/ensure-jaeger.sh): the folder is named after packages/jaeger-ui/package.json's version.
# The build is the monorepo's own: `npm ci` at its root (packages from the npm registry; its `prepare` script builds
# the plexus package), then `npm run build` in packages/jaeger-ui (vite). About 1.5 minutes on 2 cores.
set -eu
src="${1:?usage: scripts/ensure-jaeger-ui.sh JAEGER_UI_SOURCE_DIR}"
[ -f "$src/packages/jaeger-ui/package.json" ] || {
  echo "ensure-jaeger-ui: $src is not a jaeger-ui source tree (no packages/jaeger-ui/package.json)" >&2
  exit 1
}
version=v$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$src/packages/jaeger-ui/package.json")
[ "$version" != v ] || {
  echo "ensure-jaeger-ui: no version in $src/packages/jaeger-ui/package.json" >&2
  exit 1
}
dir="${JAEGER_UI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/webhook-service/jaeger-ui-$version}"

if [ ! -f "$dir/index.html" ]; then
  command -v npm > /dev/null 2>&1 || {
    echo "ensure-jaeger-ui: npm is needed to build Jaeger UI" >&2
    exit 1
  }
  echo "Building Jaeger UI $version from $src into $dir (a minute or two, once)" >&2
  parent=$(dirname "$dir")
  mkdir -p "$parent"
  # A scratch copy (the caller's tree stays as it was) in the cache's folder, moved into place only when built, so a
  # half-built folder never looks present.
  scratch=$(mktemp -d "$parent/.jaeger-ui-build-XXXXXX")
  mkdir "$scratch/src"
  (cd "$src" && tar -cf - --exclude=./.git --exclude=node_modules --exclude=./packages/jaeger-ui/build .) |
    (cd "$scratch/src" && tar -xf -)
  # jaeger-ui asks for Node >= 24 (engine-strict in its .npmrc); its build runs on Node 20.19 and later as well.
  (cd "$scratch/src" && npm ci --engine-strict=false --no-audit --no-fund && cd packages/jaeger-ui && npm run build) >&2
  rm -rf "$dir"
  mv "$scratch/src/packages/jaeger-ui/build" "$dir"
  rm -rf "$scratch"
fi
echo "$dir"

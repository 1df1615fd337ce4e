#!/bin/sh
# Makes the Temporal UI server available for `npm run test:production`: built from its Go module (the UI's assets are
# embedded in it; the temporalio/ui image runs the same binary) at the version compose's temporalio/ui image names,
# into a stable cache folder, only when missing. A fresh build takes a minute or two; later runs reuse it. Prints the
# folder on stdout (its `server` runs as `server --root DIR --env NAME start` with DIR/config/NAME.yaml).
set -eu
TEMPORAL_UI_VERSION=v2.54.1
dir="${TEMPORAL_UI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/webhook-service/temporal-ui-$TEMPORAL_UI_VERSION}"
module=github.com/temporalio/ui-server/v2/cmd/server

if [ ! -x "$dir/server" ]; then
  command -v go > /dev/null 2>&1 || {
    echo "ensure-temporal-ui: Go is needed to build the Temporal UI server ($module@$TEMPORAL_UI_VERSION)" >&2
    exit 1
  }
  echo "Building $module@$TEMPORAL_UI_VERSION into $dir (a minute or two, once)" >&2
  mkdir -p "$dir"
  # Into a scratch folder first, so a half-built binary never looks present.
  scratch=$(mktemp -d "$dir/.build-XXXXXX")
  GOTOOLCHAIN=auto GOBIN="$scratch" CGO_ENABLED=0 go install "$module@$TEMPORAL_UI_VERSION" >&2
  mv "$scratch/server" "$dir/server"
  rmdir "$scratch"
fi
echo "$dir"

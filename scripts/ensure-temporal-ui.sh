#!/bin/sh
# Makes the Temporal UI server available for `npm run test:production`: built from its Go module (the UI's assets are
# embedded in it; the temporalio/ui image runs the same binary) at the version compose's temporalio/ui image names,
# into a stable cache folder, only when missing. A fresh build takes a minute or two; later runs reuse it. Prints the
# folder on stdout: DIR/server and DIR/config/docker.yaml, the module's configuration template that the image runs
# (`server --root DIR --env docker start`, configured by the same TEMPORAL_* variables as compose's temporal-ui).
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
if [ ! -f "$dir/config/docker.yaml" ]; then
  source_dir=$(GOTOOLCHAIN=auto GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "github.com/temporalio/ui-server/v2@$TEMPORAL_UI_VERSION")
  mkdir -p "$dir/config"
  cp "$source_dir/config/docker.yaml" "$dir/config/docker.yaml.part"
  mv "$dir/config/docker.yaml.part" "$dir/config/docker.yaml"
fi
echo "$dir"

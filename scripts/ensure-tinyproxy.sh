#!/bin/sh
# Makes Debian's tinyproxy available for the egress-proxy tests (a real forward proxy between the worker and a
# receiver): the tests start it in the foreground with a config file of their own (tinyproxy -d -c conf). Installs
# Debian's tinyproxy-bin (the binary, without the system service) with apt-get when it is missing and this user may
# (root); otherwise says what to do and leaves the proxy tests to fail naming it.
set -u
path=${TINYPROXY_PATH:-$(command -v tinyproxy || true)}
if [ -n "$path" ] && [ -x "$path" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null 2>&1; then
  echo "note: no tinyproxy found; install Debian's tinyproxy-bin (apt-get install tinyproxy-bin) or set TINYPROXY_PATH" >&2
  exit 0
fi
echo "Installing Debian's tinyproxy-bin for the egress-proxy tests" >&2
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tinyproxy-bin; } \
  > /dev/null 2>&1 || echo "note: apt-get could not install tinyproxy-bin; the egress-proxy tests will fail naming it" >&2
exit 0

#!/bin/sh
# Makes Debian's HAProxy available for `npm run test:production`: the load balancer in front of the Temporal cluster's
# two frontends (TCP passthrough, so mTLS stays end to end). The suite starts it in the foreground with a config file
# of its own (haproxy -db -f conf). Installs Debian's haproxy with apt-get when it is missing and this user may (root);
# otherwise says what to do and leaves the production suite to fail naming it.
set -u
path=${HAPROXY_PATH:-$(command -v haproxy || true)}
if [ -n "$path" ] && [ -x "$path" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null 2>&1; then
  echo "note: no haproxy found; install Debian's haproxy (apt-get install haproxy) or set HAPROXY_PATH" >&2
  exit 0
fi
echo "Installing Debian's haproxy for the production suite's Temporal cluster" >&2
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy; } \
  > /dev/null 2>&1 || echo "note: apt-get could not install haproxy; the production suite will fail naming it" >&2
exit 0

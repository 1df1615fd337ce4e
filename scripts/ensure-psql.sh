#!/bin/sh
# Makes psql available for `npm run test:production`, which runs deploy/postgres/init-roles.sh as the postgres image
# runs it. Installs Debian's postgresql-client with apt-get when psql is missing and this user may (root); otherwise
# says what to do and leaves the suite to fail naming it.
set -u
if command -v psql > /dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null 2>&1; then
  echo "note: no psql found; install Debian's postgresql-client (apt-get install postgresql-client)" >&2
  exit 0
fi
echo "Installing Debian's postgresql-client for the production suite" >&2
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client; } > /dev/null 2>&1 ||
  echo "note: apt-get could not install postgresql-client; the production suite will fail naming psql" >&2
exit 0

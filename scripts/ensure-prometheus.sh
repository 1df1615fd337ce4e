#!/bin/sh
# Makes Debian's Prometheus available for the alerting-rule tests: promtool runs the rules' unit tests and a real
# prometheus server scrapes a running stack (test/operations/alert-rules.test.ts, test/operations/prometheus-alerts.test.ts). Installs the
# `prometheus` package with apt-get when they are missing and this user may (root); otherwise says what to do and
# leaves those tests to fail naming it. PROMTOOL_PATH / PROMETHEUS_PATH point the tests at other binaries.
set -u
promtool=${PROMTOOL_PATH:-/usr/bin/promtool}
prometheus=${PROMETHEUS_PATH:-/usr/bin/prometheus}
if [ -x "$promtool" ] && [ -x "$prometheus" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null 2>&1; then
  echo "note: no Prometheus found; install Debian's prometheus (apt-get install prometheus) or set PROMTOOL_PATH and PROMETHEUS_PATH" >&2
  exit 0
fi
echo "Installing Debian's prometheus for the alerting-rule tests" >&2
# The package's service is not started (no systemd here); only its binaries are used.
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } > /dev/null 2>&1 ||
  echo "note: apt-get could not install prometheus; the alerting-rule tests will fail naming it" >&2
exit 0

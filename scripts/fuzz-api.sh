#!/bin/sh
# API fuzzing: Schemathesis (pinned, from PyPI, in a virtualenv under .data) generates requests from /openapi.json
# and checks every answer against the document: no 5xx, only documented statuses, content types, headers and bodies,
# 405 with Allow for undeclared methods, and no schema-valid request refused. The API runs on a real PostgreSQL without
# Temporal (the test endpoint then answers its documented 503), seeded with real ids that scripts/schemathesis.toml
# puts in most generated requests, so every operation runs past its 404. FUZZ_MAX_EXAMPLES bounds the examples per
# operation (CI: 50).
set -eu
cd "$(dirname "$0")/.."
SCHEMATHESIS=schemathesis==4.32.5
venv=${FUZZ_VENV:-.data/fuzz-venv}
max_examples=${FUZZ_MAX_EXAMPLES:-50}

if ! "$venv/bin/st" --version 2>/dev/null | grep -q "4.32.5"; then
  echo "Installing $SCHEMATHESIS from PyPI into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$SCHEMATHESIS"
fi

started=$(mktemp)
har=$(mktemp)
node --require tsx/cjs test/support/fuzz-api-server.ts > "$started" &
server=$!
stop() {
  kill "$server" 2> /dev/null || true
  wait "$server" 2> /dev/null || true
  rm -f "$started" "$har"
}
trap stop EXIT INT TERM

waited=0
while [ ! -s "$started" ]; do
  kill -0 "$server" 2> /dev/null || { echo "the API for fuzzing did not start" >&2; exit 1; }
  [ "$waited" -lt 120 ] || { echo "the API for fuzzing did not start within 60 s" >&2; exit 1; }
  sleep 0.5
  waited=$((waited + 1))
done
field() { python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$started" "$1"; }
url=$(field url)
token=$(field token)

# Every check runs (Schemathesis' default), except what scripts/schemathesis.toml turns off, with its reason.
status=0
"$venv/bin/st" --config-file scripts/schemathesis.toml run "$url/openapi.json" \
  --url "$url" \
  --header "Authorization: Bearer $token" \
  --max-examples "$max_examples" \
  --seed "${FUZZ_SEED:-14}" \
  --generation-deterministic \
  --report har --report-har-path "$har" || status=$?
echo "Requests and statuses per operation:"
python3 scripts/fuzz-coverage.py "$url/openapi.json" "$har" || status=1
exit "$status"

#!/bin/sh
# Makes Python's `cryptography` package importable for the independent Ed25519 (Standard Webhooks v1a) verifier the
# tests run (test/support/verify_v1a.py): when python3 cannot import it, installs the pinned release from PyPI. Without
# python3 or pip it says so; the v1a tests then fail naming the missing module.
set -u
CRYPTOGRAPHY=cryptography==48.0.0

if ! command -v python3 > /dev/null 2>&1; then
  echo "note: no python3: the v1a tests' independent verifier cannot run" >&2
  exit 0
fi
python3 -c 'from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey' 2> /dev/null && exit 0
echo "Installing Python's $CRYPTOGRAPHY from PyPI (the v1a tests' independent verifier)" >&2
python3 -m pip install --quiet --disable-pip-version-check "$CRYPTOGRAPHY" >&2 ||
  echo "note: pip could not install $CRYPTOGRAPHY; the v1a tests will fail naming it" >&2
exit 0

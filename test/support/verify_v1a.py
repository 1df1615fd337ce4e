#!/usr/bin/env python3
"""An independent Standard Webhooks v1a verifier, written from the specification's text (standardwebhooks.com,
"Signature scheme", "Verifying webhooks"), not from this service's code, with the `cryptography` package's Ed25519.

Reads one JSON object on stdin: {"publicKeys": ["whpk_…", …], "headers": {name: value}, "body": base64 of the raw
body}. Prints one JSON object: {"reason": …, "keys": [bool per public key: some v1a signature verifies with it]}.
Exits 0 when at least one key verifies, 1 otherwise.
"""
import base64
import json
import sys
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TOLERANCE_SECONDS = 5 * 60


def public_key(text):
    # "whpk_" followed by the base64 encoding of the raw public key bytes.
    if not text.startswith("whpk_"):
        raise ValueError("a public key starts with whpk_")
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(text[len("whpk_"):], validate=True))


def verdict(request):
    headers = {name.lower(): value for name, value in request["headers"].items()}
    body = base64.b64decode(request["body"])
    keys = [public_key(text) for text in request["publicKeys"]]
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not timestamp or not signatures:
        return "missing-headers", [False] * len(keys)
    # The timestamp is seconds since the epoch; one too far from now is refused (replay protection).
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return "stale-timestamp", [False] * len(keys)
    # The content signed: the id, the timestamp and the payload, joined by full stops.
    signed_content = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    # A space-delimited list of signatures, each prefixed by its version and a comma; v1a is Ed25519.
    candidates = []
    for versioned in signatures.split(" "):
        version, _, signature = versioned.partition(",")
        if version == "v1a":
            try:
                candidates.append(base64.b64decode(signature, validate=True))
            except ValueError:
                continue
    results = []
    for key in keys:
        ok = False
        for signature in candidates:
            try:
                key.verify(signature, signed_content)
                ok = True
                break
            except InvalidSignature:
                continue
        results.append(ok)
    return ("valid" if any(results) else "bad-signature"), results


if __name__ == "__main__":
    reason, keys = verdict(json.load(sys.stdin))
    print(json.dumps({"reason": reason, "keys": keys}))
    sys.exit(0 if any(keys) else 1)

"""Per-operation coverage of a Schemathesis run, read from its HAR file: how many requests each operation of the
OpenAPI document got and their statuses. Exits 1 when an operation was never reached past the checks that precede its
own work (only 400, 401, 403, 404, 405, 413 or 415 answers): the fuzz run then tested the routing, not the route.

Usage: python3 scripts/fuzz-coverage.py <openapi.json URL> <har file>
"""

import collections
import json
import re
import sys
import urllib.parse
import urllib.request

NOT_REACHED = {400, 401, 403, 404, 405, 413, 415}


def main(document_url: str, har_path: str) -> int:
    with urllib.request.urlopen(document_url) as response:
        paths = json.load(response)["paths"]
    operations = [
        (method.upper(), template, re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"))
        for template, methods in paths.items()
        for method in methods
        # Schemathesis reads the document from there; it does not test it as an operation.
        if template != urllib.parse.urlsplit(document_url).path
    ]
    statuses: dict[tuple[str, str], collections.Counter] = {(m, t): collections.Counter() for m, t, _ in operations}
    with open(har_path, encoding="utf-8") as har:
        entries = json.load(har)["log"]["entries"]
    for entry in entries:
        method = entry["request"]["method"]
        path = urllib.parse.urlsplit(entry["request"]["url"]).path
        for m, template, pattern in operations:
            if m == method and pattern.match(path):
                statuses[(m, template)][entry["response"]["status"]] += 1
                break
    unreached = []
    for (method, template), counts in statuses.items():
        shown = ", ".join(f"{status}×{count}" for status, count in sorted(counts.items()))
        reached = any(status not in NOT_REACHED for status in counts)
        print(f"{'  ' if reached else '✗ '}{method:6} {template}: {sum(counts.values())} requests ({shown})")
        if not reached:
            unreached.append(f"{method} {template}")
    if unreached:
        print(f"Never reached past validation, authorization or 404: {', '.join(unreached)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

#!/usr/bin/env python3
"""The web UI's first load: what a browser with an empty cache fetches from the
daemon before the first page shows, in requests and bytes on the wire (gzip, as
a browser asks for it), against the issue's budget of 250 KB compressed.

    /usr/bin/python3 bench/ui_first_load.py [--lathe build/lathe] [--json]

Starts a daemon with simulated GPUs and no runs, then fetches what the page
names (index.html, app-*.js, app-*.css) and the API calls the first page
(Overview) makes on load: GET /api/v1/session, /gpus, the two run lists and /doctor.
Bytes are bodies as sent (Content-Length), without HTTP headers.
"""
import argparse
import gzip
import http.client
import json
import os
import re
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integ"))
import harness  # noqa: E402

BUDGET = 250_000
OVERVIEW_API = ["/api/v1/session", "/api/v1/gpus",
                "/api/v1/runs?all=1&state=starting,running,stopping&limit=1000",
                "/api/v1/runs?all=1&state=queued&sort=created&limit=100", "/api/v1/doctor"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", default=harness.LATHE)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    harness.LATHE = a.lathe
    d = harness.Daemon(gpus="sim:8x80GB").start()
    try:
        url = urllib.parse.urlsplit(d.cli("ui", "--print").stdout.strip())
        c = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)
        host = {"Host": url.netloc, "Accept-Encoding": "gzip, deflate, br"}
        c.request("GET", url.path + "?" + url.query, headers=host)
        r = c.getresponse()
        r.read()
        cookie = r.headers["Set-Cookie"].split(";")[0]
        rows = []

        def fetch(path, kind):
            c.request("GET", path, headers={**host, "Cookie": cookie})
            resp = c.getresponse()
            body = resp.read()
            rows.append({"path": path, "kind": kind, "status": resp.status, "bytes": len(body),
                         "encoding": resp.headers.get("Content-Encoding", "identity")})
            return body

        index = gzip.decompress(fetch("/ui/", "static"))
        for asset in re.findall(rb'(?:src|href)="(/ui/assets/[^"]+)"', index):
            fetch(asset.decode(), "static")
        for path in OVERVIEW_API:
            fetch(path, "api")
    finally:
        d.cleanup()
    static = sum(r["bytes"] for r in rows if r["kind"] == "static")
    total = sum(r["bytes"] for r in rows)
    result = {"requests": len(rows), "static_requests": sum(r["kind"] == "static" for r in rows),
              "static_bytes": static, "total_bytes": total, "budget_bytes": BUDGET, "rows": rows}
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        for r in rows:
            print(f"{r['status']} {r['bytes']:>8} B  {r['encoding']:<8} {r['kind']:<6} {r['path']}")
        print(f"{len(rows)} requests; static {static} B, all {total} B of a {BUDGET} B budget")
    return 0 if total < BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The Runs page's API with many runs: GET /api/v1/runs as the web UI asks for
a page (50 rows, sorted, filtered, deep in the list), with 100 and with 10,000
runs in the daemon's database, over one kept-alive connection on the unix
socket. Median and p99 latency per query, and the answer's size.

    /usr/bin/python3 bench/runs_list_bench.py [--lathe build/lathe] [--runs 10000] [--n 300] [--json]

The runs are copies of one finished run, written into lathe.db while the daemon
is stopped (submitting 10,000 real runs would measure the scheduler instead):
ids rb000000001…, names job-00001…, states succeeded/failed/stopped in turn, users
root and alice in turn.
"""
import argparse
import http.client
import json
import os
import socket
import sqlite3
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lathe", default=os.path.join(os.path.dirname(__file__), "..", "build", "lathe"))
parser.add_argument("--runs", type=int, default=10000)
parser.add_argument("--n", type=int, default=300, help="requests per query")
parser.add_argument("--json", action="store_true")
args = parser.parse_args()
os.environ["LATHE_BIN"] = os.path.abspath(args.lathe)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integ"))
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from stats import pct  # noqa: E402

PAGE = "/api/v1/runs?all=1&limit=50"
QUERIES = [
    ("first page, newest first", PAGE),
    ("last page (offset = runs - 50)", PAGE + "&offset={deep}"),
    ("sorted by name", PAGE + "&sort=name"),
    ("sorted by priority, descending", PAGE + "&sort=-priority"),
    ("state=failed", PAGE + "&state=failed"),
    ("user=alice, sorted by state", PAGE + "&user=alice&sort=state"),
    ("q=job-0123 (part of a name)", PAGE + "&q=job-0123"),
    ("the overview's active runs", "/api/v1/runs?all=1&state=starting,running,stopping&limit=1000"),
]


class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("lathe", timeout=60)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path_)


def fill(db, count):
    """`count` copies of the database's one run."""
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
    exprs = {"id": "printf('rb%09d', n)", "name": "printf('job-%05d', n)", "seq": "1000 + n",
             "state": "CASE n % 3 WHEN 0 THEN 'succeeded' WHEN 1 THEN 'failed' ELSE 'stopped' END",
             "user": "CASE n % 2 WHEN 0 THEN 'root' ELSE 'alice' END"}
    select = ", ".join(exprs.get(c, c) for c in cols)
    con.execute(f"WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < {count}) "
                f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} FROM runs, k")
    con.commit()
    con.close()


def measure(d, count, n):
    conn = Unix(os.path.join(d.home, "lathe.sock"))
    rows = []
    for label, q in QUERIES:
        path = q.format(deep=max(0, count - 50))
        times, size, total = [], 0, None
        for i in range(n + 5):
            t = time.perf_counter()
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            if i >= 5:  # warm-up
                times.append((time.perf_counter() - t) * 1000)
            assert r.status == 200, (r.status, body[:200])
            size, total = len(body), json.loads(body)["total"]
        rows.append({"query": label, "path": path, "runs": count, "matching": total, "bytes": size,
                     "p50_ms": round(pct(times, 50), 2), "p99_ms": round(pct(times, 99), 2)})
    conn.close()
    return rows


def run(count):
    d = harness.Daemon(gpus="sim:8x80GB").start()
    try:
        rid = d.submit("--name", "seed", "--", "true")
        d.wait_state(rid, "succeeded")
        d.stop()
        fill(os.path.join(d.home, "lathe.db"), count - 1)
        d.start()
        return measure(d, count, args.n)
    finally:
        d.cleanup()


results = run(100) + run(args.runs)
if args.json:
    print(json.dumps(results, indent=1))
else:
    print(f"{'query':<34} {'runs':>6} {'match':>6} {'bytes':>7} {'p50 ms':>7} {'p99 ms':>7}")
    for r in results:
        print(f"{r['query']:<34} {r['runs']:>6} {r['matching']:>6} {r['bytes']:>7} {r['p50_ms']:>7} {r['p99_ms']:>7}")

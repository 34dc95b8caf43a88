#!/usr/bin/env python3
"""GET /api/v1/status and GET /api/v1/projects/NAME with many finished runs of a project in the GPU ledger.

The web UI's Overview polls GET /status every 3 s, and GET /status computes the usage of each of the
caller's projects. This starts `lathe daemon` in a fresh temporary home (simulated GPUs, loopback and its
unix socket only), makes a project, runs one 1-GPU run in it, stops the daemon, copies that run's row and
its GPU attempt RUNS times into the state database (finished runs spread over the last 25 days), starts
the daemon again and times REQUESTS requests of each kind over one keep-alive connection on the unix
socket. Each binary given gets its own copy of the same seeded home. Everything it starts is stopped by
PID at the end.

    /usr/bin/python3 bench/status_bench.py --lathe build/lathe [--lathe OTHER] [--runs 2000] [--requests 300]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time

DAY_MS = 24 * 3600 * 1000


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("lathe", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def env_for(home):
    e = dict(os.environ, LATHE_HOME=home, LANG="C.UTF-8")
    e.pop("LATHE_LANG", None)
    return e


def start(lathe, home):
    log = open(os.path.join(home, "daemon.bench.log"), "ab")
    proc = subprocess.Popen([lathe, "daemon", "--home", home, "--gpus", "sim:4x24GB", "--port", "0",
                             "--grace", "2s", "--deployments-listen", "127.0.0.1:0"],
                            stdout=log, stderr=log, env=env_for(home))
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the daemon exited; see " + log.name)
        r = subprocess.run([lathe, "status", "--json"], capture_output=True, env=env_for(home))
        if r.returncode == 0:
            return proc
        time.sleep(0.05)
    raise RuntimeError("the daemon did not come up")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cli(lathe, home, *args):
    return subprocess.run([lathe, *args], capture_output=True, text=True, check=True,
                          env=env_for(home)).stdout


def seed(lathe, home, runs):
    proc = start(lathe, home)
    try:
        cli(lathe, home, "project", "create", "bench")
        rid = cli(lathe, home, "run", "--project", "bench", "--gpus", "1", "--workdir", "/tmp", "--",
                  "true").strip()
        deadline = time.time() + 60
        while json.loads(cli(lathe, home, "inspect", "--json", rid))["state"] != "succeeded":
            if time.time() > deadline:
                raise RuntimeError("the seed run did not end")
            time.sleep(0.1)
    finally:
        stop(proc)
    db = sqlite3.connect(os.path.join(home, "lathe.db"))
    cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    has_project = "project" in [r[1] for r in db.execute("PRAGMA table_info(gpu_attempts)")]
    row = dict(zip(cols, db.execute("SELECT * FROM runs WHERE id=?", (rid,)).fetchone()))
    seq = db.execute("SELECT max(seq) FROM runs").fetchone()[0]
    now = int(time.time() * 1000)
    for i in range(runs):
        r = dict(row)
        r["id"] = r["name"] = f"rbench{i:06d}"
        r["seq"] = seq + 1 + i
        end = now - (i * 25 * DAY_MS) // runs
        r["created_at"], r["started_at"], r["finished_at"] = end - 3_700_000, end - 3_600_000, end
        db.execute(f"INSERT INTO runs ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                   [r[c] for c in cols])
        # Since schema v16 an attempt carries its run's project (older daemons read it from the run).
        extra = ", project" if has_project else ""
        db.execute(f"INSERT INTO gpu_attempts (run_id, attempt, uid, user, gpus, started_at, ended_at{extra}) "
                   f"SELECT ?, attempt, uid, user, gpus, ?, ?{extra} FROM gpu_attempts WHERE run_id=?",
                   (r["id"], end - 3_600_000, end, rid))
    db.commit()
    db.close()


def timed(sock, path, n):
    c = UnixHTTPConnection(sock)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("GET", path)
        resp = c.getresponse()
        body = resp.read()
        out.append((time.perf_counter() - t) * 1000)
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status} {body[:200]}")
    c.close()
    return out, json.loads(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", action="append", required=True)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--requests", type=int, default=300)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="lathe-status-bench-")
    try:
        seeded = os.path.join(base, "seeded")
        os.makedirs(seeded)
        seed(os.path.abspath(a.lathe[0]), seeded, a.runs)
        for i, lathe in enumerate(a.lathe):
            home = os.path.join(base, f"home{i}")
            shutil.copytree(seeded, home, ignore=shutil.ignore_patterns("*.sock", "*.log"))
            proc = start(os.path.abspath(lathe), home)
            try:
                sock = os.path.join(home, "lathe.sock")
                timed(sock, "/api/v1/status", 5)  # warm: the ledger read once
                for path in ("/api/v1/status", "/api/v1/projects/bench"):
                    ms, body = timed(sock, path, a.requests)
                    usage = body["projects"][0]["usage"] if "projects" in body else body["usage"]
                    q = statistics.quantiles(ms, n=100)
                    print(f"{lathe}  GET {path}: mean {statistics.mean(ms):.2f} ms, p50 {q[49]:.2f}, "
                          f"p99 {q[98]:.2f} ({a.requests} requests; project GPU-hours "
                          f"{usage['gpu_hours']:.1f})")
            finally:
                stop(proc)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Notebook start: submit -> a usable URL, Lathe vs Jupyter started by hand.

Lathe: `lathe notebook start --wait` N times against a daemon on a temporary
home (simulated GPUs, one GPU each); the time from the call to its return
(it returns when Jupyter answers /api/status through the proxy), split with
the run's own events: queue (submitted -> starting), launch (starting ->
running: the monitor and `lathe __notebook`), Jupyter start (running ->
"notebook ready", the daemon's first /api/status answer) and the CLI's own
check through the proxy (ready -> return).
Peer: `jupyter-notebook --sock` started directly, polled on /api/status
every 20 ms until it answers (what a user without Lathe waits for).
With --image TAR (the Debian image of scripts/test-images.sh, which has
jupyter-notebook): the same through `lathe notebook start --image` (the
image's own Jupyter, in a container), reported as lathe_image_*.

  /usr/bin/python3 bench/notebook_start.py [--n 10] [--image TAR] [--out bench/results/notebook_start.json]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LATHE = os.path.join(ROOT, "build", "lathe")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def lathe_runs(n, image_tar=None):
    home = tempfile.mkdtemp(prefix="lathe-bench-nb-")
    work = tempfile.mkdtemp(prefix="lathe-bench-nb-work-")  # a run may not work in the daemon's home
    env = dict(os.environ, LATHE_HOME=home, LANG="C.UTF-8")
    log = open(os.path.join(home, "daemon.log"), "w")
    d = subprocess.Popen([LATHE, "daemon", "--home", home, "--gpus", "sim:4", "--port", "0"],
                         stdout=log, stderr=log, env=env)
    try:
        for _ in range(200):
            if subprocess.run([LATHE, "status"], env=env, capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        flags = []
        if image_tar:
            subprocess.run([LATHE, "image", "import", "nb", image_tar], env=env, check=True,
                           capture_output=True)
            flags = ["--image", "nb"]
        samples = []
        for i in range(n):
            t0 = time.time()
            r = subprocess.run([LATHE, "notebook", "start", "--gpus", "1", "--wait", *flags],
                               env=env, capture_output=True, text=True, cwd=work)
            t1 = time.time()
            if r.returncode != 0:
                raise SystemExit("notebook start failed: " + r.stderr)
            run = r.stdout.strip().split("//", 1)[1].split(".", 1)[0]
            info = json.loads(subprocess.run([LATHE, "inspect", "--json", run], env=env,
                                             capture_output=True, text=True).stdout)
            ts = {}
            for e in info["events"]:
                to = e.get("data", {}).get("to")
                if to and to not in ts:
                    ts[to] = e["ts_ms"]
                if e.get("data", {}).get("msg_id") == "notebook.ready":
                    ts["ready"] = e["ts_ms"]
            created = info["created_at_ms"]
            samples.append({
                "total_ms": (t1 - t0) * 1000,
                "queue_ms": ts["starting"] - created,
                "launch_ms": ts["running"] - ts["starting"],
                "jupyter_ms": ts["ready"] - ts["running"],
                "cli_check_ms": t1 * 1000 - ts["ready"],
            })
            subprocess.run([LATHE, "stop", run], env=env, capture_output=True)
            for _ in range(300):
                st = json.loads(subprocess.run([LATHE, "inspect", "--json", run], env=env,
                                               capture_output=True, text=True).stdout)["state"]
                if st not in ("running", "stopping"):
                    break
                time.sleep(0.05)
        return samples
    finally:
        if image_tar:  # the store's containers and images, before its home goes
            store = os.path.join(home, "images")
            penv = dict(os.environ, CONTAINERS_CONF=store + "/containers.conf",
                        CONTAINERS_STORAGE_CONF=store + "/storage.conf")
            base = ["podman", "--root", store + "/graph", "--runroot", store + "/run"]
            subprocess.run(base + ["rm", "--all", "--force"], env=penv, capture_output=True)
            subprocess.run(base + ["rmi", "--all", "--force"], env=penv, capture_output=True)
        d.terminate()
        d.wait()
        log.close()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def direct_runs(n):
    samples = []
    for _ in range(n):
        tmp = tempfile.mkdtemp(prefix="lathe-bench-jup-")
        sock = os.path.join(tmp, "s.sock")
        env = dict(os.environ, JUPYTER_CONFIG_DIR=tmp + "/c", JUPYTER_DATA_DIR=tmp + "/d",
                   JUPYTER_RUNTIME_DIR=tmp + "/r", IPYTHONDIR=tmp + "/i", JUPYTER_TOKEN="t" * 48)
        t0 = time.time()
        p = subprocess.Popen(["jupyter-notebook", "--no-browser", "--allow-root", "--sock=" + sock,
                              "--notebook-dir=" + tmp], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        while True:
            try:
                c = UnixHTTP(sock)
                c.request("GET", "/api/status", headers={"Authorization": "token " + "t" * 48})
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.02)
        samples.append({"total_ms": (time.time() - t0) * 1000})
        p.terminate()
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--image", help="a root file system's tar with jupyter-notebook")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "notebook_start.json"))
    a = ap.parse_args()
    lathe = lathe_runs(a.n)
    image = lathe_runs(a.n, a.image) if a.image else []
    direct = direct_runs(a.n)
    summary = {}
    for name, samples in (("lathe_", lathe), ("lathe_image_", image)):
        for key in ["total_ms", "queue_ms", "launch_ms", "jupyter_ms", "cli_check_ms"]:
            xs = [s[key] for s in samples]
            if xs:
                summary[name + key] = {"p50": statistics.median(xs), "max": max(xs)}
    xs = [s["total_ms"] for s in direct]
    summary["direct_total_ms"] = {"p50": statistics.median(xs), "max": max(xs)}
    summary["lathe_over_direct_p50"] = (summary["lathe_total_ms"]["p50"] /
                                        summary["direct_total_ms"]["p50"])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"summary": summary, "lathe": lathe, "lathe_image": image, "direct": direct}, f,
                  indent=2)
    json.dump(summary, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

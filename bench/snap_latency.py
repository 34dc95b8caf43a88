#!/usr/bin/python3
"""Capture latency: `os.replace` of a 256 MiB checkpoint -> snapshot committed.

Runs `lathe snap watch` (the watcher + store, as the daemon will use them) on a
directory, then N times: writes a 256 MiB safetensors checkpoint (64 tensors,
a fraction --changed of them new each time) to a temp
file and `os.replace`s it into place, the way a training script saves
atomically. The latency is from just before `os.replace` to the moment
`lathe snap watch` prints the committed snapshot (its clock, the same wall
clock). It includes the watcher's quiet period (200 ms). Also measures the
restore of the latest 256 MiB snapshot into an empty directory (the store's
part of a resume). Usage (from the repository root):

    /usr/bin/python3 bench/snap_latency.py [--lathe build/lathe] [--reps 20] [--mib 256] [--changed 1.0] [--interval S]
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time


class Checkpoint:
    """64 float32 tensors; each save rewrites a fraction of them (1.0: a full training step)."""

    def __init__(self, mib, changed):
        self.tensors = [os.urandom((mib << 20) // 64) for _ in range(64)]
        self.changed = changed
        self.rng = random.Random(7)

    def save(self, path):
        for i in self.rng.sample(range(64), max(1, round(64 * self.changed))):
            self.tensors[i] = os.urandom(len(self.tensors[i]))
        header, off = {}, 0
        for i, t in enumerate(self.tensors):
            header[f"layer{i}"] = {"dtype": "F32", "shape": [len(t) // 4], "data_offsets": [off, off + len(t)]}
            off += len(t)
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for t in self.tensors:
                f.write(t)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", default="build/lathe")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--changed", type=float, default=1.0, help="fraction of the tensors each save rewrites")
    ap.add_argument("--interval", type=float, default=0.0,
                    help="seconds between one snapshot and the next save (0: back to back, a stress test)")
    ap.add_argument("--out", default="bench/snap_latency_results.json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lathe-snap-lat-", dir="/var/tmp")
    src, store = os.path.join(work, "ckpt"), os.path.join(work, "store")
    os.makedirs(src)
    env = dict(os.environ, LANG="C.UTF-8")
    watch = subprocess.Popen([os.path.abspath(a.lathe), "snap", "--store", store, "watch", src, "--reserve", "0"],
                             stdout=subprocess.PIPE, text=True, env=env)
    ckpt = Checkpoint(a.mib, a.changed)
    lat, restore, snap_ms, parts = [], [], [], []
    try:
        time.sleep(1)  # the watcher is up
        for i in range(a.reps):
            tmp = os.path.join(src, "model.safetensors.tmp")
            ckpt.save(tmp)
            t0 = time.time()
            os.replace(tmp, os.path.join(src, "model.safetensors"))
            while True:
                line = json.loads(watch.stdout.readline())
                if "model.safetensors" in line["paths"]:
                    break
            if "error" in line:
                raise SystemExit(line["error"])
            lat.append(line["time_ms"] / 1000 - t0)
            snap_ms.append(line.get("snapshot_ms", 0))
            parts.append([line.get("capture_ms", 0), line.get("commit_ms", 0)])
            print(f"{i}: {lat[-1] * 1000:.0f} ms (snapshot itself {snap_ms[-1]} ms: capture {parts[-1][0]}, "
                  f"commit {parts[-1][1]})", flush=True)
            time.sleep(a.interval)
        for i in range(3):
            out = os.path.join(work, f"restore{i}")
            t0 = time.time()
            subprocess.run([a.lathe, "snap", "--store", store, "restore", "latest", "--to", out], check=True,
                           capture_output=True, env=env)
            restore.append(time.time() - t0)
            shutil.rmtree(out)
    finally:
        watch.kill()
        watch.wait()
        shutil.rmtree(work, ignore_errors=True)
    res = {"mib": a.mib, "reps": a.reps, "changed": a.changed, "interval_s": a.interval, "latency_s": lat, "snapshot_ms": snap_ms, "capture_commit_ms": parts, "p50_s": pct(lat, 50), "p99_s": pct(lat, 99),
           "max_s": max(lat), "restore_s": restore, "load": os.getloadavg(), "nproc": os.cpu_count()}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"capture p50 {res['p50_s'] * 1000:.0f} ms, p99 {res['p99_s'] * 1000:.0f} ms; "
          f"restore {a.mib} MiB median {sorted(restore)[1]:.2f} s")


if __name__ == "__main__":
    main()

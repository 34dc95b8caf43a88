#!/usr/bin/python3
"""Submission cost against the queue's length: Lathe next to Slurm's sbatch.

A blocker holds all 4 (simulated) GPUs; then N 1-GPU jobs are submitted one
after another (Lathe: POST /api/v1/runs over the unix socket on one kept-alive
connection; Slurm: sbatch), so each lands behind everything submitted before
it. Reported per tool: the p50 submission time of the first and the last 100
submissions, of each block of N/10, and the total. With --sizes several queue
lengths are measured, each on a fresh daemon.

    /usr/bin/python3 bench/queue_bench.py --sizes 100,1000,10000 [--no-slurm]

Needs what bench/sched_bench.py needs (root, scripts/deps.sh --bench for
Slurm). Stdlib only.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sched_bench import NGPUS, Lathe, Slurm, log, loadavg, wait_stamp  # noqa: E402
from stats import pct  # noqa: E402


def curve(each):
    k = max(1, len(each) // 10)
    blocks = [round(pct(each[i:i + k], 50), 3) for i in range(0, len(each), k)]
    first = each[:min(100, len(each))]
    last = each[-min(100, len(each)):]
    return {"n": len(each), "total_s": round(sum(each) / 1000, 3),
            "first_100_p50_ms": round(pct(first, 50), 3), "last_100_p50_ms": round(pct(last, 50), 3),
            "first_100_mean_ms": round(sum(first) / len(first), 3),
            "last_100_mean_ms": round(sum(last) / len(last), 3),
            "tenths_p50_ms": blocks}


def measure(tool, jobdir, submit, n):
    """The blocker (all GPUs), then n 1-GPU jobs one after another; `submit(cmd, gpus)`."""
    tool.start()
    try:
        os.makedirs(jobdir)
        stamp = os.path.join(jobdir, "block.start")
        submit(f"date +%s%N > {stamp}; sleep 3600", NGPUS)
        if wait_stamp(stamp, 60) is None:
            raise RuntimeError("the blocker did not start")
        each = []
        for _ in range(n):
            t = time.perf_counter_ns()
            submit("true", 1)
            each.append((time.perf_counter_ns() - t) / 1e6)
        return curve(each)
    finally:
        tool.stop()


def lathe_curve(exe, base, n):
    lathe = Lathe(exe, base)
    jobdir = os.path.join(base, "jobs-lathe")
    return measure(lathe, jobdir, lambda cmd, g: lathe.submit_api(cmd, g, jobdir, fresh=False), n)


def slurm_curve(base, n):
    slurm = Slurm(base)
    jobdir = os.path.join(base, "jobs-slurm")
    return measure(slurm, jobdir, lambda cmd, g: slurm.submit(cmd, g, jobdir), n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lathe", default="build/lathe")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--no-slurm", action="store_true")
    ap.add_argument("--out", default="queue_bench.json")
    ap.add_argument("--tmp", default="/var/tmp")
    a = ap.parse_args()
    exe = os.path.abspath(a.lathe)
    out = {"load_before": loadavg(), "sizes": {}}
    for n in [int(x) for x in a.sizes.split(",")]:
        row = {}
        for name in (["lathe"] if a.no_slurm else ["lathe", "slurm"]):
            base = tempfile.mkdtemp(prefix=f"lathe-qb-{name}-", dir=a.tmp)
            os.chmod(base, 0o755)
            try:
                log(f"{name}: {n} submissions")
                row[name] = lathe_curve(exe, base, n) if name == "lathe" else slurm_curve(base, n)
                log(f"{name} {n}: {json.dumps(row[name])}")
            finally:
                shutil.rmtree(base, ignore_errors=True)
        out["sizes"][str(n)] = row
    out["load_after"] = loadavg()
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

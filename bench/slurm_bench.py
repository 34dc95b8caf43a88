#!/usr/bin/python3
"""Slurm pools benchmark: a Lathe pool next to bare Slurm 22.05 on the same private cluster.

Starts everything it measures itself, in a fresh temporary directory, on loopback only: the
private Slurm of tests/integ/slurm_cluster.py (munged on its own socket, slurmctld, one slurmd
with 2 CPUs and 2 fake GPUs, partition `debug`), a second partition `held` that is DOWN (jobs sent
there stay PENDING), and `lathe daemon` with two pools, `cluster` (partition debug) and `held`.

Measures, in one run:
  1. submit -> running latency of N trivial jobs, one after another, the two interleaved:
     `lathe run --pool cluster -- sh -c 'date +%s%N > F'` and `sbatch --wrap 'date +%s%N > F'`.
     Latency = the job's first timestamp - the time taken just before the submission started.
  2. slurmctld RPCs (sdiag, reset with `sdiag -r`) over 20 ticks of 2 s (SqueuePlanner's
     shortest interval) while 10, then 1,000 Lathe runs wait in the DOWN partition: what Lathe's
     daemon costs, beside a per-job polling loop like dstack's (`squeue -j ID` per job per tick)
     over the same jobs. The 1,000-job loop is measured over fewer ticks (--peer-ticks-1000): it
     costs exactly N RPCs a tick, and each tick takes longer than 2 s here.

Prints a markdown table and writes every figure (and the raw samples) as JSON. Needs root and the
packages of `scripts/deps.sh` (Slurm, munge), and a built `lathe` (LATHE_BIN, default
build/lathe). Stdlib only; run it with /usr/bin/python3, under
`flock /tmp/lathe-private-slurm.lock` when other private Slurms may start on this machine.
"""

import argparse
import concurrent.futures
import ctypes
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
os.environ.setdefault("LATHE_BIN", os.path.join(REPO, "build", "lathe"))
sys.path.insert(0, os.path.join(REPO, "tests", "integ"))
import slurm_cluster  # noqa: E402
from harness import LATHE, Daemon  # noqa: E402
from test_slurm import children_of, descendants  # noqa: E402
from stats import pct  # noqa: E402  (bench/stats.py)

TICK_S = 2.0
PR_SET_CHILD_SUBREAPER = 36


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def summary(xs):
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99), "min": min(xs), "max": max(xs),
            "mean": sum(xs) / len(xs)}


def sdiag(cluster):
    """RPC counts by message type since the last reset: {"REQUEST_JOB_INFO": 12, ...}."""
    out = cluster.run("/usr/bin/sdiag").stdout
    counts = {}
    in_types = False
    for line in out.splitlines():
        if "statistics by message type" in line:
            in_types = True
            continue
        if "statistics by user" in line:
            break
        m = re.match(r"\s*(\w+)\s*\(\s*\d+\)\s*count:(\d+)", line)
        if in_types and m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def job_info_rpcs(counts):
    return sum(v for k, v in counts.items() if k.startswith("REQUEST_JOB_INFO"))


def wait_file(path, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                s = f.read().strip()
            if s:
                return int(s)
        except OSError:
            pass
        time.sleep(0.005)
    raise RuntimeError(f"{path} never appeared")


def queue_empty(cluster, partition="debug", timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.run("/usr/bin/squeue", "-h", "-p", partition).stdout.strip() == "":
            return
        time.sleep(0.05)
    raise RuntimeError("the queue did not empty")


def latency(d, cluster, shared, stamps, n):
    lathe, bare = [], []
    for i in range(n):
        for who in (("lathe", "sbatch") if i % 2 == 0 else ("sbatch", "lathe")):
            f = os.path.join(stamps, f"{who}-{i}")
            cmd = f"date +%s%N > {f}"
            t0 = time.time_ns()
            if who == "lathe":
                d.cli("run", "--pool", "cluster", "--workdir", shared, "--", "sh", "-c", cmd)
            else:
                p = cluster.run("/usr/bin/sbatch", "--parsable", "-p", "debug", "-o", "/dev/null",
                                "--wrap", cmd)
                if p.returncode != 0:
                    raise RuntimeError("sbatch: " + p.stderr)
            ms = (wait_file(f) - t0) / 1e6
            (lathe if who == "lathe" else bare).append(ms)
            queue_empty(cluster)
        log(f"latency {i + 1}/{n}: lathe {lathe[-1]:.0f} ms, sbatch {bare[-1]:.0f} ms")
    return lathe, bare


def held_job_ids(cluster):
    out = cluster.run("/usr/bin/squeue", "-h", "-p", "held", "-o", "%i").stdout
    return out.split()


def submit_held(d, shared, count):
    def one(_):
        d.cli("run", "--pool", "held", "--workdir", shared, "--", "true")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(count)))


def rpcs_over_ticks(cluster, ticks, body=None):
    """Resets sdiag, runs `body` once per tick (or just waits), returns (counts, seconds)."""
    cluster.run("/usr/bin/sdiag", "-r")
    start = time.monotonic()
    late = 0
    for t in range(ticks):
        if body:
            body()
        next_at = start + (t + 1) * TICK_S
        if time.monotonic() > next_at:
            late += 1
        time.sleep(max(0.0, next_at - time.monotonic()))
    return sdiag(cluster), time.monotonic() - start, late


def rpc_phase(d, cluster, shared, target, ticks, peer_ticks):
    have = len(held_job_ids(cluster))
    log(f"submitting {target - have} runs to the held pool")
    t0 = time.monotonic()
    submit_held(d, shared, target - have)
    deadline = time.monotonic() + 600
    while len(held_job_ids(cluster)) < target:
        if time.monotonic() > deadline:
            raise RuntimeError("the runs did not all reach Slurm")
        time.sleep(0.5)
    log(f"{target} jobs pending in Slurm after {time.monotonic() - t0:.0f} s")
    lathe_counts, lathe_s, _ = rpcs_over_ticks(cluster, ticks)
    ids = held_job_ids(cluster)

    def per_job_poll():
        for job in ids:
            cluster.run("/usr/bin/squeue", "-h", "-j", job, "-o", "%T")
    # The daemon polls at the same time; its own share in this window is in lathe_counts.
    peer_counts, peer_s, late = rpcs_over_ticks(cluster, peer_ticks, per_job_poll)
    return {
        "runs": target,
        "lathe": {"ticks": ticks, "seconds": lathe_s, "job_info_rpcs": job_info_rpcs(lathe_counts),
                  "total_rpcs": sum(lathe_counts.values()), "by_type": lathe_counts},
        "per_job_loop": {"ticks": peer_ticks, "seconds": peer_s, "ticks_over_2s": late,
                         "job_info_rpcs": job_info_rpcs(peer_counts),
                         "total_rpcs": sum(peer_counts.values()), "by_type": peer_counts},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="latency samples per side")
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--peer-ticks-1000", type=int, default=2)
    ap.add_argument("--counts", default="10,1000")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "slurm_bench.json"))
    args = ap.parse_args()
    why = slurm_cluster.missing()
    if why:
        sys.exit("cannot start a private Slurm: " + why)
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    base = tempfile.mkdtemp(prefix="lathe-slurm-bench-")
    os.chmod(base, 0o755)
    cluster = slurm_cluster.Cluster(base, gpus=2, cpus=2)
    d = None
    result = {"lathe": LATHE, "host_cpus": os.cpu_count(), "tick_s": TICK_S}
    try:
        cluster.start()
        p = cluster.run("/usr/bin/scontrol", "create", "PartitionName=held",
                        f"Nodes={cluster.host}", "State=DOWN")
        if p.returncode != 0:
            raise RuntimeError("scontrol create: " + p.stderr)
        shared = os.path.join(base, "shared")
        stamps = os.path.join(base, "stamps")
        os.makedirs(shared)
        os.chmod(shared, 0o1777)
        os.makedirs(stamps)
        d = Daemon(gpus="none")
        with open(os.path.join(d.home, "config.yaml"), "w") as f:
            for name, part in (("cluster", "debug"), ("held", "held")):
                f.write(("pools:\n" if name == "cluster" else "") +
                        f"  {name}:\n    type: slurm\n    partition: {part}\n"
                        f"    shared_dir: {shared}\n    slurm_conf: {cluster.conf}\n"
                        f"    lathe_path: {os.path.abspath(LATHE)}\n")
        d.start()
        log(f"latency: {args.n} jobs each way")
        lathe_ms, bare_ms = latency(d, cluster, shared, stamps, args.n)
        result["latency_ms"] = {"lathe": summary(lathe_ms), "sbatch": summary(bare_ms),
                                "ratio_p50": pct(lathe_ms, 50) / pct(bare_ms, 50),
                                "samples": {"lathe": lathe_ms, "sbatch": bare_ms}}
        result["rpcs"] = []
        for target in (int(x) for x in args.counts.split(",")):
            peer_ticks = args.ticks if target <= 100 else args.peer_ticks_1000
            result["rpcs"].append(rpc_phase(d, cluster, shared, target, args.ticks, peer_ticks))
            log(json.dumps({k: v for k, v in result["rpcs"][-1].items()})[:400])
    finally:
        if d:
            d.cleanup()
        cluster.stop()
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children_of(os.getpid()):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        shutil.rmtree(base, ignore_errors=True)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    lat = result["latency_ms"]
    print("| submit → running (ms) | p50 | p99 |\n|---|---|---|")
    for k in ("lathe", "sbatch"):
        print(f"| {k} | {lat[k]['p50']:.0f} | {lat[k]['p99']:.0f} |")
    print(f"\nratio of medians: {lat['ratio_p50']:.2f}\n")
    print("| queued runs | Lathe: job-info RPCs / ticks | per-job loop: job-info RPCs / ticks |"
          "\n|---|---|---|")
    for r in result["rpcs"]:
        a, b = r["lathe"], r["per_job_loop"]
        print(f"| {r['runs']} | {a['job_info_rpcs']} / {a['ticks']} | "
              f"{b['job_info_rpcs']} / {b['ticks']} ({b['seconds']:.1f} s) |")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Resume time: from a job's process dying to the restarted process holding
its restored checkpoint.

Starts `lathe daemon` on a temporary home and submits a job with
`--checkpoint-dir` and `--retry`. Its first attempt saves one checkpoint of
--mib MiB (random bytes, a safetensors file: a format Lathe checks) with the
atomic pattern and then sleeps. Once the daemon has committed the snapshot,
the script freezes the job (SIGSTOP), optionally wipes the checkpoint
directory (so only Lathe's snapshot can bring it back: --wipe, the default),
takes the time, and SIGKILLs it. The restarted attempt records when its
interpreter started and when it had read the whole file named by
LATHE_RESUME_FROM. Reported per repetition:

  lathe   kill -> the restarted process's first instruction (the daemon notices
          the exit, finishes the last capture, restores, starts the monitor)
  load    reading the checkpoint back (what the job itself does)
  total   kill -> checkpoint in memory

plus the interpreter's own start-up (python3 -c pass), measured alone, so
`lathe` can be read against the "under 2 s plus the interpreter's start" target.

    /usr/bin/python3 bench/resume_bench.py [--lathe build/lathe] [--reps 5] [--mib 256] [--no-wipe]
                                           [--retry-backoff 0s]

The `lathe` part includes the daemon's retry backoff (config.yaml `retry_backoff`, 1 s by default since
the retry backoff exists); --retry-backoff 0s measures resuming alone.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

JOB = r'''
import json, os, sys, time
t0 = time.time()
resume = os.environ.get("LATHE_RESUME_FROM")
ckpt = os.environ["LATHE_CHECKPOINT_DIR"]
if resume:
    with open(resume, "rb") as f:
        n = 0
        while True:
            b = f.read(16 << 20)
            if not b:
                break
            n += len(b)
    print(json.dumps({"exec_start": t0, "loaded": time.time(), "bytes": n}), flush=True)
    sys.exit(0)
mib = int(sys.argv[1])
header = json.dumps({"w": {"dtype": "U8", "shape": [mib << 20], "data_offsets": [0, mib << 20]}}).encode()
path = os.path.join(ckpt, "model.safetensors")
with open(path + ".tmp", "wb") as f:
    f.write(len(header).to_bytes(8, "little") + header)
    for _ in range(mib):
        f.write(os.urandom(1 << 20))
    f.flush()
    os.fsync(f.fileno())
os.replace(path + ".tmp", path)
print("saved", flush=True)
time.sleep(3600)
'''


def run_cli(bin_, home, *argv):
    env = dict(os.environ, LATHE_HOME=home, LANG="C.UTF-8")
    r = subprocess.run([bin_, *argv], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"lathe {' '.join(argv)}: {r.stderr}")
    return r.stdout


def inspect(bin_, home, ref):
    return json.loads(run_cli(bin_, home, "inspect", "--json", ref))


def wait(pred, what, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise RuntimeError("timed out waiting for " + what)


def one(a, home, work, job_py, rep):
    ckpt = os.path.join(work, f"ckpt-{rep}")
    rid = run_cli(a.lathe, home, "run", "--retry", "1", "--checkpoint-dir", ckpt, "--",
                  "/usr/bin/python3", job_py, str(a.mib)).strip()
    wait(lambda: any(e["type"] == "checkpoint" and e["data"].get("resume_point")
                     for e in inspect(a.lathe, home, rid)["events"]), "the snapshot")
    r = inspect(a.lathe, home, rid)
    with open(f"{r['run_dir']}/attempt-1/monitor.json") as f:
        pid = json.load(f)["child_pid"]
    os.kill(pid, signal.SIGSTOP)
    if a.wipe:
        shutil.rmtree(ckpt)
        os.makedirs(ckpt)
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    r = wait(lambda: (lambda x: x if x["state"] in ("succeeded", "failed") else None)(
        inspect(a.lathe, home, rid)), "the restarted attempt")
    if r["state"] != "succeeded":
        raise RuntimeError(f"run {rid} {r['state']}: {r['reason']}")
    line = [l for l in run_cli(a.lathe, home, "logs", rid).splitlines() if l.startswith("{")][-1]
    got = json.loads(line)
    assert got["bytes"] >= a.mib << 20, got
    restored = [e for e in r["events"] if e["message"].startswith("restored snapshot")]
    shutil.rmtree(ckpt, ignore_errors=True)
    return {"lathe_ms": (got["exec_start"] - t_kill) * 1000, "load_ms": (got["loaded"] - got["exec_start"]) * 1000,
            "total_ms": (got["loaded"] - t_kill) * 1000, "restored": bool(restored)}


def interpreter_ms(n=10):
    xs = []
    for _ in range(n):
        t = time.time()
        subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)
        xs.append((time.time() - t) * 1000)
    return statistics.median(xs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lathe", default=os.path.join(os.path.dirname(__file__), "..", "build", "lathe"))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--no-wipe", dest="wipe", action="store_false")
    p.add_argument("--retry-backoff", default=None,
                   help="the daemon's retry_backoff (config.yaml); default: the daemon's own (1s)")
    p.add_argument("--out")
    a = p.parse_args()
    a.lathe = os.path.abspath(a.lathe)
    tmp = tempfile.mkdtemp(prefix="resume-bench-", dir="/var/tmp")
    home, work = os.path.join(tmp, "home"), os.path.join(tmp, "work")
    os.makedirs(home)
    os.makedirs(work)
    job_py = os.path.join(tmp, "job.py")
    with open(job_py, "w") as f:
        f.write(JOB)
    if a.retry_backoff is not None:  # the wait before a failed run's retry is part of `lathe`
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write(f"retry_backoff: {a.retry_backoff}\n")
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    d = subprocess.Popen([a.lathe, "daemon", "--home", home, "--gpus", "none", "--port", "0"],
                         stdout=log, stderr=log, env=dict(os.environ, LATHE_HOME=home))
    try:
        wait(lambda: subprocess.run([a.lathe, "status"], env=dict(os.environ, LATHE_HOME=home),
                                    capture_output=True).returncode == 0, "the daemon", 60)
        rows = []
        for rep in range(a.reps):
            row = one(a, home, work, job_py, rep)
            rows.append(row)
            print(f"rep {rep}: lathe {row['lathe_ms']:.0f} ms, load {row['load_ms']:.0f} ms, "
                  f"total {row['total_ms']:.0f} ms, restored {row['restored']}", flush=True)
        py = interpreter_ms()
        summary = {k: {"median": statistics.median(r[k] for r in rows), "max": max(r[k] for r in rows)}
                   for k in ("lathe_ms", "load_ms", "total_ms")}
        result = {"mib": a.mib, "wipe": a.wipe, "reps": rows, "summary": summary, "python_start_ms": py,
                  "load_avg": os.getloadavg()}
        print(json.dumps(summary, indent=1))
        print(f"python3 -c pass: {py:.0f} ms; load average {os.getloadavg()[0]:.2f}")
        if a.out:
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=30)
        subprocess.run(["pkill", "-9", "-f", "__monitor " + home], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

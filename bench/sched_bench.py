#!/usr/bin/python3
"""Scheduler benchmark: Lathe next to Slurm 22.05 on one machine.

Starts everything it measures itself, in a fresh temporary directory, on
loopback and unix sockets only:
  munged (own socket), slurmctld + slurmd (generated slurm.conf, 4 fake GPUs as
  GRES backed by character devices), and `lathe daemon --gpus sim:4x24GB`.

Measures, in one run:
  1. submit -> running latency of N trivial jobs submitted one after another
     (Lathe CLI, Lathe REST API over the unix socket, Slurm sbatch; the three
     are interleaved, the order rotating every round). Each job's first action
     is `date +%s%N > FILE`; latency = that timestamp - the time taken just
     before the submission started.
  2. placement of M queued 1-GPU jobs: a blocker holds all 4 GPUs, M jobs are
     queued behind it, the blocker is released; time until all M started and
     until the scheduler reports all M finished.
  3. idle RSS of the daemons (VmRSS after 5 s idle), before and after the
     load, and `lathe ps` / `squeue` wall time with hyperfine.

Prints a markdown table and writes every figure (and the raw samples) as JSON.
Needs root (munged runs as the munge user, slurmd as root, mknod), the Debian
packages from `scripts/deps.sh --bench`, and a built `lathe`.
Stdlib only; run it with /usr/bin/python3.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from stats import pct  # bench/stats.py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NGPUS = 4


# ---------------------------------------------------------------- helpers ----

def now_ns():
    return time.time_ns()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def summary(xs):
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99),
            "max": max(xs), "min": min(xs), "mean": sum(xs) / len(xs)}


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def vm_rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_stamp(path):
    """The job's nanosecond timestamp, or None while it is not written yet."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    if not text.endswith("\n"):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def wait_stamp(path, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = read_stamp(path)
        if v is not None:
            return v
        time.sleep(0.002)
    return None


def run_out(argv, env=None, timeout=60):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def first_line(argv):
    try:
        p = run_out(argv)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


# ------------------------------------------------------------------ Lathe ----

class Lathe:
    def __init__(self, exe, base):
        self.exe = exe
        self.home = os.path.join(base, "lathe")
        os.makedirs(self.home, mode=0o700)
        self.sock = os.path.join(self.home, "lathe.sock")
        self.env = dict(os.environ, LATHE_HOME=self.home)
        self.proc = None
        self.conn = None

    def start(self):
        self.logf = open(os.path.join(self.home, "daemon.out"), "w")
        self.proc = subprocess.Popen(
            [self.exe, "daemon", "--home", self.home, "--gpus", f"sim:{NGPUS}x24GB", "--port", "0"],
            env=self.env, stdout=self.logf, stderr=subprocess.STDOUT, cwd=self.home)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lathe daemon exited with {self.proc.returncode}; see {self.home}/daemon.out")
            if os.path.exists(self.sock):
                try:
                    st, _ = self.request("GET", "/api/v1/status", fresh=True)
                    if st == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError("lathe daemon did not come up in 30 s")

    def request(self, method, path, body=None, fresh=False):
        """One HTTP request over the unix socket; `fresh` opens a new connection."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if fresh:
            c = UnixHTTPConnection(self.sock)
            try:
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                return r.status, json.loads(r.read() or b"null")
            finally:
                c.close()
        for attempt in range(2):
            if self.conn is None:
                self.conn = UnixHTTPConnection(self.sock)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, json.loads(r.read() or b"null")
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def submit_api(self, cmd, gpus, workdir, fresh=True):
        st, j = self.request("POST", "/api/v1/runs",
                             {"command": ["sh", "-c", cmd], "gpus": gpus, "workdir": workdir},
                             fresh=fresh)
        if st != 201:
            raise RuntimeError(f"POST /api/v1/runs -> {st}: {j}")
        return j["id"]

    def submit_cli(self, cmd, gpus, workdir):
        p = run_out([self.exe, "run", "--gpus", str(gpus), "--workdir", workdir, "--", "sh", "-c", cmd],
                    env=self.env)
        if p.returncode != 0:
            raise RuntimeError(f"lathe run: rc {p.returncode}: {p.stderr.strip()}")
        return p.stdout.strip().split()[-1]

    def active(self):
        st, j = self.request("GET", "/api/v1/runs")
        return j["runs"] if st == 200 else None

    def get(self, run_id):
        st, j = self.request("GET", f"/api/v1/runs/{run_id}")
        return j if st == 200 else None

    def stop_all_active(self):
        try:
            for r in self.active() or []:
                self.request("POST", f"/api/v1/runs/{r['id']}/stop")
        except (OSError, http.client.HTTPException):
            pass

    def stop(self):
        if self.conn:
            self.conn.close()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------------------------------------ Slurm ----

class Slurm:
    def __init__(self, base):
        self.base = base
        self.dir = os.path.join(base, "slurm")
        self.mdir = os.path.join(base, "munge")
        self.procs = {}
        self.host = socket.gethostname().split(".")[0]
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def write_config(self):
        d = self.dir
        for sub in ("ctld", "spool", "dev"):
            os.makedirs(os.path.join(d, sub))
        for i in range(NGPUS):  # GRES needs character devices; nvidia's major is 195
            os.mknod(os.path.join(d, "dev", f"fakegpu{i}"), 0o600 | 0o020000, os.makedev(195, i))
        sock = os.path.join(self.mdir, "munge.sock")
        conf = f"""ClusterName=bench
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
SchedulerType=sched/backfill
MaxJobCount=50000
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={NGPUS} Sockets=1 CoresPerSocket={NGPUS} ThreadsPerCore=1 RealMemory=4000 Gres=gpu:fake:{NGPUS} State=UNKNOWN
PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)
        with open(os.path.join(d, "gres.conf"), "w") as f:
            f.write(f"NodeName={self.host} Name=gpu Type=fake File={d}/dev/fakegpu[0-{NGPUS - 1}]\n")

    def _spawn(self, name, argv, user=None):
        out = open(os.path.join(self.base, f"{name}.out"), "w")
        if user:
            argv = ["runuser", "-u", user, "--"] + argv
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=self.base)

    def start(self):
        os.makedirs(self.dir)
        os.makedirs(self.mdir, mode=0o755)
        os.chmod(self.mdir, 0o755)
        shutil.chown(self.mdir, "munge", "munge")
        m = self.mdir
        self._spawn("munged", ["/usr/sbin/munged", "-F", f"--socket={m}/munge.sock",
                               "--key-file=/etc/munge/munge.key", f"--pid-file={m}/munged.pid",
                               f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"],
                    user="munge")
        deadline = time.monotonic() + 10
        while not os.path.exists(f"{m}/munge.sock"):
            if time.monotonic() > deadline or self.procs["munged"].poll() is not None:
                raise RuntimeError(f"munged did not start; see {self.base}/munged.out")
            time.sleep(0.05)
        self.write_config()
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["/usr/sbin/slurmd", "-D"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for n, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{n} exited with {p.returncode}; see {self.base}/{n}.out")
            p = run_out(["sinfo", "-h", "-o", "%t"], env=self.env)
            if p.returncode == 0 and p.stdout.strip() == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError("slurm node did not become idle in 60 s")

    def submit(self, cmd, gres, workdir):
        p = run_out(["sbatch", "--parsable", f"--gres=gpu:{gres}", "-o", "/dev/null", "-J", "bench",
                     f"--chdir={workdir}", "--wrap", cmd], env=self.env)
        if p.returncode != 0:
            raise RuntimeError(f"sbatch: rc {p.returncode}: {p.stderr.strip()}")
        return p.stdout.strip().split(";")[0]

    def queue_len(self):
        p = run_out(["squeue", "-h", "-o", "%i"], env=self.env)
        return len(p.stdout.split()) if p.returncode == 0 else None

    def stop(self):
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            run_out(["scancel", "--user=root"], env=self.env)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if not p or p.poll() is not None:
                continue
            # munged runs under runuser: signal runuser's child by PID as well.
            pids = [p.pid] + children(p.pid)
            for pid in reversed(pids):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def pid(self, name):
        """The daemon's own PID (for munged: the child of runuser)."""
        p = self.procs[name]
        kids = children(p.pid)
        return kids[0] if name == "munged" and kids else p.pid


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


# ------------------------------------------------------------- hyperfine ----

def hyperfine(cmds, env, out_json):
    argv = ["hyperfine", "-N", "--warmup", "5", "--min-runs", "30", "--style", "none",
            "--export-json", out_json] + cmds
    p = run_out(argv, env=env, timeout=600)
    if p.returncode != 0:
        return {c: {"error": p.stderr.strip()[-300:]} for c in cmds}
    with open(out_json) as f:
        res = json.load(f)["results"]
    return {r["command"]: {"mean_ms": r["mean"] * 1e3, "median_ms": r["median"] * 1e3,
                           "stddev_ms": r["stddev"] * 1e3, "min_ms": r["min"] * 1e3,
                           "max_ms": r["max"] * 1e3, "user_ms": r["user"] * 1e3,
                           "system_ms": r["system"] * 1e3, "runs": len(r["times"])} for r in res}


# ------------------------------------------------------------- the bench ----

def idle_rss(lathe, slurm, idle_s):
    time.sleep(idle_s)
    out = {"lathe_daemon": vm_rss_kb(lathe.proc.pid)}
    if slurm:
        for n in ("slurmctld", "slurmd", "munged"):
            out[n] = vm_rss_kb(slurm.pid(n))
    return out


def latency_phase(lathe, slurm, n, jobdir, timeout_s):
    kinds = ["lathe_cli", "lathe_api"] + (["slurm_sbatch"] if slurm else [])
    res = {k: [] for k in kinds}
    for i in range(n):
        rot = i % len(kinds)
        for kind in kinds[rot:] + kinds[:rot]:
            stamp = os.path.join(jobdir, f"lat-{kind}-{i}.start")
            cmd = f"date +%s%N > {stamp}"
            t0 = now_ns()
            if kind == "lathe_cli":
                jid = lathe.submit_cli(cmd, 1, jobdir)
            elif kind == "lathe_api":
                jid = lathe.submit_api(cmd, 1, jobdir, fresh=True)
            else:
                jid = slurm.submit(cmd, 1, jobdir)
            t1 = now_ns()
            started = wait_stamp(stamp, timeout_s)
            if started is None:
                raise RuntimeError(f"{kind} job {jid} ({i}) did not start within {timeout_s} s")
            res[kind].append({"id": jid, "submit_ns": t0, "returned_ns": t1, "start_ns": started})
        if (i + 1) % 25 == 0:
            log(f"latency: {i + 1}/{n} rounds, load {loadavg()}")
    return res


def lathe_phases(lathe, samples):
    """Splits Lathe's latency with the run's own event timestamps (ms)."""
    out = []
    for s in samples:
        r = lathe.get(s["id"])
        if not r:
            continue
        ts = {e["data"].get("to"): e["ts_ms"] for e in r.get("events", []) if e.get("type") == "state"}
        if "starting" not in ts or "running" not in ts:
            continue
        sub_ms, start_ms = s["submit_ns"] / 1e6, s["start_ns"] / 1e6
        out.append({
            "submit_to_created": r["created_at_ms"] - sub_ms,     # client start + HTTP + insert
            "created_to_starting": ts["starting"] - r["created_at_ms"],  # scheduler wake-up + placement
            "starting_to_job": start_ms - ts["starting"],         # dirs, cgroup, monitor fork/exec, exec
            "job_to_running": ts["running"] - start_ms,           # handshake back + state write
            "submit_returned": (s["returned_ns"] - s["submit_ns"]) / 1e6,
        })
    return {k: summary([o[k] for o in out]) for k in (out[0].keys() if out else [])}


def wait_all_stamps(jobdir, prefix, m, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        names = [x for x in os.listdir(jobdir) if x.startswith(prefix)]
        if len(names) >= m:
            stamps = [read_stamp(os.path.join(jobdir, x)) for x in names]
            if all(v is not None for v in stamps):
                return stamps
        time.sleep(0.1)
    return None


def placement_lathe(lathe, m, jobdir, timeout_s):
    rel = os.path.join(jobdir, "release-lathe")
    bstamp = os.path.join(jobdir, "block-lathe.start")
    lathe.submit_api(f"date +%s%N > {bstamp}; while [ ! -e {rel} ]; do sleep 0.05; done", NGPUS, jobdir)
    if wait_stamp(bstamp, 60) is None:
        raise RuntimeError("lathe blocker did not start")
    t0 = now_ns()
    each = []
    for i in range(m):
        t = now_ns()
        lathe.submit_api(f"date +%s%N > {jobdir}/pl-lathe-{i}.start", 1, jobdir, fresh=False)
        each.append((now_ns() - t) / 1e6)
    t_sub = now_ns()
    log(f"placement lathe: {m} queued in {(t_sub - t0) / 1e9:.1f} s; releasing")
    out = _release_and_wait(rel, jobdir, "pl-lathe-", m, timeout_s, t0, t_sub,
                            lambda: _count(lathe.active()))
    return dict(out, **_submit_trend(each))


def _count(runs):
    return None if runs is None else len(runs)


def placement_slurm(slurm, m, jobdir, timeout_s):
    rel = os.path.join(jobdir, "release-slurm")
    bstamp = os.path.join(jobdir, "block-slurm.start")
    slurm.submit(f"date +%s%N > {bstamp}; while [ ! -e {rel} ]; do sleep 0.05; done", NGPUS, jobdir)
    if wait_stamp(bstamp, 60) is None:
        raise RuntimeError("slurm blocker did not start")
    t0 = now_ns()
    each = []
    for i in range(m):
        t = now_ns()
        slurm.submit(f"date +%s%N > {jobdir}/pl-slurm-{i}.start", 1, jobdir)
        each.append((now_ns() - t) / 1e6)
    t_sub = now_ns()
    log(f"placement slurm: {m} queued in {(t_sub - t0) / 1e9:.1f} s; releasing")
    out = _release_and_wait(rel, jobdir, "pl-slurm-", m, timeout_s, t0, t_sub, slurm.queue_len)
    return dict(out, **_submit_trend(each))


def _submit_trend(each):
    """Submission time (ms, p50) of the first and the last tenth: does it grow with the queue?"""
    k = max(1, len(each) // 10)
    return {"submit_ms_first_tenth_p50": pct(each[:k], 50), "submit_ms_last_tenth_p50": pct(each[-k:], 50)}


def _release_and_wait(rel, jobdir, prefix, m, timeout_s, t0, t_sub, active_count):
    load0 = loadavg()
    t_rel = now_ns()
    open(rel, "w").close()
    stamps = wait_all_stamps(jobdir, prefix, m, timeout_s)
    if stamps is None:
        n = len([x for x in os.listdir(jobdir) if x.startswith(prefix)])
        raise RuntimeError(f"{prefix}: only {n}/{m} jobs started within {timeout_s} s")
    deadline = time.monotonic() + timeout_s
    t_done = None
    while time.monotonic() < deadline:
        if active_count() == 0:
            t_done = now_ns()
            break
        time.sleep(0.25)
    rel_s = [(s - t_rel) / 1e9 for s in stamps]
    return {"jobs": m, "submit_s": (t_sub - t0) / 1e9,
            "first_start_s": min(rel_s), "all_started_s": max(rel_s),
            "all_finished_s": (t_done - t_rel) / 1e9 if t_done else None,
            "starts_per_s": m / max(rel_s), "load_at_release": load0, "load_after": loadavg()}


def leftover_monitors(home):
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"__monitor" in argv and any(home.encode() in a for a in argv):
            n += 1
    return n


def leftover_cgroups(pid, ids):
    """Per-run cgroup directories of this bench's runs still present after they ended."""
    found = 0
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    seen = set()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for c in (ctrls.split(",") if ctrls else ["unified"]):
            c = c.replace("name=", "")
            base = f"/sys/fs/cgroup/{c}{path.rstrip('/')}/lathe"
            if base in seen or not os.path.isdir(base):
                continue
            seen.add(base)
            for d in os.listdir(base):
                if d.rsplit("-", 1)[0] in ids:
                    found += 1
    return found


def fmt_ms(v):
    return "–" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def ratio(a, b):
    return None if not a or not b else a / b


def render(res):
    lines = []
    L = res["latency_ms"]
    lines.append(f"Submit→running latency, {res['params']['latency_jobs']} jobs each (ms)\n")
    lines.append("| path | p50 | p90 | p99 | max | submit call returns (p50) |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    names = {"lathe_cli": "Lathe `lathe run`", "lathe_api": "Lathe REST API (unix socket)",
             "slurm_sbatch": "Slurm `sbatch`"}
    for k, v in L.items():
        lines.append(f"| {names[k]} | {fmt_ms(v['p50'])} | {fmt_ms(v['p90'])} | {fmt_ms(v['p99'])} | "
                     f"{fmt_ms(v['max'])} | {fmt_ms(res['submit_call_ms'][k]['p50'])} |")
    if "slurm_sbatch" in L:
        for k in ("lathe_cli", "lathe_api"):
            r = {q: ratio(L["slurm_sbatch"][q], L[k][q]) for q in ("p50", "p90", "p99")}
            lines.append(f"| Slurm / {names[k]} | {r['p50']:.1f}× | {r['p90']:.1f}× | {r['p99']:.1f}× | | |")
    ph = res.get("lathe_phases_ms", {})
    if ph:
        lines.append("\nLathe latency by phase, p50 (ms; daemon timestamps have 1 ms resolution)\n")
        lines.append("| path | submit→created | created→starting | starting→job runs | job→`running` |")
        lines.append("|---|---:|---:|---:|---:|")
        for k, v in ph.items():
            if v:
                lines.append(f"| {names[k]} | {fmt_ms(v['submit_to_created']['p50'])} | "
                             f"{fmt_ms(v['created_to_starting']['p50'])} | "
                             f"{fmt_ms(v['starting_to_job']['p50'])} | {fmt_ms(v['job_to_running']['p50'])} |")
    P = res.get("placement", {})
    if P:
        lines.append(f"\nPlacement of {res['params']['placement_jobs']} queued 1-GPU jobs after the blocker "
                     "is released (s)\n")
        lines.append("| scheduler | submit all | one submit, first/last tenth (ms) | first start | all started "
                     "| all finished | starts/s |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for k, v in P.items():
            fin = "–" if v["all_finished_s"] is None else f"{v['all_finished_s']:.1f}"
            lines.append(f"| {k} | {v['submit_s']:.1f} | {v['submit_ms_first_tenth_p50']:.1f} / "
                         f"{v['submit_ms_last_tenth_p50']:.1f} | {v['first_start_s']:.2f} | "
                         f"{v['all_started_s']:.1f} | {fin} | {v['starts_per_s']:.1f} |")
    lines.append("\nIdle RSS (VmRSS after 5 s idle, MB)\n")
    lines.append("| daemon | fresh | after the load |")
    lines.append("|---|---:|---:|")
    for k, v in res["idle_rss_kb"]["fresh"].items():
        after = res["idle_rss_kb"].get("after_load", {}).get(k)
        lines.append(f"| {k} | {v / 1024:.1f} | {'–' if after is None else f'{after / 1024:.1f}'} |")
    lines.append("\nCLI wall time, hyperfine -N --warmup 5 (ms)\n")
    lines.append("| command | when | median | mean ± σ | min | CPU user+sys |")
    lines.append("|---|---|---:|---:|---:|---:|")
    for when, hf in res["hyperfine"].items():
        for cmd, v in hf.items():
            if "error" in v:
                lines.append(f"| `{cmd}` | {when} | error | | |")
                continue
            short = cmd.replace(res["lathe_exe"], "lathe")
            lines.append(f"| `{short}` | {when} | {v['median_ms']:.1f} | {v['mean_ms']:.1f} ± "
                         f"{v['stddev_ms']:.1f} | {v['min_ms']:.1f} | {v['user_ms'] + v['system_ms']:.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lathe", default=os.path.join(REPO, "build", "lathe"), help="the lathe binary")
    ap.add_argument("--jobs", type=int, default=200, help="latency jobs per path")
    ap.add_argument("--placement", type=int, default=1000, help="jobs queued behind the blocker")
    ap.add_argument("--out", default="sched_bench.json", help="JSON results")
    ap.add_argument("--no-slurm", action="store_true", help="measure Lathe only")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--tmp", default="/var/tmp", help="where the temporary directory goes")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds allowed per placement wait")
    a = ap.parse_args()

    exe = os.path.abspath(a.lathe)
    if not os.access(exe, os.X_OK):
        sys.exit(f"no lathe binary at {exe}")
    if not a.no_slurm and os.geteuid() != 0:
        sys.exit("the Slurm side needs root (munged as user munge, slurmd, mknod); or pass --no-slurm")
    for tool in ["hyperfine"] + ([] if a.no_slurm else ["sbatch", "squeue", "sinfo"]):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: bash scripts/deps.sh --bench")

    base = tempfile.mkdtemp(prefix="sched-bench-", dir=a.tmp)
    os.chmod(base, 0o755)  # munged checks that its socket directory is reachable
    jobdir = os.path.join(base, "jobs")
    os.makedirs(jobdir)
    os.chmod(jobdir, 0o777)
    # Run a private copy: the build tree may be rebuilt while the bench runs,
    # and the daemon re-executes its own binary for every run's monitor.
    snap = os.path.join(base, "bin", "lathe")
    os.makedirs(os.path.dirname(snap))
    shutil.copy2(exe, snap)
    lathe = Lathe(snap, base)
    slurm = None if a.no_slurm else Slurm(base)
    def on_term(signum, frame):
        raise SystemExit(f"interrupted by signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    res = {"lathe_exe": snap, "lathe_source_binary": exe,
           "lathe_binary_mtime": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(os.stat(exe).st_mtime)),
           "params": {"latency_jobs": a.jobs, "placement_jobs": a.placement, "gpus": NGPUS},
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    ok = False
    try:
        res["machine"] = {
            "cpus": os.cpu_count(), "kernel": os.uname().release,
            "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
            "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
            "load_at_start": loadavg(),
        }
        res["versions"] = {"lathe": first_line([snap, "version"]), "hyperfine": first_line(["hyperfine", "--version"])}
        if slurm:
            res["versions"]["slurm"] = first_line(["/usr/sbin/slurmctld", "-V"])
            res["versions"]["munge"] = first_line(["/usr/sbin/munged", "-V"])
            log("starting munged, slurmctld, slurmd")
            slurm.start()
        log("starting lathe daemon")
        lathe.start()

        log("idle RSS (5 s)")
        res["idle_rss_kb"] = {"fresh": idle_rss(lathe, slurm, 5)}
        hf_env = dict(lathe.env, **(slurm.env if slurm else {}))
        # `lathe version` does nothing but start: it is the floor of every CLI call
        # and of every run's `lathe __monitor`; /bin/true and curl are references.
        cmds = [f"{snap} ps", f"{snap} version", "/bin/true", "curl --version"] + (["squeue"] if slurm else [])
        log("hyperfine (empty queues)")
        res["hyperfine"] = {"empty": hyperfine(cmds, hf_env, os.path.join(base, "hf1.json"))}

        log(f"latency: {a.jobs} rounds")
        res["load_before_latency"] = loadavg()
        lat = latency_phase(lathe, slurm, a.jobs, jobdir, 120)
        res["load_after_latency"] = loadavg()
        res["latency_ms"] = {k: summary([(s["start_ns"] - s["submit_ns"]) / 1e6 for s in v]) for k, v in lat.items()}
        res["submit_call_ms"] = {k: summary([(s["returned_ns"] - s["submit_ns"]) / 1e6 for s in v])
                                 for k, v in lat.items()}
        res["lathe_phases_ms"] = {k: lathe_phases(lathe, lat[k]) for k in ("lathe_cli", "lathe_api")}
        res["raw_latency"] = lat
        # Let both queues drain before placement.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (lathe.active() or (slurm and slurm.queue_len())):
            time.sleep(0.2)

        res["placement"] = {}
        if a.placement > 0:
            log(f"placement: lathe, {a.placement} jobs")
            res["placement"]["Lathe (REST API)"] = placement_lathe(lathe, a.placement, jobdir, a.timeout)
            if slurm:
                log(f"placement: slurm, {a.placement} jobs")
                res["placement"]["Slurm (sbatch)"] = placement_slurm(slurm, a.placement, jobdir, a.timeout)

        log("idle RSS after the load (5 s)")
        res["idle_rss_kb"]["after_load"] = idle_rss(lathe, slurm, 5)
        log("hyperfine (after the load)")
        cmds = [f"{snap} ps", f"{snap} ps -a"] + (["squeue"] if slurm else [])
        res["hyperfine"]["after load"] = hyperfine(cmds, hf_env, os.path.join(base, "hf2.json"))
        st, alls = lathe.request("GET", "/api/v1/runs?all=1")
        res["lathe_ps_a_rows_returned"] = len(alls["runs"]) if st == 200 else None
        ids = {s["id"] for v in lat.values() for s in v}
        res["lathe_leftover_monitors"] = leftover_monitors(lathe.home)
        res["lathe_leftover_run_cgroups"] = leftover_cgroups(lathe.proc.pid, ids)
        res["machine"]["load_at_end"] = loadavg()
        ok = True
    finally:
        if not ok:
            lathe.stop_all_active()
        lathe.stop()
        if slurm:
            slurm.stop()
        res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        if a.keep or not ok:
            log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(render(res))
    log(f"results in {a.out}")


if __name__ == "__main__":
    main()

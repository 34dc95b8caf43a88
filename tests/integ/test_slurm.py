"""The Slurm backend against a real, private Slurm 22.05 on loopback (tests/integ/slurm_cluster.py):
an unprivileged user's job with a fake GPU runs under Lathe's monitor and is seen through squeue,
stops through scancel, survives a restart of what drives it, and a job Slurm refuses is a start
error. The backend is driven directly by slurm_driver (src/lathe/exec/slurm/slurm_driver.cc), the
way the daemon will drive it; the test plays the daemon's part.

Skipped without root or without Slurm and munge (`scripts/deps.sh`). Every process it
starts is stopped by its pid at the end, failed or not: the test process becomes a child subreaper,
so that what slurmd and the jobs leave behind is re-parented to it and can be found.
"""
import ctypes
import grp
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurm_cluster  # noqa: E402
from harness import LATHE, ensure_user  # noqa: E402

USER = "lathe-it-slurm"
DRIVER = os.environ.get("LATHE_SLURM_DRIVER") or os.path.join(
    os.path.dirname(os.path.abspath(LATHE)), "src", "lathe", "exec", "slurm_driver")
PR_SET_CHILD_SUBREAPER = 36


def children_of(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def descendants(pid):
    seen, todo = [], children_of(pid)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.append(p)
            todo += children_of(p)
    return seen


def runnable_by_all(path):
    """Whether any user can run `path`: it and every directory above it are open to others."""
    p = os.path.realpath(path)
    if not os.stat(p).st_mode & 0o001:
        return False
    while p != "/":
        p = os.path.dirname(p)
        if not os.stat(p).st_mode & 0o001:
            return False
    return True


def log_lines(path):
    """The text of each record of a CRI log (`<time> <stream> <tag> <text>`)."""
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n").split(" ", 3)[3] for line in f if line.count(" ") >= 3]
    except OSError:
        return []


class Driver:
    """One slurm_driver process: one SlurmBackend, as one daemon would hold it."""

    def __init__(self, options):
        self.proc = subprocess.Popen([DRIVER, json.dumps(options)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ask(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"slurm_driver ended ({self.proc.poll()}) on {req}")
        return json.loads(line)

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


@unittest.skipUnless(os.path.exists(DRIVER), f"no {DRIVER} (build the slurm_driver target)")
class SlurmBackend(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = slurm_cluster.missing()
        if why:
            raise unittest.SkipTest(why)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise unittest.SkipTest("cannot become a child subreaper")
        cls.pw = ensure_user(USER)
        cls.base = tempfile.mkdtemp(prefix="lathe-slurm-it-")
        os.chmod(cls.base, 0o755)
        cls.drivers = []
        cls.cluster = slurm_cluster.Cluster(cls.base, gpus=2, cpus=2)
        try:
            cls.cluster.start()
            cls.shared = os.path.join(cls.base, "shared")
            os.makedirs(cls.shared)
            os.chmod(cls.shared, 0o1777)
            # The monitor's binary where the user can run it (a copy if the build tree is closed).
            cls.lathe = os.path.abspath(LATHE)
            if not runnable_by_all(cls.lathe):
                os.makedirs(os.path.join(cls.base, "bin"))
                cls.lathe = os.path.join(cls.base, "bin", "lathe")
                shutil.copy(LATHE, cls.lathe)
                os.chmod(cls.lathe, 0o755)
            cls.options = {"name": "cluster", "shared_dir": cls.shared, "lathe_path": cls.lathe,
                           "slurm_conf": cls.cluster.conf, "signal_grace_ms": 30000,
                           "self_exe": cls.lathe}
            cls.d = cls.driver()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def driver(cls):
        d = Driver(cls.options)
        cls.drivers.append(d)
        return d

    @classmethod
    def tearDownClass(cls):
        for d in getattr(cls, "drivers", []):
            d.stop()
        if hasattr(cls, "cluster"):
            cls.cluster.stop()
        # Whatever is left (a job's processes, a slurmstepd) was re-parented to this process.
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
        if hasattr(cls, "base"):
            shutil.rmtree(cls.base, ignore_errors=True)

    # ---- helpers ----

    def user(self):
        groups = sorted({self.pw.pw_gid} | {g.gr_gid for g in grp.getgrall() if USER in g.gr_mem})
        return {"uid": self.pw.pw_uid, "gid": self.pw.pw_gid, "groups": groups, "name": USER,
                "home": self.pw.pw_dir, "shell": self.pw.pw_shell}

    def request(self, run_id, argv, **extra):
        attempt_dir = os.path.join(self.base, "daemon", "runs", run_id, "attempt-1")
        os.makedirs(attempt_dir, exist_ok=True)
        r = {"run_id": run_id, "attempt": 1, "user": self.user(), "argv": argv,
             "env": {"LATHE_RUN_ID": run_id, "ODD": "it's $(not run) `either`"},
             "workdir": self.shared, "attempt_dir": attempt_dir}
        r.update(extra)
        return r

    def ref(self, req, handle):
        return {"run_id": req["run_id"], "attempt": req["attempt"], "attempt_dir": req["attempt_dir"],
                "user": {"uid": self.pw.pw_uid, "name": USER}, "handle": handle}

    def launch(self, run_id, argv, d=None, **extra):
        req = self.request(run_id, argv, **extra)
        got = (d or self.d).ask(op="launch", request=req)
        self.assertTrue(got["ok"], got)
        return req, got

    def wait(self, ref, phases, d=None, timeout=40):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = (d or self.d).ask(op="poll", attempts=[ref])["statuses"][0]
            if last["phase"] in phases:
                return last
            time.sleep(0.2)
        self.fail(f"not {phases} within {timeout} s: {last}; slurmd: "
                  f"{self.cluster.tail('slurm/slurmd.log', 1500)}")

    def squeue(self, *args):
        return self.cluster.run("/usr/bin/squeue", "--noheader", *args).stdout.strip()

    # ---- tests ----

    def test_a_users_gpu_job_runs_as_them_and_its_exit_code_comes_back(self):
        req, got = self.launch("r-gpu", ["sh", "-c", 'echo "gpus=$CUDA_VISIBLE_DEVICES"; id; '
                                         'echo "job=$SLURM_JOB_ID"; echo "odd=$ODD"; exit 3'],
                               gpu_count=1, cpus=1, memory_bytes=64 << 20)
        self.assertEqual(got["start_error"], "", got)
        handle = got["handle"]
        job = handle["job_id"]
        self.assertEqual(got["what"], f"job {job}")
        # Slurm has it as the user's job (sbatch ran as them), not root's.
        owner = self.squeue("--states=all", f"--jobs={job}", "--format=%u|%b")
        self.assertTrue(owner.startswith(f"{USER}|"), owner)
        self.assertIn("gpu:1", owner)
        ref = self.ref(req, handle)
        st = self.wait(ref, ["exited", "gone"])
        self.assertEqual(st["phase"], "exited", st)
        self.assertEqual(st["exit"]["exit_code"], 3, st)
        lines = log_lines(handle["log"])
        self.assertIn("gpus=0", lines)
        self.assertIn(f"job={job}", lines)
        self.assertIn("odd=it's $(not run) `either`", lines)
        ids = [line for line in lines if line.startswith("uid=")]
        self.assertEqual(len(ids), 1, lines)
        self.assertTrue(ids[0].startswith(f"uid={self.pw.pw_uid}({USER}) gid={self.pw.pw_gid}"), ids)
        # Everything on the shared file system is the user's.
        for p in (os.path.join(self.shared, USER), handle["dir"], handle["log"],
                  os.path.join(handle["dir"], "exit.json"), os.path.join(handle["dir"], "launch.json")):
            self.assertEqual(os.stat(p).st_uid, self.pw.pw_uid, p)
        self.assertEqual(os.stat(os.path.join(self.shared, USER)).st_mode & 0o777, 0o700)
        self.assertEqual(self.d.ask(op="log_path", run_dir=os.path.dirname(req["attempt_dir"]))["path"],
                         handle["log"])
        self.d.ask(op="release", attempt=ref)

    def test_a_graceful_stop_ends_the_run_by_sigterm_and_a_kill_by_sigkill(self):
        req, got = self.launch("r-term", ["sh", "-c", "echo ready; exec sleep 300"])
        ref = self.ref(req, got["handle"])
        self.wait(ref, ["running"])
        deadline = time.monotonic() + 20
        while "ready" not in log_lines(got["handle"]["log"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertTrue(self.d.ask(op="signal", attempt=ref, kill=False)["ok"])
        st = self.wait(ref, ["exited", "gone"])
        self.assertEqual(st["phase"], "exited", st)
        self.assertEqual(st["exit"]["signal"], signal.SIGTERM, st)

        req, got = self.launch("r-kill", ["sh", "-c", "trap '' TERM; echo ready; sleep 300; sleep 300"])
        ref = self.ref(req, got["handle"])
        self.wait(ref, ["running"])
        deadline = time.monotonic() + 20
        while "ready" not in log_lines(got["handle"]["log"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertTrue(self.d.ask(op="signal", attempt=ref, kill=False)["ok"])
        time.sleep(1)
        self.assertEqual(self.d.ask(op="poll", attempts=[ref])["statuses"][0]["phase"], "running")
        self.assertTrue(self.d.ask(op="signal", attempt=ref, kill=True)["ok"])
        st = self.wait(ref, ["exited", "gone"])
        self.assertEqual(st["phase"], "exited", st)
        self.assertIn(st["exit"]["signal"], (signal.SIGKILL, signal.SIGTERM), st)
        self.d.ask(op="release", attempt=ref)

    def test_a_queued_job_says_why_it_waits_and_a_stop_cancels_it(self):
        blocker, got = self.launch("r-blocker", ["sleep", "300"], gpu_count=2)
        blocker_ref = self.ref(blocker, got["handle"])
        self.wait(blocker_ref, ["running"])
        req, got = self.launch("r-waits", ["true"], gpu_count=1)
        ref = self.ref(req, got["handle"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st = self.d.ask(op="poll", attempts=[ref])["statuses"][0]
            if st["note"] == "PENDING (Resources)":
                break
            time.sleep(0.2)
        self.assertEqual(st["phase"], "starting", st)
        self.assertEqual(st["note"], "PENDING (Resources)", st)
        self.assertTrue(self.d.ask(op="signal", attempt=ref, kill=False)["ok"])
        st = self.wait(ref, ["exited", "gone"])
        self.assertEqual(st["phase"], "exited", st)
        self.assertEqual(st["exit"].get("start_error", ""), "", st)  # stopped, not failed to start
        self.assertEqual(st["exit"]["signal"], signal.SIGTERM, st)
        self.d.ask(op="release", attempt=ref)
        self.d.ask(op="release", attempt=blocker_ref)

    def test_after_a_restart_the_job_is_readopted_and_release_cancels_it(self):
        first = self.driver()
        req, got = self.launch("r-readopt", ["sleep", "300"], d=first)
        ref = self.ref(req, got["handle"])
        self.wait(ref, ["running"], d=first)
        first.proc.kill()  # the daemon dies (kill -9); the job goes on
        first.proc.wait()
        second = self.driver()
        r = second.ask(op="readopt", attempt=ref)
        self.assertEqual(r["found"], "alive", r)
        self.assertEqual(r["handle"]["job_id"], got["handle"]["job_id"])
        st = self.wait(self.ref(req, r["handle"]), ["running"], d=second)
        self.assertEqual(st["note"], "RUNNING")
        second.ask(op="release", attempt=self.ref(req, r["handle"]))
        job = got["handle"]["job_id"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            state = self.squeue("--states=all", f"--jobs={job}", "--format=%T")
            if state in ("", "CANCELLED"):
                break
            time.sleep(0.2)
        self.assertIn(state, ("", "CANCELLED"))
        # A run that never got a job id and has no job in Slurm never started.
        req2 = self.request("r-never", ["true"])
        r = second.ask(op="readopt", attempt=self.ref(req2, {}))
        self.assertEqual(r["found"], "never_started", r)

    def test_a_job_slurm_refuses_is_a_start_error(self):
        req, got = self.launch("r-refused", ["true"], gpu_count=5)
        self.assertIn("did not accept the job", got["start_error"])
        self.assertIn("Requested node configuration is not available", got["start_error"])
        self.assertNotIn("job_id", got["handle"])
        self.d.ask(op="release", attempt=self.ref(req, got["handle"]))

    def test_a_missing_lathe_on_the_node_is_a_start_error_with_slurms_words(self):
        opts = dict(self.options, lathe_path=os.path.join(self.base, "no-such-lathe"))
        d = Driver(opts)
        self.drivers.append(d)
        req, got = self.launch("r-nolathe", ["true"], d=d)
        st = self.wait(self.ref(req, got["handle"]), ["exited", "gone"], d=d)
        self.assertEqual(st["phase"], "exited", st)
        self.assertIn("before the run started", st["exit"].get("start_error", ""), st)
        self.assertIn("no-such-lathe", st["exit"]["start_error"], st)


if __name__ == "__main__":
    unittest.main()

"""Runs through a Slurm pool of the real daemon, against a private Slurm 22.05 on loopback
(tests/integ/slurm_cluster.py): config.yaml names the pool, `lathe run --pool cluster` as an
unprivileged user goes to sbatch as that user, the job sees Slurm's GPU, `lathe logs` reads the log
from the shared directory, the exit code and a stop come back, a second user sees nothing of it, and
what the pool cannot honour or a pool that does not exist is refused at submission.

Skipped without root or without Slurm and munge (`scripts/deps.sh` installs them). Every process
started is stopped by pid at the end: the test process becomes a child subreaper, so that what
slurmd and the jobs leave behind is re-parented to it.
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurm_cluster  # noqa: E402
from harness import LATHE, Daemon, ensure_user  # noqa: E402
from test_slurm import children_of, descendants, runnable_by_all  # noqa: E402

USER = "lathe-it-slurm"
OTHER = "lathe-it-slurm2"
PR_SET_CHILD_SUBREAPER = 36


class ClusterCase(unittest.TestCase):
    """A private Slurm (`CLUSTER`: slurm_cluster.Cluster's options), a shared directory
    <base>/shared (mode 1777) and `lathe_path`, a lathe binary every user can run; the test
    process becomes a child subreaper, and everything left is stopped at the end; no tests."""
    CLUSTER = {}

    @classmethod
    def setUpClass(cls):
        why = slurm_cluster.missing()
        if why:
            raise unittest.SkipTest(why)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise unittest.SkipTest("cannot become a child subreaper")
        cls.pw = ensure_user(USER)
        ensure_user(OTHER)
        cls.base = tempfile.mkdtemp(prefix="lathe-slurm-")
        os.chmod(cls.base, 0o755)
        cls.cluster = slurm_cluster.Cluster(cls.base, **{"gpus": 2, "cpus": 2, **cls.CLUSTER})
        try:
            cls.cluster.start()
            cls.shared = os.path.join(cls.base, "shared")
            os.makedirs(cls.shared)
            os.chmod(cls.shared, 0o1777)
            cls.lathe_path = os.path.abspath(LATHE)
            if not runnable_by_all(cls.lathe_path):  # the monitor's binary where users can run it
                os.makedirs(os.path.join(cls.base, "bin"))
                cls.lathe_path = os.path.join(cls.base, "bin", "lathe")
                shutil.copy(LATHE, cls.lathe_path)
                os.chmod(cls.lathe_path, 0o755)
            cls.set_up_more()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def set_up_more(cls):
        """What a subclass starts once the cluster runs (stopped by tearDownClass on failure)."""

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "cluster"):
            cls.cluster.stop()
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


class PoolCase(ClusterCase):
    """ClusterCase, and a root daemon whose config names the cluster as pool `cluster`; no
    tests."""
    POOL = ""  # more lines of the pool's config, each "    key: value\n"

    @classmethod
    def set_up_more(cls):
        cls.d = Daemon(gpus="sim:1x24GB")
        with open(os.path.join(cls.d.home, "config.yaml"), "w") as f:
            f.write("pools:\n  cluster:\n    type: slurm\n"
                    f"    shared_dir: {cls.shared}\n    slurm_conf: {cls.cluster.conf}\n"
                    f"    lathe_path: {cls.lathe_path}\n    signal_grace: 10s\n"
                    + cls.pool_config())
        cls.d.start()

    @classmethod
    def pool_config(cls):
        """The pool's config lines beyond the common ones (POOL), once the cluster runs."""
        return cls.POOL

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "d"):
            cls.d.cleanup()
        super().tearDownClass()

    def run_as(self, user, *args, check=True):
        return self.d.cli(*args, user=user, env=self.d.env(HOME="/tmp"), check=check)

    def submit(self, *args):
        return self.run_as(USER, "run", "--pool", "cluster", "--workdir", self.shared,
                           *args).stdout.strip()


class SlurmPool(PoolCase):
    def test_a_users_gpu_job_runs_on_the_cluster_as_them(self):
        rid = self.submit("--gpus", "1", "--", "sh", "-c",
                          'echo "uid=$(id -u) gpus=$CUDA_VISIBLE_DEVICES job=${SLURM_JOB_ID:+yes}";'
                          " exit 3")
        self.d.wait_state(rid, ["failed"], timeout=90)
        r = json.loads(self.run_as(USER, "inspect", rid, "--json").stdout)
        self.assertEqual(r["exit_code"], 3, r)
        self.assertEqual(r["backend"], "cluster", r)
        self.assertEqual(r["spec"]["pool"], "cluster", r)
        job = r["handle"]["job_id"]
        self.assertTrue(job.isdigit(), r["handle"])
        self.assertEqual(r["handle"], {"job_id": job, "submitted_with": "sbatch"},
                         "only the job id of the handle and how it went are shown")
        self.assertIn(f"cluster, Slurm job {job}", self.run_as(USER, "inspect", rid).stdout)
        out = self.d.wait_for(lambda: self.run_as(USER, "logs", rid).stdout, "the run's log")
        self.assertIn(f"uid={self.pw.pw_uid} gpus=0 job=yes", out)
        # Its events say where it went, in the reader's language.
        zh = self.d.cli("inspect", rid, user=USER, env=self.d.env(HOME="/tmp", LATHE_LANG="zh")).stdout
        self.assertIn("已交给执行后端 cluster", zh)
        self.assertIn("已提交，作业", zh)
        self.assertIn("资源池：", zh)
        self.assertIn(f"cluster，Slurm 作业 {job}", zh)
        # The run's files on the shared directory are the user's.
        user_dir = os.path.join(self.shared, USER)
        self.assertEqual(os.stat(user_dir).st_uid, self.pw.pw_uid)
        # Nobody else reads, stops or sees it.
        other = self.run_as(OTHER, "logs", rid, check=False)
        self.assertNotEqual(other.returncode, 0)
        self.assertNotIn("uid=", other.stdout)
        self.assertNotEqual(self.run_as(OTHER, "inspect", rid, check=False).returncode, 0)

    def test_a_log_swapped_for_a_symlink_is_read_as_the_user(self):
        # The log lives in a directory the user controls: the daemon reads it as them, so a
        # symlink to a file they cannot read shows nothing of it.
        secret = os.path.join(self.base, "root-only.txt")
        with open(secret, "w") as f:  # a log line as the monitor writes them (CRI)
            f.write("2026-12-06T10:00:00.000000000Z stdout F TOPSECRET\n")
        os.chmod(secret, 0o644)
        rid = self.submit("--", "sh", "-c", "echo mine")
        self.d.wait_state(rid, ["succeeded"], timeout=90)
        log = os.path.join(self.shared, USER, rid, "log")
        self.assertTrue(os.path.exists(log), log)
        subprocess.run(["setpriv", "--reuid", USER, "--regid", USER, "--init-groups",
                        "ln", "-sf", secret, log], check=True)
        # Readable by the user: the symlink is followed, as the user could read it anyway.
        self.assertIn("TOPSECRET", self.run_as(USER, "logs", rid).stdout)
        os.chmod(secret, 0o600)  # root's alone now: the daemon, reading as the user, cannot
        r = self.run_as(USER, "logs", rid, check=False)
        self.assertNotIn("TOPSECRET", r.stdout + r.stderr)
        stats = self.run_as(USER, "logs", rid, "--json", check=False)
        self.assertNotIn("TOPSECRET", stats.stdout)

    def test_a_stop_ends_the_job(self):
        rid = self.submit("--", "sh", "-c", "echo started; exec sleep 300")
        self.d.wait_state(rid, ["running"], timeout=90)
        zh = self.d.cli("inspect", rid, user=USER, env=self.d.env(HOME="/tmp", LATHE_LANG="zh")).stdout
        self.assertIn("已在资源池上运行", zh)
        self.run_as(USER, "stop", rid)
        self.d.wait_state(rid, ["stopped"], timeout=60)
        # Slurm lets the job go once its step has ended (COMPLETING can outlast the run's end).
        self.d.wait_for(lambda: self.cluster.run("/usr/bin/squeue", "--noheader", "--name",
                                                 f"lathe-{rid}").stdout.strip() == "",
                        "the job to leave squeue", timeout=60)

    def test_status_lists_the_pool(self):
        s = json.loads(self.d.cli("status", "--json").stdout)
        names = [p["name"] for p in s["pools"]]
        self.assertEqual(names, ["local", "cluster"], s["pools"])
        cluster = s["pools"][1]
        self.assertEqual(cluster["backend"], "slurm")
        self.assertTrue(cluster["capabilities"]["places_runs"])
        self.assertTrue(cluster["capabilities"]["multi_node"])
        local = s["pools"][0]
        self.assertFalse(local["capabilities"]["multi_node"])
        self.assertIn("pool cluster: slurm", self.d.cli("status").stdout)

    def test_what_a_pool_cannot_do_is_refused_at_submission(self):
        r = self.run_as(USER, "run", "--pool", "nowhere", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("'pool'", r.stderr)
        self.assertIn("local, cluster", r.stderr)
        r = self.run_as(USER, "run", "--pool", "cluster", "--workdir", self.shared,
                        "--port", "8888", "--", "true", check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("ports", r.stderr)
        listed = json.loads(self.run_as(USER, "ps", "--all", "--json").stdout)
        runs = listed["runs"] if isinstance(listed, dict) else listed
        self.assertFalse([x for x in runs if x.get("spec", {}).get("command") == ["true"]])


if __name__ == "__main__":
    unittest.main()

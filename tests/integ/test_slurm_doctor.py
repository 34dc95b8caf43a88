"""`lathe doctor --only cluster` against a private Slurm 22.05 on loopback
(tests/integ/slurm_cluster.py), with config.yaml naming it as pool `cluster` as a daemon would read
it: with Slurm up the cluster checks pass (scontrol ping, the munge round trip through the private
munged's socket, the clock, partition `debug` with its 2 GPUs, shared_dir writable as an ordinary
user) and `--cluster` runs a job on the node whose marker file is seen here and which finds
lathe_path; a pool naming a partition that does not exist fails naming it, in English and in
Chinese; with slurmctld stopped the ping check fails with its fix and the doctor still returns.

Skipped without root or without Slurm and munge (`scripts/deps.sh` installs them). Every process
started is stopped by pid at the end (the test becomes a child subreaper for what slurmd leaves).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import LATHE  # noqa: E402
from test_slurm_pool import ClusterCase  # noqa: E402

# Far above what the doctor needs (each Slurm command is killed after 15 s, the test job after
# 60 s): reaching it means the doctor hung.
DOCTOR_TIMEOUT_S = 240


class SlurmDoctorTest(ClusterCase):
    def doctor(self, *args, partition="debug", lang="en"):
        """`lathe doctor --only cluster --json ARGS` with a home whose config.yaml names the pool."""
        home = tempfile.mkdtemp(prefix="home-", dir=self.base)
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write("pools:\n  cluster:\n    type: slurm\n"
                    f"    shared_dir: {self.shared}\n    slurm_conf: {self.cluster.conf}\n"
                    f"    lathe_path: {self.lathe_path}\n    partition: {partition}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env.update({"LATHE_HOME": home, "LANG": "C.UTF-8"})
        env.pop("LATHE_LANG", None)
        p = subprocess.run([LATHE, "doctor", "--only", "cluster", "--lang", lang] + list(args),
                           env=env, capture_output=True, text=True, timeout=DOCTOR_TIMEOUT_S)
        return p

    def checks(self, p):
        report = json.loads(p.stdout)
        out = {}
        for c in report["checks"]:
            out.setdefault(c["id"], []).append(c)
        return report, out

    def one(self, checks, cid):
        self.assertEqual(len(checks.get(cid, [])), 1, json.dumps(checks, indent=1))
        return checks[cid][0]

    def test_1_healthy_cluster_passes(self):
        p = self.doctor("--json", "--cluster")
        report, checks = self.checks(p)
        self.assertEqual(report["summary"]["fail"], 0, p.stdout)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for cid in ("cluster.pools", "cluster.ping", "cluster.munge", "cluster.partition",
                    "cluster.shared_dir", "cluster.shared_job", "cluster.lathe_path"):
            self.assertEqual(self.one(checks, cid)["severity"], "ok", json.dumps(checks[cid]))
        self.assertIn(self.one(checks, "cluster.clock")["severity"], ("ok", "warn"))
        part = self.one(checks, "cluster.partition")["values"]
        self.assertEqual((part["partition"], part["gpus"], part["types"]), ("debug", "2", "fake"))
        munge = self.one(checks, "cluster.munge")["values"]
        self.assertEqual(munge["socket"], os.path.join(self.cluster.mdir, "munge.sock"))
        shared = self.one(checks, "cluster.shared_dir")["values"]
        self.assertEqual(shared["probed"], self.shared)
        self.assertEqual(shared["user"], "nobody")  # root's doctor probes as an ordinary user
        job = self.one(checks, "cluster.shared_job")["values"]
        self.assertEqual(job["node"], self.cluster.host)
        self.assertFalse(os.path.exists(job["marker"]), "the marker was not removed")
        lathe = self.one(checks, "cluster.lathe_path")["values"]
        self.assertEqual(lathe["path"], self.lathe_path)
        self.assertIn(lathe["version"], subprocess.run([LATHE, "--version"], capture_output=True,
                                                       text=True).stdout)

    def test_2_missing_partition_is_named_in_both_languages(self):
        p = self.doctor("--json", partition="gpu-a100")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        _, checks = self.checks(p)
        part = self.one(checks, "cluster.partition")
        self.assertEqual(part["severity"], "fail")
        self.assertEqual(part["values"]["partition"], "gpu-a100")
        self.assertIn("partition gpu-a100 does not exist", part["finding"])
        self.assertIn("debug (default)", part["finding"])
        self.assertIn("Invalid partition name specified", part["scenario"])
        self.assertEqual(self.one(checks, "cluster.ping")["severity"], "ok")
        zh = self.doctor(partition="gpu-a100", lang="zh")
        self.assertEqual(zh.returncode, 1)
        self.assertIn("分区 gpu-a100 不存在", zh.stdout)
        self.assertIn("集群（Slurm 资源池）", zh.stdout)
        en = self.doctor(partition="gpu-a100")
        self.assertIn("partition gpu-a100 does not exist", en.stdout)
        self.assertNotIn("分区", en.stdout)

    def test_3_controller_down_fails_ping_with_the_fix(self):
        ctld = self.cluster.procs["slurmctld"]
        ctld.terminate()
        ctld.wait(30)
        p = self.doctor("--json", "--cluster")  # returns: subprocess's timeout would raise
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        _, checks = self.checks(p)
        ping = self.one(checks, "cluster.ping")
        self.assertEqual(ping["severity"], "fail")
        self.assertEqual(ping["outcome"], "cluster.ping.down")
        self.assertIn("DOWN", ping["finding"])
        self.assertIn("Start slurmctld", ping["fix"])
        self.assertIn(f"SLURM_CONF={self.cluster.conf} scontrol ping", ping["verify"])
        for cid in ("cluster.partition", "cluster.clock", "cluster.shared_job"):
            self.assertEqual(self.one(checks, cid)["outcome"], "cluster.skipped.unreachable")
        self.assertEqual(self.one(checks, "cluster.munge")["severity"], "ok")
        zh = self.doctor(lang="zh")
        self.assertIn("Slurm 控制器没有响应", zh.stdout)
        self.assertIn("启动 slurmctld", zh.stdout)


if __name__ == "__main__":
    unittest.main()

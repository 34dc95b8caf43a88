"""A Slurm pool that submits through slurmrestd (config `rest: {url}`), against a private Slurm
22.05 on loopback with JWT authentication and a real slurmrestd (tests/integ/slurm_cluster.py,
`rest=True`; slurmrestd runs as `nobody`). The root daemon mints a token for each submitting user
with `scontrol token`, the job runs as that user, Slurm's requeue is off for it, and when
slurmrestd is gone the run is submitted with sbatch and the daemon's log says why.

Skipped without root, Slurm, munge, slurmrestd or the JWT plugin (`scripts/deps.sh`).
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_slurm_pool import OTHER, USER, PoolCase  # noqa: E402

JWT_PLUGIN = "/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so"


class SlurmRest(PoolCase):
    CLUSTER = {"rest": True}

    @classmethod
    def setUpClass(cls):
        for need in ("/usr/sbin/slurmrestd", JWT_PLUGIN):
            if not os.path.exists(need):
                raise unittest.SkipTest(f"no {need} (scripts/deps.sh installs slurmrestd and "
                                        "slurm-wlm-jwt-plugin)")
        super().setUpClass()

    @classmethod
    def pool_config(cls):
        return f"    rest:\n      url: {cls.cluster.rest_url}\n      token_lifespan: 10m\n"

    def job_of(self, user, rid):
        r = json.loads(self.run_as(user, "inspect", rid, "--json").stdout)
        return r["handle"]

    def slurm_job(self, job_id):
        """scontrol's fields of a job (Slurm keeps an ended one for MinJobAge, 300 s)."""
        out = self.cluster.run("/usr/bin/scontrol", "show", "job", job_id).stdout
        return dict(w.split("=", 1) for w in out.split() if "=" in w)

    def test_runs_go_through_slurmrestd_each_as_its_user(self):
        rid = self.submit("--gpus", "1", "--", "sh", "-c",
                          'echo "uid=$(id -u) gpus=$CUDA_VISIBLE_DEVICES"')
        theirs = self.run_as(OTHER, "run", "--pool", "cluster", "--workdir", self.shared,
                             "--", "sh", "-c", 'echo "uid=$(id -u)"').stdout.strip()
        for user, r in ((USER, rid), (OTHER, theirs)):
            got = self.d.wait_state(r, ["succeeded", "failed"], timeout=90)
            self.assertEqual(got["state"], "succeeded",
                             self.run_as(user, "logs", r).stdout + self.d.daemon_log())
            handle = self.job_of(user, r)
            self.assertEqual(handle["submitted_with"], "slurmrestd", self.d.daemon_log())
            job = self.slurm_job(handle["job_id"])
            # Slurm ran and accounted it as the user who submitted it...
            self.assertTrue(job["UserId"].startswith(user + "("), job)
            # ...and will not requeue it on its own (slurmrestd 22.05 ignores requeue: false).
            self.assertEqual(job["Requeue"], "0", job)
            self.assertEqual(job["Comment"], f"lathe:{r}:1", job)
        uid = self.pw.pw_uid
        self.assertIn(f"uid={uid} gpus=0", self.run_as(USER, "logs", rid).stdout)
        self.assertNotIn(f"uid={uid}", self.run_as(OTHER, "logs", theirs).stdout)
        # Each request carried its own user's name, with the token minted for that user.
        rest_log = self.cluster.tail("slurmrestd.out", 100000)
        for user in (USER, OTHER):
            self.assertRegex(rest_log, rf"user_name {re.escape(user)} token authentication")
        # The other user sees nothing of the first's run.
        self.assertNotEqual(self.run_as(OTHER, "inspect", rid, check=False).returncode, 0)

    def test_when_slurmrestd_is_gone_sbatch_submits_and_the_log_says_why(self):
        self.cluster.stop_rest()
        rid = self.submit("--", "sh", "-c", 'echo "uid=$(id -u)"')
        got = self.d.wait_state(rid, ["succeeded", "failed"], timeout=90)
        self.assertEqual(got["state"], "succeeded", self.d.daemon_log())
        self.assertEqual(self.job_of(USER, rid)["submitted_with"], "sbatch")
        # The run's events say so, where its owner looks.
        self.assertIn("with sbatch: slurmrestd did not submit it",
                      self.run_as(USER, "inspect", rid).stdout)
        self.assertIn(f"uid={self.pw.pw_uid}", self.run_as(USER, "logs", rid).stdout)
        with open(os.path.join(self.d.home, "daemon.test.log"), errors="replace") as f:
            log = f.read()
        self.assertRegex(log, rf"run {rid} attempt 1: slurmrestd did not submit it \(.+\); "
                              "sbatch does")


if __name__ == "__main__":
    unittest.main()

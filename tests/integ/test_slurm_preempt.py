"""A Slurm pool run preempted mid-training comes back from its last checkpoint, bitwise.

A private Slurm 22.05 on loopback (tests/integ/slurm_cluster.py) with two partitions on one node:
`debug`, where the pool submits, and `urgent`, whose jobs preempt debug's (PreemptMode=CANCEL).
examples/train_digits.py runs through the pool as an unprivileged user with its checkpoint
directory on the pool's shared directory. The monitor on the node records each finished
checkpoint; the daemon captures them from those records (never from its own inotify, which
another NFS client's writes would not reach). A job in `urgent` that needs every GPU preempts it:
the run goes preempted -> queued without using a retry, the next Slurm job gets the newest
checkpoint back in LATHE_RESUME_FROM (restored as the user when the directory differs from it), and
its final loss equals an uninterrupted run's bit for bit.
"""
import json
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurm_cluster  # noqa: E402
import test_checkpoints  # noqa: E402
from harness import PY  # noqa: E402
from test_slurm_pool import OTHER, USER, PoolCase  # noqa: E402

STEPS, EVERY = test_checkpoints.STEPS, test_checkpoints.EVERY
SLEEP = "0.3"  # per step: the preemption (decided within ~30 s here) lands mid-run


@unittest.skipUnless(test_checkpoints.have_torch(), "needs /usr/bin/python3 with torch and sklearn")
class SlurmPreemption(PoolCase):
    CLUSTER = {"preempt": True, "grace_s": 10}

    def test_a_preempted_training_run_resumes_bitwise_from_its_nodes_checkpoints(self):
        train = os.path.join(self.base, "train_digits.py")
        shutil.copy(test_checkpoints.TRAIN, train)
        os.chmod(train, 0o644)
        ckpt = os.path.join(self.shared, "ckpt-preempt")
        out = os.path.join(self.shared, "result-preempt.json")
        rid = self.submit("--gpus", "1", "--checkpoint-dir", ckpt, "--", PY, train,
                          "--steps", str(STEPS), "--ckpt-every", str(EVERY),
                          "--step-sleep", SLEEP, "--out", out)
        self.d.wait_state(rid, ["running"], timeout=90)

        def recorded(min_step):
            for e in self.d.inspect(rid)["events"]:
                d = e.get("data", {})
                if (e["type"] == "checkpoint" and "recorded on its node" in d.get("trigger", "")
                        and d.get("step", -1) >= min_step):
                    return e
            return None
        self.d.wait_for(lambda: recorded(STEPS // 4), "a checkpoint recorded on the node",
                        timeout=180)
        # Every GPU of the node, in the partition with the higher tier: the run's job is preempted.
        hi = self.cluster.run("/usr/bin/sbatch", "--parsable", "-p", "urgent", "--gres=gpu:2",
                              "-o", "/dev/null", "--wrap", "sleep 3")
        self.assertEqual(hi.returncode, 0, hi.stderr)
        self.d.wait_for(lambda: any(e["type"] == "state" and e["data"].get("to") == "preempted"
                                    for e in self.d.inspect(rid)["events"]),
                        "the run to be preempted", timeout=120)
        r = self.d.wait_state(rid, ["succeeded", "failed", "stopped", "lost"], timeout=600)
        log = self.run_as(USER, "logs", rid).stdout
        self.assertEqual(r["state"], "succeeded", log)
        self.assertGreaterEqual(r["attempt"], 2, r)
        self.assertEqual(r.get("retries_used", 0), 0, "a preemption used up a retry")
        self.assertIn("resumed from " + ckpt + "/ckpt_", log)
        with open(out) as f:
            got = json.load(f)
        self.assertGreater(got["start_step"], 0, "the next job began again at step 0")
        self.assertEqual(got["step"], STEPS)
        self.assertEqual(got["loss_hex"], test_checkpoints.baseline()["loss_hex"],
                         "the resumed run's final loss differs from an uninterrupted run's")
        # The next job was given the newest captured checkpoint (put back when the directory
        # differed from it), and the preemption is on the record.
        events = self.d.inspect(rid)["events"]
        handed = [e for e in events if e["type"] == "checkpoint"
                  and e["data"].get("resume_from", "").startswith(ckpt + "/ckpt_")]
        self.assertTrue(handed, events)
        self.assertEqual(r.get("preemptions"), 1, r)
        self.assertEqual(os.stat(ckpt).st_uid, self.pw.pw_uid)
        # The other user reads none of it.
        self.assertNotEqual(self.run_as(OTHER, "snap", "ls", rid, check=False).returncode, 0)


if __name__ == "__main__":
    unittest.main()

"""A Slurm pool run longer than its partition allows goes on as a chain of jobs, bitwise.

The pool submits to partition `short` (MaxTime=1 minute) of a private Slurm 22.05 on loopback.
examples/train_digits.py takes longer than a minute there: the first job is submitted with
--time=1, gets USR1 ten seconds ahead of its limit (signal_grace: 10s), the program is ended,
and the run is requeued to continue in the next job — not failed, not counted as a retry or a
preemption — from its last checkpoint, until it finishes with the same loss, bit for bit, as an
uninterrupted run.
"""
import json
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integ"))
import test_checkpoints  # noqa: E402
from harness import PY  # noqa: E402
from test_slurm_pool import USER, PoolCase  # noqa: E402

STEPS, EVERY = test_checkpoints.STEPS, test_checkpoints.EVERY


@unittest.skipUnless(test_checkpoints.have_torch(), "needs /usr/bin/python3 with torch and sklearn")
class SlurmChain(PoolCase):
    CLUSTER = {"short_minutes": 1}
    POOL = "    partition: short\n"

    def test_a_run_longer_than_its_partitions_max_time_goes_on_as_a_chain(self):
        train = os.path.join(self.base, "train_digits.py")
        shutil.copy(test_checkpoints.TRAIN, train)
        os.chmod(train, 0o644)
        ckpt = os.path.join(self.shared, "ckpt-chain")
        out = os.path.join(self.shared, "result-chain.json")
        rid = self.submit("--gpus", "1", "--checkpoint-dir", ckpt, "--", PY, train,
                          "--steps", str(STEPS), "--ckpt-every", str(EVERY),
                          "--step-sleep", "0.4", "--out", out)
        r = self.d.wait_state(rid, ["succeeded", "failed", "stopped", "lost"], timeout=600)
        log = self.run_as(USER, "logs", rid).stdout
        self.assertEqual(r["state"], "succeeded", log)
        self.assertGreaterEqual(r["attempt"], 2, r)
        self.assertEqual(r.get("retries_used", 0), 0, r)
        self.assertEqual(r.get("preemptions", 0), 0, r)
        events = self.d.inspect(rid)["events"]
        self.assertTrue([e for e in events if "continue in its pool's next job" in e["message"]],
                        events)
        self.assertIn("resumed from " + ckpt + "/ckpt_", log)
        with open(out) as f:
            got = json.load(f)
        self.assertGreater(got["start_step"], 0)
        self.assertEqual(got["loss_hex"], test_checkpoints.baseline()["loss_hex"])


if __name__ == "__main__":
    unittest.main()

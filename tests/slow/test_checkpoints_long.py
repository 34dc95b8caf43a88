"""The long version of tests/integ/test_checkpoints.py: a 600-step training
run, and one killed three times (each time with its checkpoint directory
wiped) that still ends bitwise equal to an uninterrupted run."""
import os
import signal
import sys
import unittest

os.environ.setdefault("LATHE_CKPT_STEPS", "600")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integ"))

import test_checkpoints  # noqa: E402


class CheckpointsKilledRepeatedly(test_checkpoints.Checkpoints):
    def test_three_kills(self):
        i = self.d.submit("--retry", "3", "--checkpoint-dir", self.ckpt, *self.train_args())
        for n, frac in enumerate((0.25, 0.5, 0.75), start=1):
            run = self.d.wait_for(lambda: (lambda r: r if r["state"] == "running" and r["attempt"] == n else None)(
                self.d.inspect(i)), f"attempt {n} running")
            self.wait_captured(i, int(test_checkpoints.STEPS * frac))
            pid = self.child_pid(run)
            os.kill(pid, signal.SIGSTOP)
            self.wipe()
            os.kill(pid, signal.SIGKILL)
        r, got = self.assert_resumed_bitwise(i)
        self.assertEqual(r["attempt"], 4)
        self.assertGreaterEqual(got["start_step"], int(test_checkpoints.STEPS * 0.75))


if __name__ == "__main__":
    unittest.main()

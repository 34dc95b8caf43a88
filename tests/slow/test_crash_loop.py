"""Long crash loop: 60 SIGKILLs of the daemon under churn (ctest -L slow)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integ"))
from crash_loop import crash_loop, exit_race_loop  # noqa: E402


class CrashLoopLong(unittest.TestCase):
    def test_many_kills(self):
        crash_loop(self, kills=int(os.environ.get("LATHE_CRASH_KILLS", "60")), seed=11)

    def test_runs_ending_during_recovery_are_not_lost(self):
        # 40 rounds of 4 runs: 12 of 160 were taken for lost before recovery
        # read exit.json again after finding the monitor gone.
        exit_race_loop(self, rounds=40, seed=13)


if __name__ == "__main__":
    unittest.main()

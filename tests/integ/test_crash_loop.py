"""Short crash loop (the long one is tests/slow/test_crash_loop.py)."""
import unittest

from crash_loop import crash_loop, exit_race_loop


class CrashLoop(unittest.TestCase):
    def test_a_few_kills(self):
        crash_loop(self, kills=4)

    def test_runs_ending_during_recovery_are_not_lost(self):
        exit_race_loop(self, rounds=3)


if __name__ == "__main__":
    unittest.main()

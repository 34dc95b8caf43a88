"""Long submission race: 300 `lathe run`s while the daemon is SIGKILLed again
and again (ctest -L slow); no submission may become two runs."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integ"))
from submit_race import submit_race  # noqa: E402


class SubmitRaceLong(unittest.TestCase):
    def test_many_kills_make_no_duplicates(self):
        submit_race(self, submissions=int(os.environ.get("LATHE_RACE_SUBMISSIONS", "300")),
                    kills=int(os.environ.get("LATHE_RACE_KILLS", "60")), seed=13)


if __name__ == "__main__":
    unittest.main()

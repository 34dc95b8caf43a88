"""Long snapshot crash loop: 150 SIGKILLs of `lathe snap create` / `gc` (ctest -L slow)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integ"))
from test_snap_crash import crash_loop  # noqa: E402


class SnapCrashLong(unittest.TestCase):
    def test_many_kills(self):
        crash_loop(self, kills=int(os.environ.get("LATHE_SNAP_KILLS", "150")), seed=17)


if __name__ == "__main__":
    unittest.main()

"""A read-only workspace's path flipped during 500 runs (ctest -L slow)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integ"))
from harness import DaemonTest  # noqa: E402
from mount_race import mount_race  # noqa: E402


@unittest.skipUnless(os.geteuid() == 0, "the race is against a root daemon")
class MountRaceLong(DaemonTest):
    def test_flipped_path_is_never_bound_elsewhere(self):
        mount_race(self, self.d, runs=int(os.environ.get("LATHE_RACE_RUNS", "500")))


if __name__ == "__main__":
    unittest.main()

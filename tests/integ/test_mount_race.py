"""A read-only workspace's path flipped during runs (short version; the long
one is tests/slow/test_mount_race.py): the run never sees the attacker's
directory over /etc, and every run has no-new-privileges set."""
import os
import unittest

from harness import DaemonTest
from mount_race import mount_race


@unittest.skipUnless(os.geteuid() == 0, "the race is against a root daemon")
class MountRace(DaemonTest):
    def test_flipped_path_is_never_bound_elsewhere(self):
        mount_race(self, self.d, runs=int(os.environ.get("LATHE_RACE_RUNS", "40")))


if __name__ == "__main__":
    unittest.main()

"""Four clients reading a 300 MB log at once: the daemon's RSS stays under
100 MB (ctest -L slow; the integ test does the same with 100 MB)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integ"))
os.environ.setdefault("LATHE_BIG_LOG_MB", "300")
from harness import DaemonTest  # noqa: E402,F401
from test_logs import Logs  # noqa: E402


class LogsLarge(Logs):
    pass


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    suite.addTest(LogsLarge("test_four_clients_read_a_big_log_in_bounded_memory"))
    return suite


if __name__ == "__main__":
    unittest.main()

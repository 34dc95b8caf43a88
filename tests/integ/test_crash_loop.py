"""Short crash loop (the long one is tests/slow/test_crash_loop.py)."""
import unittest

from crash_loop import crash_loop


class CrashLoop(unittest.TestCase):
    def test_a_few_kills(self):
        crash_loop(self, kills=4)


if __name__ == "__main__":
    unittest.main()

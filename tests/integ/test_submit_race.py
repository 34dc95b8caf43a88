"""Short submission race (the long one is tests/slow/test_submit_race.py)."""
import unittest

from submit_race import submit_race


class SubmitRace(unittest.TestCase):
    def test_a_few_kills_make_no_duplicates(self):
        submit_race(self, submissions=30, kills=3)


if __name__ == "__main__":
    unittest.main()

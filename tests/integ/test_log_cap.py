"""A run's log has a cap (config.yaml `run_log_max`): a run that prints as fast
as it can keeps the head and the newest part of its log on disk, never more
than the cap; the gap is marked in the log and in the run's events."""
import json
import os
import unittest

from harness import PY, DaemonTest

CAP = 1 << 20  # the smallest cap the daemon takes: 1 MiB

PRINTER = r"""
import sys
out = sys.stdout
for i in range(200000):
    out.write("line %07d %s\n" % (i, "x" * 40))
"""


class LogCap(DaemonTest):
    gpus = "none"

    def setUp(self):
        super().setUp()
        self.d.stop()
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("run_log_max: 1MiB\n")
        self.d.start()

    def test_a_run_printing_without_end_keeps_head_and_tail_within_the_cap(self):
        rid = self.d.submit("--", PY, "-c", PRINTER)
        run = self.d.wait_state(rid, ["succeeded", "failed"], timeout=180)
        self.assertEqual(run["state"], "succeeded", run)
        path = os.path.join(run["run_dir"], "log")
        st = os.stat(path)
        self.assertGreater(st.st_size, 8 * CAP)  # the run printed ~10 MB ...
        self.assertLessEqual(st.st_blocks * 512, CAP + 256 * 1024)  # ... the disk holds the cap
        first = self.d.cli("logs", rid, "--limit", "1").stdout
        self.assertIn("line 0000000", first)
        last = self.d.cli("logs", rid, "--tail", "1").stdout
        self.assertIn("line 0199999", last)
        marked = self.d.cli("logs", rid, "--grep", "capped at").stdout
        self.assertIn("run_log_max", marked)
        events = self.d.inspect(rid)["events"]
        truncated = [e for e in events if e.get("data", {}).get("msg_id") == "run.log_truncated"]
        self.assertEqual(len(truncated), 1, json.dumps(events)[:3000])
        self.assertGreater(truncated[0]["data"]["trimmed_bytes"], 6 * CAP)

    def test_a_bad_cap_is_refused_naming_the_key(self):
        self.d.stop()
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("run_log_max: 10\n")
        r = self.d.cli("daemon", "--home", self.d.home, check=False, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("run_log_max", r.stderr)


if __name__ == "__main__":
    unittest.main()

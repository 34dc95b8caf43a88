"""The monitor keeps a Slurm job's time itself (launch.json `warn_after_ms`, exec/attempt_records.h):
that long after it started the run, it stops the run as on Slurm's SIGUSR1 (SIGTERM, then the
exit record names SIGUSR1 as the stop), once, and not at all when a stop came first. The monitor
runs detached, as in a Slurm job (`lathe __monitor launch.json -`); no Slurm is needed.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import LATHE  # noqa: E402

# Counts the SIGTERMs it gets for a moment after the first, then exits 0.
PROGRAM = r"""
n=0
trap 'n=$((n+1)); echo "term $n"' TERM
echo started
while [ $n -eq 0 ]; do sleep 0.1; done
i=0; while [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
echo "done after $n"
"""


class MonitorWarning(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lathe-monitor-warn-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def launch(self, warn_after_ms):
        d = self.dir
        cfg = {"run_id": "r-warn", "attempt": 1, "argv": ["/bin/sh", "-c", PROGRAM],
               "env": {"PATH": "/usr/bin:/bin"}, "workdir": d, "uid": os.getuid(),
               "gid": os.getgid(), "groups": [], "log_path": f"{d}/log", "shm_bytes": 0,
               "cgroup_dirs": [], "monitor_path": f"{d}/monitor.json",
               "exit_path": f"{d}/exit.json", "kill_grace_ms": 2000,
               "warn_after_ms": warn_after_ms}
        with open(f"{d}/launch.json", "w") as f:
            json.dump(cfg, f)
        return subprocess.Popen([LATHE, "__monitor", f"{d}/launch.json", "-"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def log(self):
        with open(f"{self.dir}/log") as f:
            return [line.split(" ", 3)[3].rstrip("\n") for line in f if line.count(" ") >= 3]

    def exit_record(self):
        with open(f"{self.dir}/exit.json") as f:
            return json.load(f)

    def wait_started(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.exists(f"{self.dir}/log") and "started" in self.log():
                return
            time.sleep(0.05)
        self.fail("the run did not start")

    def test_the_warning_stops_the_run_as_slurms_usr1_would(self):
        m = self.launch(warn_after_ms=1000)
        self.assertEqual(m.wait(30), 0, m.stdout.read())
        self.assertIn("term 1", self.log())
        self.assertIn("done after 1", self.log())  # once: one SIGTERM
        e = self.exit_record()
        self.assertEqual(e["exit_code"], 0, e)
        self.assertEqual(e.get("stop_signal"), signal.SIGUSR1, e)

    def test_slurms_own_usr1_after_the_warning_is_not_passed_on_again(self):
        m = self.launch(warn_after_ms=500)
        self.wait_started()
        deadline = time.monotonic() + 10
        while "term 1" not in self.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        m.send_signal(signal.SIGUSR1)  # Slurm's, late
        self.assertEqual(m.wait(30), 0)
        self.assertIn("done after 1", self.log())
        self.assertEqual(self.exit_record().get("stop_signal"), signal.SIGUSR1)

    def test_a_stop_that_came_first_is_the_one_recorded(self):
        m = self.launch(warn_after_ms=1500)
        self.wait_started()
        m.send_signal(signal.SIGTERM)  # scancel --signal=TERM: the user's stop
        self.assertEqual(m.wait(30), 0)
        self.assertIn("done after 1", self.log())  # the warning did not come on top
        self.assertEqual(self.exit_record().get("stop_signal"), signal.SIGTERM)

    def test_without_a_warning_time_nothing_is_stopped(self):
        m = self.launch(warn_after_ms=0)
        self.wait_started()
        time.sleep(1.5)
        self.assertNotIn("term 1", self.log())
        m.send_signal(signal.SIGTERM)
        self.assertEqual(m.wait(30), 0)


if __name__ == "__main__":
    unittest.main()

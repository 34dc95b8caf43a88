"""Memory limits, private /dev/shm, and stopping a whole process tree."""
import os
import time
import unittest

from harness import PY, DaemonTest, pid_alive

ALLOC = "b = bytearray(256 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')"


class Limits(DaemonTest):
    gpus = "none"

    def test_memory_limit_oom_kills_and_reports_it(self):
        i = self.d.submit("--memory", "64MB", "--", PY, "-c", ALLOC)
        r = self.d.wait_state(i, "failed")
        self.assertTrue(r["oom_killed"], r)
        self.assertEqual(r["signal"], 9)
        self.assertIn("out of memory", r["reason"])
        self.assertNotIn("survived", self.d.logs(i))
        # Without the limit the same program completes.
        ok = self.d.submit("--", PY, "-c", ALLOC)
        self.assertEqual(self.d.wait_state(ok, "succeeded")["oom_killed"], False)

    def test_cpus_sets_the_cgroup_quota(self):
        probe = ("import re\n"
                 "for line in open('/proc/self/cgroup'):\n"
                 "    n, ctl, path = line.strip().split(':', 2)\n"
                 "    if 'cpu' in ctl.split(',') and ctl:\n"
                 "        base = '/sys/fs/cgroup/' + ctl + path\n"
                 "        print(open(base + '/cpu.cfs_quota_us').read().strip(), open(base + '/cpu.cfs_period_us').read().strip())\n"
                 "    elif ctl == '' and path != '/':\n"
                 "        try: print(*open('/sys/fs/cgroup' + path + '/cpu.max').read().split())\n"
                 "        except OSError: pass\n")
        i = self.d.submit("--cpus", "0.5", "--", PY, "-c", probe)
        self.d.wait_state(i, "succeeded")
        quota, period = self.d.logs(i).split()[:2]
        self.assertEqual(int(quota) / int(period), 0.5)

    def test_gpu_runs_are_refused_without_gpus(self):
        r = self.d.cli("run", "--gpus", "1", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no GPUs", r.stderr)
        self.assertIn("sim:4x24GB", r.stderr)
        self.assertIn("0 (none", self.d.cli("status").stdout)

    def test_private_shm_has_the_requested_size(self):
        i = self.d.submit("--shm", "64MB", "--", PY, "-c",
                          "import os; s = os.statvfs('/dev/shm'); print(s.f_blocks * s.f_frsize)")
        self.d.wait_state(i, "succeeded")
        self.assertEqual(self.d.logs(i).strip(), "64000000")

    def test_stop_reaches_a_child_that_called_setsid(self):
        i = self.d.submit("--", "sh", "-c", "setsid sleep 1000 & echo child=$!; sleep 1000")
        self.d.wait_state(i, "running")
        out = self.d.wait_for(lambda: "child=" in self.d.logs(i) and self.d.logs(i), "child pid")
        child = int(out.split("child=")[1].split()[0])
        self.assertTrue(pid_alive(child))
        self.d.cli("stop", i)
        r = self.d.wait_state(i, "stopped")
        self.assertIsNone(r["exit_code"])
        self.d.wait_for(lambda: not pid_alive(child), "setsid child to die")

    def test_sigterm_ignoring_run_is_killed_after_grace(self):
        i = self.d.submit("--", "sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.2; done")
        self.d.wait_for(lambda: "ready" in self.d.logs(i), "ready")
        self.d.cli("stop", i)
        r = self.d.wait_state(i, "stopped")
        self.assertEqual(r["signal"], 9)


if __name__ == "__main__":
    unittest.main()

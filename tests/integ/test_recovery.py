"""kill -9 of the daemon: runs keep going, exits are recorded, nothing is lost."""
import os
import signal
import time
import unittest

from harness import Daemon, DaemonTest


class Recovery(DaemonTest):
    def test_kill9_daemon_then_restart(self):
        ended = self.d.submit("--gpus", "1", "--", "sh", "-c",
                              "echo a1; sleep 3; for i in 1 2 3 4 5; do echo line $i; done; exit 3")
        alive = self.d.submit("--gpus", "1", "--", "sh", "-c",
                              "echo b1; sleep 9; echo b2")
        self.d.wait_state(ended, "running")
        self.d.wait_state(alive, "running")
        self.d.wait_for(lambda: "b1" in self.d.logs(alive), "b1")
        self.d.kill9()
        time.sleep(5)  # `ended` exits while the daemon is dead; `alive` keeps going
        self.d.start()
        r = self.d.wait_state(ended, "failed")
        self.assertEqual(r["exit_code"], 3)
        self.assertEqual(self.d.logs(ended), "a1\nline 1\nline 2\nline 3\nline 4\nline 5\n")
        self.assertTrue(any("while the daemon was down" in e["message"] for e in r["events"]))
        self.assertEqual(self.d.inspect(alive)["state"], "running")
        r = self.d.wait_state(alive, "succeeded")
        self.assertEqual(self.d.logs(alive), "b1\nb2\n")
        self.assertTrue(any("re-adopted" in e["message"] for e in r["events"]))

    def test_run_whose_monitor_vanished_is_lost_and_retried(self):
        i = self.d.submit("--retry", "1", "--", "sh", "-c",
                          'if [ "$LATHE_ATTEMPT" = 1 ]; then sleep 1000; fi; echo attempt $LATHE_ATTEMPT')
        r = self.d.wait_state(i, "running")
        self.d.kill9()
        # The monitor and its run die while the daemon is down.
        mon = r["run_dir"] + "/attempt-1/monitor.json"
        import json
        with open(mon) as f:
            m = json.load(f)
        os.kill(m["monitor_pid"], signal.SIGKILL)
        os.kill(m["child_pid"], signal.SIGKILL)
        time.sleep(0.5)
        self.d.start()
        r = self.d.wait_state(i, "succeeded")
        states = [e["data"].get("to") for e in r["events"] if e["type"] == "state"]
        self.assertIn("lost", states)
        self.assertEqual(r["retries_used"], 1)
        self.assertIn("attempt 2", self.d.logs(i))

    def test_second_daemon_on_same_home_is_refused(self):
        other = Daemon(home=self.d.home)
        import subprocess
        from harness import LATHE
        p = subprocess.run([LATHE, "daemon", "--home", self.d.home, "--gpus", "none"],
                           capture_output=True, text=True, timeout=30, env=self.d.env())
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("already running", p.stderr)


if __name__ == "__main__":
    unittest.main()

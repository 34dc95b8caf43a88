"""`lathe reload` and SIGHUP read config.yaml again while the daemon runs: a raised quota
lets a queued run start without a restart, a lowered one holds the next run back; a file
that does not check is refused naming the key, and the settings in force stay. Only root
or the daemon's user may ask.
"""
import json
import os
import signal
import unittest

from harness import Daemon, second_user

USER = "lathe-it-reload"


class Reload(unittest.TestCase):
    def setUp(self):
        second_user(self, USER)
        self.d = Daemon(gpus="sim:4x24GB")
        self.write("quotas:\n  default: {gpus: 1}\n")
        self.d.start()
        self.addCleanup(self.d.cleanup)

    def write(self, text):
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write(text)

    def job(self):
        return self.d.cli("run", "--gpus", "1", "--workdir", "/tmp", "--", "sleep", "300",
                          user=USER, env=self.d.env(HOME="/tmp")).stdout.strip()

    def test_a_raised_quota_starts_a_queued_run_and_a_bad_file_changes_nothing(self):
        first = self.job()
        self.d.wait_state(first, "running")
        second = self.job()
        self.d.wait_for(lambda: "quota" in json.dumps(self.d.inspect(second)).lower() or None,
                        "the second run waiting on the quota")
        self.assertEqual(self.d.inspect(second)["state"], "queued")
        # A file that does not check: refused naming the key, nothing changes.
        self.write("quotas:\n  default: {gpus: -1}\n")
        r = self.d.cli("reload", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)  # docs/cli.md: invalid input
        self.assertIn("gpus", r.stderr)
        self.assertEqual(self.d.inspect(second)["state"], "queued")
        # A key given twice is refused too, not the last one taken.
        self.write("quotas:\n  default: {gpus: 1}\n  default: {gpus: 2}\n")
        r = self.d.cli("reload", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("key 'default' is given twice", r.stderr)
        self.assertEqual(self.d.inspect(second)["state"], "queued")
        # Only the daemon's own users may ask.
        r = self.d.cli("reload", user=USER, env=self.d.env(HOME="/tmp"), check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        # Raised: the queued run starts, no restart.
        self.write("quotas:\n  default: {gpus: 2}\n")
        out = json.loads(self.d.cli("reload", "--json").stdout)
        self.assertIn("quotas", out["applied"])
        self.assertIn("pools", out["at_next_start"])
        self.d.wait_state(second, "running")
        # Lowered by SIGHUP: running runs stay, the next one waits.
        self.write("quotas:\n  default: {gpus: 1}\n")
        self.d.proc.send_signal(signal.SIGHUP)
        self.d.wait_for(lambda: "read again" in self.d.daemon_log() or None, "the reload", 30)
        third = self.job()
        self.d.wait_for(lambda: "quota" in json.dumps(self.d.inspect(third)).lower() or None,
                        "the third run waiting on the quota")
        self.assertEqual(self.d.inspect(third)["state"], "queued")
        self.assertEqual(self.d.inspect(second)["state"], "running")
        for run in (first, second, third):
            self.d.cli("stop", run, check=False)
        # No daemon to ask: exit 4.
        self.d.cli("down")
        self.assertEqual(self.d.cli("reload", check=False).returncode, 4)


if __name__ == "__main__":
    unittest.main()

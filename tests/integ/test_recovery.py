"""kill -9 of the daemon: runs keep going, exits are recorded, nothing is lost."""
import os
import signal
import sqlite3
import time
import unittest

from harness import Daemon, DaemonTest


# The database back to schema v2, as the Lathe before execution backends
# wrote it: the local handle's fields in their own columns, and no API tokens
# (schema v4), secrets (v5), browser sessions (v6), GPU attempts (v7; their
# project, v16), deployment keys (v8), workspaces (v9), the model registry
# (v10), deployments (v11), credentials (v12, the tokens, sessions and keys),
# chains (v13), images (v14) or sharing (v15).
DOWNGRADE_TO_V2 = """
DROP TABLE IF EXISTS project_members;
DROP TABLE IF EXISTS projects;
DROP TABLE IF EXISTS shares;
DROP TABLE credentials;
DROP TABLE IF EXISTS secrets;
DROP TABLE IF EXISTS gpu_attempts;
DROP TABLE IF EXISTS browser_sessions;
DROP TABLE IF EXISTS session_keys;
DROP TABLE IF EXISTS deploy_keys;
DROP TABLE IF EXISTS model_aliases;
DROP TABLE IF EXISTS model_versions;
DROP TABLE IF EXISTS models;
DROP INDEX IF EXISTS runs_by_deployment;
DROP TABLE IF EXISTS deployment_events;
DROP TABLE IF EXISTS deployments;
DROP TABLE IF EXISTS images;
DROP TABLE IF EXISTS image_grants;
ALTER TABLE runs ADD COLUMN monitor_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN monitor_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN child_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cgroup_dirs TEXT NOT NULL DEFAULT '[]';
UPDATE runs SET
  monitor_pid = COALESCE(json_extract(handle, '$.monitor_pid'), 0),
  monitor_start = COALESCE(json_extract(handle, '$.monitor_start'), 0),
  child_pid = COALESCE(json_extract(handle, '$.child_pid'), 0),
  cgroup_dirs = COALESCE(json_extract(handle, '$.cgroup_dirs'), '[]');
ALTER TABLE runs DROP COLUMN backend;
ALTER TABLE runs DROP COLUMN handle;
ALTER TABLE runs DROP COLUMN workspace;
ALTER TABLE runs DROP COLUMN chain_started_at;
PRAGMA user_version = 2;
"""


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

    def test_home_of_the_previous_schema_is_migrated_and_its_runs_readopted(self):
        """A home as the Lathe before execution backends left it (schema v2:
        monitor_pid, monitor_start, child_pid and cgroup_dirs columns), with
        runs live in it: the new daemon migrates it, re-adopts the live run
        and records the exit of the one that ended while it was down."""
        ended = self.d.submit("--", "sh", "-c", "echo e1; sleep 2; exit 4")
        alive = self.d.submit("--", "sh", "-c", "echo a1; sleep 6; echo a2")
        self.d.wait_state(ended, "running")
        self.d.wait_state(alive, "running")
        self.d.wait_for(lambda: "a1" in self.d.logs(alive), "a1")
        self.d.kill9()
        db = sqlite3.connect(os.path.join(self.d.home, "lathe.db"))
        db.executescript(DOWNGRADE_TO_V2)
        db.commit()
        cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
        self.assertIn("monitor_pid", cols)
        self.assertNotIn("handle", cols)
        pids = dict(db.execute("SELECT id, monitor_pid FROM runs"))
        self.assertTrue(all(p > 0 for p in pids.values()), pids)
        db.close()
        time.sleep(3)  # `ended` exits while no daemon watches
        self.d.start()
        r = self.d.wait_state(ended, "failed")
        self.assertEqual(r["exit_code"], 4)
        self.assertTrue(any("while the daemon was down" in e["message"] for e in r["events"]))
        self.assertEqual(self.d.inspect(alive)["state"], "running")
        r = self.d.wait_state(alive, "succeeded")
        self.assertEqual(self.d.logs(alive), "a1\na2\n")
        self.assertTrue(any("re-adopted" in e["message"] for e in r["events"]))
        db = sqlite3.connect(os.path.join(self.d.home, "lathe.db"))
        self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 16)
        ledger = [r[1] for r in db.execute("PRAGMA table_info(gpu_attempts)")]
        self.assertIn("project", ledger)
        backends = {b for (b,) in db.execute("SELECT backend FROM runs")}
        db.close()
        self.assertEqual(backends, {"local"})

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

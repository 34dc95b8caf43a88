"""lathe rm: removing finished runs one by one, in bulk (--finished --older-than),
by the daemon's retention policy, and who may."""
import json
import os
import shutil
import tempfile
import unittest

from harness import DaemonTest, second_user

USER = "lathe-it-user"


class Rm(DaemonTest):
    gpus = "none"

    def finished(self, *cmd):
        run = self.d.submit("--", *(cmd or ("true",)))
        self.d.wait_state(run, "succeeded")
        return run

    def gone(self, run):
        r = self.d.cli("inspect", run, check=False)
        return r.returncode == 3

    def test_rm_own_finished_run_and_its_directory(self):
        run = self.finished("sh", "-c", "echo hello")
        run_dir = self.d.inspect(run)["run_dir"]
        self.assertTrue(os.path.isdir(run_dir))
        r = self.d.cli("rm", run)
        self.assertIn(run, r.stdout)
        self.assertTrue(self.gone(run))
        self.assertFalse(os.path.exists(run_dir))
        # Again: not found, exit 3.
        r = self.d.cli("rm", run, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)

    def test_rm_of_a_running_run_is_refused_naming_its_state(self):
        running = self.d.submit("--", "sleep", "60")
        self.d.wait_state(running, "running")
        done = self.finished()
        r = self.d.cli("rm", running, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("is running", r.stderr)
        self.assertEqual(self.d.inspect(running)["state"], "running")
        # Several: each is removed or its error printed; the exit code is the worst.
        r = self.d.cli("rm", done, running, "no-such-run", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(done, r.stdout)
        self.assertIn("is running", r.stderr)
        self.assertIn("no-such-run", r.stderr)
        self.assertIn("2 of 3", r.stderr)
        self.assertTrue(self.gone(done))
        self.assertEqual(self.d.inspect(running)["state"], "running")
        self.d.cli("stop", running)

    def test_finished_older_than_dry_run_then_for_real(self):
        a, b = self.finished(), self.finished()
        running = self.d.submit("--", "sleep", "60")
        self.d.wait_state(running, "running")
        # A day is older than both: nothing goes.
        out = json.loads(self.d.cli("rm", "--finished", "--older-than", "1d", "--json").stdout)
        self.assertEqual(out["removed"], [])
        self.assertEqual(out["kept"], 2)
        r = self.d.cli("rm", "--finished", "--older-than", "0s", "--dry-run")
        self.assertIn("would remove run " + a, r.stdout)
        self.assertIn("would remove run " + b, r.stdout)
        self.assertNotIn(running, r.stdout)
        self.assertFalse(self.gone(a) or self.gone(b))
        out = json.loads(self.d.cli("rm", "--finished", "--older-than", "0s", "--json").stdout)
        self.assertEqual(sorted(x["id"] for x in out["removed"]), sorted([a, b]))
        self.assertTrue(self.gone(a) and self.gone(b))
        self.assertEqual(self.d.inspect(running)["state"], "running")
        self.d.cli("stop", running)

    def checkpointed(self, name):
        base = tempfile.mkdtemp(prefix="lathe-it-rm-")
        self.addCleanup(shutil.rmtree, base, True)
        ckpt = os.path.join(base, "ckpt")
        run = self.d.submit("--name", name, "--checkpoint-dir", ckpt, "--", "sh", "-c",
                            f"echo w > {ckpt}/w.bin; sleep 1")
        self.d.wait_state(run, "succeeded")
        self.d.wait_for(lambda: any(e["type"] == "checkpoint" for e in self.d.inspect(run)["events"]),
                        "a snapshot of " + run)
        return run

    def snapshot_runs(self):
        snaps = json.loads(self.d.cli("snap", "ls", "--json").stdout)
        return {s.get("tags", {}).get("run") for s in snaps if s.get("status") == "complete"}

    def test_snapshots_go_only_when_asked(self):
        kept, dropped = self.checkpointed("kept"), self.checkpointed("dropped")
        self.assertEqual(self.snapshot_runs(), {kept, dropped})
        self.d.cli("rm", kept)
        self.assertEqual(self.snapshot_runs(), {kept, dropped})
        out = json.loads(self.d.cli("rm", "--finished", "--older-than", "0s", "--snapshots",
                                    "--json").stdout)
        self.assertEqual([x["id"] for x in out["removed"]], [dropped])
        self.assertGreaterEqual(out["snapshots_deleted"], 1)
        self.assertEqual(self.snapshot_runs(), {kept})

    def test_usage_errors(self):
        for args in (("rm",), ("rm", "--finished"), ("rm", "--older-than", "1d"),
                     ("rm", "x", "--finished", "--older-than", "1d"),
                     ("rm", "--finished", "--older-than", "soon")):
            r = self.d.cli(*args, check=False)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")

    def test_retention_policy_removes_old_finished_runs_at_start(self):
        old = self.finished()
        self.d.stop()
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("retention:\n  finished_runs: 1ms\n")
        self.d.start()
        self.d.wait_for(lambda: self.gone(old), "retention to remove " + old)
        self.assertIn("retention: removed 1 finished run", self.d.daemon_log())
        status = json.loads(self.d.cli("status", "--json").stdout)
        self.assertEqual(status["retention"], {"finished_runs_ms": 1, "snapshots": False})


class RmUsers(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.pw = second_user(self, USER)
        super().setUp()

    def test_another_user_can_neither_rm_nor_prune_roots_runs(self):
        mine = self.d.submit("--", "true")
        self.d.wait_state(mine, "succeeded")
        env = self.d.env(HOME="/tmp")
        r = self.d.cli("rm", mine, user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("belongs to root", r.stderr)
        for extra in (("--user", "root"), ("--all-users",)):
            r = self.d.cli("rm", "--finished", "--older-than", "0s", *extra, user=USER, env=env,
                           check=False)
            self.assertEqual(r.returncode, 1, f"{extra}: {r.stderr}")
            self.assertIn("only root", r.stderr)
        # Their own prune leaves root's run alone.
        theirs = self.d.cli("run", "--workdir", "/tmp", "--", "true", user=USER, env=env).stdout.strip()
        self.d.wait_state(theirs, "succeeded")
        out = json.loads(self.d.cli("rm", "--finished", "--older-than", "0s", "--json",
                                    user=USER, env=env).stdout)
        self.assertEqual([x["id"] for x in out["removed"]], [theirs])
        self.assertEqual(self.d.inspect(mine)["state"], "succeeded")
        # Root may prune another user's runs by name.
        theirs = self.d.cli("run", "--workdir", "/tmp", "--", "true", user=USER, env=env).stdout.strip()
        self.d.wait_state(theirs, "succeeded")
        out = json.loads(self.d.cli("rm", "--finished", "--older-than", "0s", "--user", USER,
                                    "--json").stdout)
        self.assertEqual([x["id"] for x in out["removed"]], [theirs])
        self.assertEqual(self.d.inspect(mine)["state"], "succeeded")


if __name__ == "__main__":
    unittest.main()

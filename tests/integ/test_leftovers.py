"""What a kill -9 leaves behind is reclaimed when the daemon starts again: run
directories without a record (a kill during submission or `lathe rm`), replica
socket directories of no live replica (a kill during a deployment's removal) —
removed as their owners where they are users', never through their links."""
import os
import shutil
import tempfile
import unittest

from harness import DaemonTest, second_user

USER = "lathe-it-leftover"


class Leftovers(DaemonTest):
    gpus = "none"

    def test_directories_of_no_record_are_reclaimed_at_start(self):
        pw = second_user(self, USER)
        kept = self.d.submit("--", "true")
        self.d.wait_state(kept, "succeeded")
        runs = os.path.join(self.d.home, "runs")
        # A run directory of a submission that was never recorded, with a token and a directory
        # of the user's in it that links to a file of root's.
        victim_dir = tempfile.mkdtemp(prefix="lathe-leftover-")
        self.addCleanup(shutil.rmtree, victim_dir, True)
        precious = os.path.join(victim_dir, "precious")
        with open(precious, "w") as f:
            f.write("root's\n")
        orphan = os.path.join(runs, "rorphan00001")
        os.makedirs(os.path.join(orphan, "notebook"))
        with open(os.path.join(orphan, "notebook.token"), "w") as f:
            f.write("x" * 64)
        os.symlink(precious, os.path.join(orphan, "notebook", "link"))
        os.symlink(victim_dir, os.path.join(orphan, "notebook", "dirlink"))
        os.lchown(os.path.join(orphan, "notebook", "link"), pw.pw_uid, pw.pw_gid)
        os.chown(os.path.join(orphan, "notebook"), pw.pw_uid, pw.pw_gid)
        # A replica socket directory of no replica, the user's, as the loop makes them.
        sockets = os.path.join(self.d.home, "deployments", "sockets")
        os.makedirs(sockets, exist_ok=True)
        stale = os.path.join(sockets, "gone-abc123")
        os.makedirs(stale)
        os.symlink(precious, os.path.join(stale, "serve.sock"))
        os.chown(stale, pw.pw_uid, pw.pw_gid)

        self.d.kill9()
        self.d.start()
        self.d.wait_for(lambda: not os.path.exists(orphan), "the orphan run directory to go")
        self.d.wait_for(lambda: not os.path.exists(stale), "the stale socket directory to go")
        self.assertTrue(os.path.isdir(os.path.join(runs, kept)))
        self.assertEqual(self.d.inspect(kept)["state"], "succeeded")
        with open(precious) as f:  # nothing was removed through the links
            self.assertEqual(f.read(), "root's\n")
        self.assertIn("leftovers: removed 1 run directories", self.d.daemon_log())


if __name__ == "__main__":
    unittest.main()

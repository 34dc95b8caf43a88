"""A second local user can neither stop nor read another user's run."""
import os
import pwd
import subprocess
import unittest

from harness import DaemonTest

USER = "lathe-it-user"


def ensure_user():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
                       check=True)
        return pwd.getpwnam(USER)


class Users(DaemonTest):
    gpus = "none"

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to create a second user (CI runs as root)")
        self.pw = ensure_user()
        super().setUp()

    def test_other_user_cannot_stop_or_read(self):
        mine = self.d.submit("--", "sh", "-c", "echo secret; sleep 60")
        self.d.wait_state(mine, "running")
        env = self.d.env(HOME="/tmp")
        r = self.d.cli("stop", mine, user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("belongs to root", r.stderr)
        r = self.d.cli("logs", mine, user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("secret", r.stdout)
        r = self.d.cli("inspect", mine, user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.d.inspect(mine)["state"], "running")
        # Their own run executes as them, and they can read and stop it.
        theirs = self.d.cli("run", "--workdir", "/tmp", "--", "sh", "-c", "id -u; sleep 60",
                            user=USER, env=env).stdout.strip()
        self.d.wait_state(theirs, "running")
        out = self.d.wait_for(lambda: self.d.cli("logs", theirs, user=USER, env=env).stdout, "log")
        self.assertEqual(out.strip(), str(self.pw.pw_uid))
        log = os.path.join(self.d.inspect(theirs)["run_dir"], "log")
        st = os.stat(log)
        self.assertEqual(st.st_uid, self.pw.pw_uid)
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.d.cli("stop", theirs, user=USER, env=env)
        self.d.wait_state(theirs, "stopped")


if __name__ == "__main__":
    unittest.main()

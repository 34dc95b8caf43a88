"""A second local user can neither stop nor read another user's run."""
import json
import os
import pwd
import shutil
import subprocess
import tempfile
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

    def scratch(self, prefix):
        """A root-owned 0755 directory (removed afterwards) holding a "user"
        directory that belongs to USER: (base, user_dir)."""
        base = tempfile.mkdtemp(prefix=prefix)
        self.addCleanup(shutil.rmtree, base, True)
        os.chmod(base, 0o755)
        user_dir = os.path.join(base, "user")
        os.makedirs(user_dir)
        os.chown(user_dir, self.pw.pw_uid, self.pw.pw_gid)
        return base, user_dir

    def test_snapshots_follow_run_ownership(self):
        env = self.d.env(HOME="/tmp")
        base, user_home = self.scratch("lathe-it-snap-")
        mine_dir = os.path.join(base, "root-ckpt")
        mine = self.d.submit("--checkpoint-dir", mine_dir, "--", "sh", "-c",
                             f"echo secret > {mine_dir}/a.bin; sleep 1")
        theirs_dir = os.path.join(user_home, "ckpt")
        theirs = self.d.cli("run", "--workdir", "/tmp", "--checkpoint-dir", theirs_dir, "--", "sh", "-c",
                            f"echo hi > {theirs_dir}/b.bin; sleep 1", user=USER, env=env).stdout.strip()
        for run in (mine, theirs):
            self.d.wait_state(run, "succeeded")
            self.d.wait_for(lambda: any(e["type"] == "checkpoint" for e in self.d.inspect(run)["events"]),
                            "a snapshot of " + run)
        # The daemon made the user's checkpoint directory theirs.
        self.assertEqual(os.stat(theirs_dir).st_uid, self.pw.pw_uid)

        def ls(user=None, *args):
            r = self.d.cli("snap", "ls", "--json", *args, user=user, env=env if user else None)
            return json.loads(r.stdout)
        everything = ls()
        self.assertEqual({s["tags"]["run"] for s in everything}, {mine, theirs})
        visible = ls(USER)
        self.assertEqual({s["tags"]["run"] for s in visible}, {theirs})
        root_snap = [s["id"] for s in everything if s["tags"]["run"] == mine][0]
        their_snap = visible[0]["id"]

        r = self.d.cli("snap", "ls", mine, user=USER, env=env, check=False)
        self.assertNotEqual(r.returncode, 0)
        r = self.d.cli("snap", "show", root_snap, user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("belongs to root", r.stderr)
        out = os.path.join(user_home, "out")
        r = self.d.cli("snap", "restore", root_snap, "--to", out, user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(out))
        # Their own snapshot restores into their directory, as their files...
        self.d.cli("snap", "restore", their_snap, "--to", out, user=USER, env=env)
        with open(os.path.join(out, "b.bin")) as f:
            self.assertEqual(f.read(), "hi\n")
        self.assertEqual(os.stat(os.path.join(out, "b.bin")).st_uid, self.pw.pw_uid)
        # The store itself is the daemon's alone: another user cannot read
        # root's checkpoint bytes around the API (packs, manifests).
        store = os.path.join(self.d.home, "store")
        self.assertEqual(os.stat(store).st_mode & 0o777, 0o700)
        r = self.d.cli("snap", "--store", store, "ls", user=USER, env=env, check=False)
        self.assertNotEqual(r.returncode, 0)
        r = subprocess.run(["runuser", "-u", USER, "--", "ls", os.path.join(store, "packs")],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        # ...but not into a directory that is not theirs.
        r = self.d.cli("snap", "restore", their_snap, "--to", os.path.join(base, "elsewhere"),
                       user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(base, "elsewhere")))
        # A snapshot tagged by hand with a uid that is not a number belongs to
        # nobody else: refused with its tag as the owner, and the daemon lives on.
        hand = os.path.join(base, "hand")
        os.makedirs(hand)
        with open(os.path.join(hand, "f.bin"), "w") as f:
            f.write("x")
        made = json.loads(self.d.cli("snap", "--store", os.path.join(self.d.home, "store"), "create", hand,
                                     "--tag", "uid=not-a-number", "--json").stdout)
        r = self.d.cli("snap", "show", made["id"], user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("belongs to not-a-number", r.stderr)
        self.assertEqual({s["tags"]["run"] for s in ls(USER)}, {theirs})
        # The user's doctor cannot check the store (it is the daemon's alone)
        # and says so, instead of "no store yet".
        r = self.d.cli("doctor", "--json", user=USER, env=env, check=False)
        checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
        self.assertEqual(checks["lathe.store"]["outcome"], "lathe.store.not_readable", checks["lathe.store"])

    def test_users_run_resumes_with_its_checkpoint_restored_as_theirs(self):
        env = self.d.env(HOME="/tmp")
        base, home = self.scratch("lathe-it-resume-")
        ckpt = os.path.join(home, "ckpt")
        # Attempt 1 saves a checkpoint, waits for its capture, wipes the
        # directory and fails; attempt 2 must find the checkpoint restored.
        script = (f'if [ -n "$LATHE_RESUME_FROM" ]; then cat "$LATHE_RESUME_FROM/c.bin" > {home}/resumed; exit 0; fi; '
                  f'mkdir {ckpt}/step_7 && echo step-7 > {ckpt}/step_7/c.bin; sleep 2; rm -rf {ckpt}/step_7; exit 1')
        run = self.d.cli("run", "--workdir", home, "--retry", "1", "--checkpoint-dir", ckpt, "--",
                         "sh", "-c", script, user=USER, env=env).stdout.strip()
        self.d.wait_state(run, "succeeded")
        with open(os.path.join(home, "resumed")) as f:
            self.assertEqual(f.read(), "step-7\n")
        st = os.stat(os.path.join(ckpt, "step_7", "c.bin"))
        self.assertEqual((st.st_uid, st.st_gid), (self.pw.pw_uid, self.pw.pw_gid))
        self.assertEqual(os.stat(ckpt).st_uid, self.pw.pw_uid)
        # Under a directory only root may write (an admin's shared disk), the
        # daemon still creates the user's checkpoint directory, as theirs.
        shared = os.path.join(base, "shared", "ckpt")
        run = self.d.cli("run", "--workdir", home, "--checkpoint-dir", shared, "--", "sh", "-c",
                         f"echo x > {shared}/a.bin", user=USER, env=env).stdout.strip()
        self.d.wait_state(run, "succeeded")
        self.assertEqual(os.stat(shared).st_uid, self.pw.pw_uid)
        self.assertEqual(os.stat(os.path.dirname(shared)).st_uid, self.pw.pw_uid)


if __name__ == "__main__":
    unittest.main()

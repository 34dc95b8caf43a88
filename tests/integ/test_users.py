"""A second local user can neither stop nor read another user's run."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import DaemonTest, second_user

USER = "lathe-it-user"



class Users(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.pw = second_user(self, USER)
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
        # The run directory is root's: root's monitor writes in it, so the user
        # must not be able to swap its entries for symlinks to root's files.
        run_dir = os.path.dirname(log)
        st = os.stat(run_dir)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o711))
        r = subprocess.run(["runuser", "-u", USER, "--", "ln", "-sf", "/etc/shadow", log],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.islink(log))
        self.d.cli("stop", theirs, user=USER, env=env)
        self.d.wait_state(theirs, "stopped")

    def test_run_names_are_each_users_own(self):
        env = self.d.env(HOME="/tmp")
        mine = self.d.submit("--name", "train", "--", "sleep", "60")
        # Another user's active run called "train" does not hold the name for them ...
        theirs = self.d.cli("run", "--name", "train", "--workdir", "/tmp", "--", "sleep", "60",
                            user=USER, env=env).stdout.strip()
        self.assertNotEqual(mine, theirs)
        # ... nor for their own name's second active run.
        r = self.d.cli("run", "--name", "train", "--workdir", "/tmp", "--", "true", user=USER,
                       env=env, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        # The name is the caller's own run, for each of them.
        self.d.cli("stop", "train", user=USER, env=env)
        self.d.wait_state(theirs, "stopped")
        self.assertEqual(self.d.inspect(mine)["state"], "running")
        self.d.cli("stop", "train")
        self.d.wait_state(mine, "stopped")

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
        # "latest" is the user's own newest snapshot, not the store's newest.
        r = self.d.cli("snap", "show", "latest", user=USER, env=env)
        self.assertIn(their_snap[:12], r.stdout)
        self.assertIn(made["id"][:12], self.d.cli("snap", "show", "latest").stdout)
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
        # Under a directory only root may write, the user could not have made
        # the directory: refused at submit, naming it, and nothing is created.
        shared = os.path.join(base, "shared", "ckpt")
        r = self.d.cli("run", "--workdir", home, "--checkpoint-dir", shared, "--", "true",
                       user=USER, env=env, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn(shared, r.stderr)
        self.assertIn("may not create", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(base, "shared")))

    def api(self, method, path, user=None):
        """(HTTP status, JSON body) of a request on the daemon's unix socket,
        made as `user` (the kernel names the caller: SO_PEERCRED)."""
        cmd = ["curl", "-sS", "--unix-socket", os.path.join(self.d.home, "lathe.sock"), "-X", method,
               "-w", "\n%{http_code}", "http://lathe" + path]
        if user is not None:
            cmd = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
        body, _, status = r.stdout.rpartition("\n")
        return int(status), json.loads(body or "{}")

    def test_snapshots_and_runs_are_deleted_only_by_their_owner(self):
        env = self.d.env(HOME="/tmp")
        base, user_home = self.scratch("lathe-it-delete-")
        mine_dir = os.path.join(base, "root-ckpt")
        mine = self.d.submit("--checkpoint-dir", mine_dir, "--", "sh", "-c", f"echo a > {mine_dir}/a.bin")
        theirs_dir = os.path.join(user_home, "ckpt")
        theirs = self.d.cli("run", "--workdir", "/tmp", "--checkpoint-dir", theirs_dir, "--", "sh", "-c",
                            f"echo b > {theirs_dir}/b.bin", user=USER, env=env).stdout.strip()
        for run in (mine, theirs):
            self.d.wait_state(run, "succeeded")
            self.d.wait_for(lambda: self.snapshots_of(run), "a snapshot of " + run)
        root_snap = self.snapshots_of(mine)[0]["id"]
        their_snap = self.snapshots_of(theirs)[0]["id"]

        # Another user may delete neither root's snapshot nor root's run.
        status, body = self.api("DELETE", f"/api/v1/snapshots/{root_snap}", user=USER)
        self.assertEqual((status, body["msg_id"]), (403, "snap.forbidden"), body)
        status, body = self.api("DELETE", f"/api/v1/runs/{mine}?snapshots=1", user=USER)
        self.assertEqual((status, body["msg_id"]), (403, "run.owner_only"), body)
        self.assertEqual([s["id"] for s in self.snapshots_of(mine)], [root_snap])
        self.assertEqual(self.d.inspect(mine)["state"], "succeeded")

        # Their own snapshot and run are theirs to delete.
        status, body = self.api("DELETE", f"/api/v1/snapshots/{their_snap}", user=USER)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["id"], their_snap)
        self.assertEqual(self.snapshots_of(theirs), [])
        status, body = self.api("DELETE", f"/api/v1/runs/{theirs}", user=USER)
        self.assertEqual(status, 200, body)
        status, body = self.api("GET", f"/api/v1/runs/{theirs}", user=USER)
        self.assertEqual((status, body["msg_id"]), (404, "run.not_found"), body)

        # Root may delete any finished run, with its snapshots; not one still running.
        running = self.d.submit("--", "sleep", "60")
        self.d.wait_state(running, "running")
        status, body = self.api("DELETE", f"/api/v1/runs/{running}")
        self.assertEqual((status, body["msg_id"]), (409, "run.not_finished"), body)
        self.d.cli("stop", running)
        status, body = self.api("DELETE", f"/api/v1/runs/{mine}?snapshots=1")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["snapshots_deleted"], 1)
        self.assertEqual(self.snapshots_of(mine), [])
        self.assertNotIn(mine, [r["id"] for r in self.d.runs(all_runs=True)])
        self.assertFalse(os.path.exists(os.path.join(self.d.home, "runs", mine)))

    def snapshots_of(self, run):
        return [s for s in json.loads(self.d.cli("snap", "ls", "--json").stdout)
                if s.get("tags", {}).get("run") == run]

    def test_checkpoint_dirs_are_used_only_where_the_user_could(self):
        env = self.d.env(HOME="/tmp")
        base, home = self.scratch("lathe-it-esc-")
        run_as_user = lambda *a: self.d.cli("run", "--workdir", home, *a, user=USER, env=env, check=False)
        # (1) An absent directory anywhere: root must not make it theirs.
        probe = "/etc/lathe-it-probe-%d" % os.getpid()
        r = run_as_user("--checkpoint-dir", probe, "--", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(probe, r.stderr)
        self.assertFalse(os.path.exists(probe))
        # (2) Root's 0700 directory: not watched, not snapshotted for them.
        secret_dir = os.path.join(base, "root-only")
        os.makedirs(secret_dir, mode=0o700)
        with open(os.path.join(secret_dir, "secret.bin"), "w") as f:
            f.write("root's")
        r = run_as_user("--checkpoint-dir", secret_dir, "--", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("may not", r.stderr)
        # (4) The daemon's home, its store, and anything containing them: no
        # run of anyone's may use them; a restore may not write there.
        for d in (self.d.home, os.path.join(self.d.home, "store"), os.path.dirname(self.d.home), "/"):
            for user in (USER, None):
                r = self.d.cli("run", "--workdir", home if user else "/tmp", "--checkpoint-dir", d, "--", "true",
                               user=user, env=env if user else None, check=False)
                self.assertNotEqual(r.returncode, 0, (d, user, r.stdout))
                self.assertIn("Lathe daemon's own directory", r.stderr, (d, user))
        mine = os.path.join(home, "ckpt")
        run = self.d.cli("run", "--workdir", home, "--checkpoint-dir", mine, "--", "sh", "-c",
                         f"echo hi > {mine}/a.bin; sleep 1", user=USER, env=env).stdout.strip()
        self.d.wait_state(run, "succeeded")
        snap = self.d.wait_for(lambda: self.snapshots_of(run), "a snapshot")[0]["id"]
        for to in (os.path.join(self.d.home, "loot"), os.path.join(self.d.home, "store", "x")):
            r = self.d.cli("snap", "restore", snap, "--to", to, check=False)  # even root's restore
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("Lathe daemon's own directory", r.stderr)
            self.assertFalse(os.path.exists(to))
        # No snapshot of anyone's holds the daemon's token.
        with open(os.path.join(self.d.home, "token")) as f:
            token = f.read().strip()
        for s in json.loads(self.d.cli("snap", "ls", "--json").stdout):
            if not s.get("skipped"):
                self.assertNotIn("token", [e["path"] for e in json.loads(
                    self.d.cli("snap", "show", "--json", s["id"]).stdout).get("files", [])])
        self.assertEqual(os.stat(os.path.join(self.d.home, "token")).st_mode & 0o777, 0o600)
        self.assertTrue(token)

    def test_a_shared_sticky_directory_is_left_as_it_is(self):
        # (3) A root-owned 1777 directory with root's files in it, as the
        # checkpoint directory of a user's run that fails once and is retried:
        # nothing of root's is read, chowned, changed or deleted.
        env = self.d.env(HOME="/tmp")
        base, home = self.scratch("lathe-it-sticky-")
        sticky = os.path.join(base, "sticky")
        os.makedirs(sticky)
        os.chmod(sticky, 0o1777)
        with open(os.path.join(sticky, "roots.bin"), "w") as f:
            f.write("root's data")
        os.chmod(os.path.join(sticky, "roots.bin"), 0o600)
        script = (f'if [ "$LATHE_ATTEMPT" = 1 ]; then echo x > {sticky}/theirs.bin; sleep 1; '
                  f'rm -f {sticky}/theirs.bin; exit 1; fi; exit 0')
        run = self.d.cli("run", "--workdir", home, "--retry", "1", "--checkpoint-dir", sticky, "--",
                         "sh", "-c", script, user=USER, env=env).stdout.strip()
        self.d.wait_state(run, ["succeeded", "failed"])
        st = os.stat(sticky)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o1777))
        st = os.stat(os.path.join(sticky, "roots.bin"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        with open(os.path.join(sticky, "roots.bin")) as f:
            self.assertEqual(f.read(), "root's data")
        # A snapshot, if one was taken, holds nothing the user could not read.
        for s in self.snapshots_of(run):
            if s.get("skipped"):
                continue
            shown = self.d.cli("snap", "show", "--json", s["id"]).stdout
            self.assertNotIn("roots.bin", shown)

    def test_a_checkpoint_dir_swapped_for_a_symlink_is_not_followed_after_a_restart(self):
        env = self.d.env(HOME="/tmp")
        base, home = self.scratch("lathe-it-swap-")
        secret_dir = os.path.join(base, "root-only")
        os.makedirs(secret_dir, mode=0o700)
        with open(os.path.join(secret_dir, "secret.bin"), "w") as f:
            f.write("root's")
        ckpt = os.path.join(home, "ckpt")
        run = self.d.cli("run", "--workdir", home, "--checkpoint-dir", ckpt, "--", "sleep", "60",
                         user=USER, env=env).stdout.strip()
        self.d.wait_state(run, "running")
        self.d.kill9()
        # While no daemon watches, the user swaps their directory for a link.
        subprocess.run(["runuser", "-u", USER, "--", "sh", "-c",
                        f"rmdir {ckpt} && ln -s {secret_dir} {ckpt}"], check=True)
        self.d.start()
        self.d.wait_for(lambda: any("not watched" in e["message"] for e in self.d.inspect(run)["events"]),
                        "the refusal to watch the swapped directory")
        for s in self.snapshots_of(run):
            self.assertNotIn("secret.bin", self.d.cli("snap", "show", "--json", s["id"]).stdout)
        self.d.cli("stop", run)

    def test_other_users_runs_show_no_spec(self):
        env = self.d.env(HOME="/tmp")
        mine = self.d.submit("--env", "HF_TOKEN=hf_secret_value", "--priority", "normal", "--",
                             "sh", "-c", "sleep 60 # arg-secret")
        theirs = self.d.cli("run", "--workdir", "/tmp", "--", "sleep", "60", user=USER, env=env).stdout.strip()
        self.d.wait_state(mine, "running")
        out = self.d.cli("ps", "--json", "--all", user=USER, env=env).stdout
        self.assertNotIn("hf_secret_value", out)
        self.assertNotIn("arg-secret", out)
        rows = {r["id"]: r for r in json.loads(out)}
        other = rows[mine]
        for hidden in ("spec", "run_dir", "reason", "exit_code"):
            self.assertNotIn(hidden, other)
        self.assertEqual((other["user"], other["state"]), ("root", "running"))
        self.assertIn("spec", rows[theirs])  # their own run, whole
        table = self.d.cli("ps", "--all", user=USER, env=env).stdout
        self.assertNotIn("arg-secret", table)
        self.assertIn(mine, table)
        # Root sees everything of theirs.
        whole = {r["id"]: r for r in self.d.runs(all_runs=True)}
        self.assertIn("spec", whole[theirs])
        self.d.cli("stop", mine)
        self.d.cli("stop", theirs)

    def test_the_database_is_private_in_new_and_repaired_homes(self):
        run = self.d.submit("--", "true")
        run_dir = self.d.wait_state(run, "succeeded")["run_dir"]
        files = [os.path.join(self.d.home, f) for f in ("lathe.db", "lathe.db-wal", "lathe.db-shm")]
        for f in files + [os.path.join(self.d.home, "token")]:
            self.assertEqual(os.stat(f).st_mode & 0o777, 0o600, f)
        r = subprocess.run(["runuser", "-u", USER, "--", "sqlite3", files[0], "select * from runs"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        # A home an older Lathe left readable is repaired at start.
        self.d.kill9()
        for f in files:
            os.chmod(f, 0o644)
        os.chown(run_dir, self.pw.pw_uid, self.pw.pw_gid)  # as older homes gave them out
        self.d.start()
        for f in files:
            self.assertEqual(os.stat(f).st_mode & 0o777, 0o600, f)
        self.assertEqual(os.stat(run_dir).st_uid, 0)

    def test_store_verbs_say_the_daemons_store_is_not_this_users_to_read(self):
        """prune, gc and fsck without --store open the daemon's store; the
        root daemon's is not a second user's to read, which is not "no store"."""
        src = tempfile.mkdtemp(prefix="lathe-it-store-")
        self.addCleanup(shutil.rmtree, src, True)
        with open(os.path.join(src, "w.bin"), "wb") as f:
            f.write(b"weights")
        self.d.cli("snap", "create", src)  # root's: the store exists
        env = self.d.env(HOME="/tmp", LANG="C.UTF-8")
        store = os.path.join(self.d.home, "store")
        for verb in (("fsck",), ("gc",), ("prune", "--keep-last", "1")):
            r = self.d.cli("snap", *verb, user=USER, env=env, check=False)
            self.assertEqual(r.returncode, 1, (verb, r.stderr))
            self.assertIn("not readable by this user", r.stderr, verb)
            self.assertIn(store, r.stderr, verb)
            self.assertNotIn("start the daemon", r.stderr, verb)
        # Root's own are unchanged.
        self.assertEqual(self.d.cli("snap", "fsck").returncode, 0)

    def test_a_run_creates_files_with_its_submitters_umask(self):
        out = tempfile.mkdtemp(prefix="lathe-it-umask-")
        self.addCleanup(shutil.rmtree, out, True)
        for mask, mode in (("027", 0o640), ("002", 0o664)):
            f = os.path.join(out, "f" + mask)
            r = subprocess.run(["sh", "-c", f"umask {mask}; exec \"$0\" run -- touch {f}", self.d_bin()],
                               capture_output=True, text=True, env=self.d.env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.d.wait_state(r.stdout.strip(), "succeeded")
            self.assertEqual(os.stat(f).st_mode & 0o777, mode, mask)

    def d_bin(self):
        from harness import LATHE
        return LATHE


if __name__ == "__main__":
    unittest.main()

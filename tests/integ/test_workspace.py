"""Workspaces: a run's code from git (cloned with depth 1 by the run's user,
served here by a real `git daemon` on 127.0.0.1) or from a directory used in
place; the commit checked out is recorded on the run; a clone that cannot be
made fails the run with git's words and the reason; `lathe rm` removes the
clone."""
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from harness import DaemonTest, free_port, second_user

USER = "lathe-it-ws"
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.com"]


def git(*args, cwd=None):
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return r.stdout.strip()


class Workspaces(DaemonTest):
    gpus = "none"

    @classmethod
    def setUpClass(cls):
        # A bare repository with branches main and dev, tags v1 and v2.
        cls.root = tempfile.mkdtemp(prefix="lathe-it-git-")
        os.chmod(cls.root, 0o755)
        work = os.path.join(cls.root, "work")
        git("init", "-q", "-b", "main", work)
        os.makedirs(os.path.join(work, "sub"))
        with open(os.path.join(work, "sub", "g"), "w") as f:
            f.write("in sub\n")
        git("add", "sub", cwd=work)
        for text, tag in (("one", "v1"), ("two", "v2")):
            with open(os.path.join(work, "f"), "w") as f:
                f.write(text + "\n")
            git("add", "f", cwd=work)
            git(*GIT_ID, "commit", "-qm", text, cwd=work)
            git("tag", tag, cwd=work)
        git("checkout", "-qb", "dev", cwd=work)
        with open(os.path.join(work, "f"), "w") as f:
            f.write("dev\n")
        git(*GIT_ID, "commit", "-qam", "dev", cwd=work)
        git("checkout", "-q", "main", cwd=work)
        cls.bare = os.path.join(cls.root, "repo.git")
        git("clone", "-q", "--bare", work, cls.bare)
        subprocess.run(["chmod", "-R", "a+rX", cls.root], check=True)
        cls.port = free_port()
        cls.git_daemon = subprocess.Popen(
            ["git", "daemon", "--export-all", "--reuseaddr", "--informative-errors",
             "--base-path=" + cls.root, "--listen=127.0.0.1", "--port=%d" % cls.port, cls.root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or cls.git_daemon.poll() is not None:
                    raise RuntimeError("git daemon did not come up")
                time.sleep(0.05)
        cls.url = "git://127.0.0.1:%d/repo.git" % cls.port

    @classmethod
    def tearDownClass(cls):
        cls.git_daemon.terminate()
        cls.git_daemon.wait()
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.clones = []

    def tearDown(self):
        for d in self.clones:
            shutil.rmtree(d, ignore_errors=True)
        super().tearDown()

    def rev(self, ref):
        return git("--git-dir", self.bare, "rev-parse", ref + "^{commit}")

    def run_ok(self, *args, user=None, env=None):
        run = self.d.cli("run", *args, user=user, env=env).stdout.strip()
        r = self.d.wait_state(run, ["succeeded", "failed"])
        self.assertEqual(r["state"], "succeeded", json.dumps(r)[:3000] + self.d.logs(run))
        if "workspace" in r and not r["workspace"].get("in_place"):
            self.clones.append(r["workspace"]["dir"])
        return run, r

    def test_branch_and_commit_are_cloned_and_recorded(self):
        run, r = self.run_ok("--workspace", self.url + "#dev", "--", "sh", "-c", "cat f; pwd")
        ws = r["workspace"]
        self.assertEqual(ws["source"], self.url)
        self.assertEqual(ws["ref"], "dev")
        self.assertEqual(ws["commit"], self.rev("dev"))
        home = pwd.getpwuid(os.getuid()).pw_dir
        self.assertEqual(ws["dir"], os.path.join(home, ".lathe", "workspaces", r["id"]))
        log = self.d.logs(run)
        self.assertIn("dev\n" + ws["dir"] + "\n", log)  # the command ran in the clone
        self.assertIn("cloning " + self.url, log)  # the clone's progress is in the log
        self.assertEqual(git("-C", ws["dir"], "rev-list", "--count", "HEAD"), "1")  # depth 1
        text = self.d.cli("inspect", run).stdout
        self.assertIn(self.rev("dev"), text)
        self.assertIn("workspace:", text)
        # A commit id: that commit, not a branch's head.
        sha = self.rev("v1")
        run, r = self.run_ok("--workspace", self.url + "#" + sha, "--workdir", "sub", "--",
                             "sh", "-c", "cat g ../f; pwd")
        self.assertEqual(r["workspace"]["commit"], sha)
        self.assertEqual(r["spec"]["workdir"], "sub")  # inside the clone
        self.assertIn("in sub\none\n" + r["workspace"]["dir"] + "/sub\n", self.d.logs(run))
        # lathe rm takes the clone with the run.
        clone = r["workspace"]["dir"]
        self.assertTrue(os.path.isdir(clone))
        self.d.cli("rm", run)
        self.assertFalse(os.path.exists(clone))

    def test_missing_ref_and_unreachable_host_fail_clearly(self):
        run = self.d.submit("--retry", "2", "--workspace", self.url + "#no-such-branch", "--", "true")
        r = self.d.wait_state(run, ["failed", "succeeded"])
        self.clones.append(r.get("workspace", {}).get("dir", "/nonexistent"))
        self.assertEqual(r["state"], "failed")
        self.assertIn("no branch, tag or commit 'no-such-branch'", r["reason"])
        self.assertIn("git said: ", r["reason"])
        self.assertIn("no-such-branch", r["reason"].split("git said: ")[1])
        self.assertEqual(r["attempt"], 1)  # a clone failure is not retried
        self.assertEqual(r["workspace"]["error"], "unknown_ref")
        self.assertIn("no-such-branch", self.d.logs(run))  # git's own message, in the log
        url = "git://127.0.0.1:%d/repo.git" % free_port()
        run = self.d.submit("--workspace", url, "--", "true")
        r = self.d.wait_state(run, ["failed", "succeeded"])
        self.assertEqual(r["state"], "failed")
        self.assertIn("the host cannot be reached", r["reason"])
        # In the reader's language too.
        zh = self.d.cli("inspect", run, env=self.d.env(LANG="zh_CN.UTF-8")).stdout
        self.assertIn("无法连接到主机", zh)

    def test_file_url_and_local_repository(self):
        run, r = self.run_ok("--workspace", "file://" + self.bare + "#v2", "--", "cat", "f")
        self.assertEqual(r["workspace"]["commit"], self.rev("v2"))
        self.assertIn("two", self.d.logs(run))
        # A bare repository's path: cloned (its default branch), not used in place.
        run, r = self.run_ok("--workspace", self.bare, "--", "cat", "f")
        self.assertEqual(r["spec"]["workspace"], {"git": self.bare})
        self.assertEqual(r["workspace"]["commit"], self.rev("main"))
        self.assertIn("two", self.d.logs(run))

    def test_directory_is_used_in_place(self):
        d = tempfile.mkdtemp(prefix="lathe-it-inplace-")
        self.addCleanup(shutil.rmtree, d, True)
        git("clone", "-q", self.bare, d)
        os.makedirs(os.path.join(d, "sub"), exist_ok=True)
        run, r = self.run_ok("--workspace", d, "--workdir", "sub", "--", "sh", "-c",
                             "pwd; echo made > made.txt")
        self.assertEqual(r["spec"]["workspace"], {"dir": d})
        self.assertEqual(r["spec"]["workdir"], os.path.join(d, "sub"))
        self.assertIn(os.path.join(d, "sub") + "\n", self.d.logs(run))
        self.assertTrue(os.path.exists(os.path.join(d, "sub", "made.txt")))  # in place
        self.assertTrue(r["workspace"]["in_place"])
        self.assertEqual(r["workspace"]["commit"], self.rev("main"))
        self.d.cli("rm", run)
        self.assertTrue(os.path.exists(os.path.join(d, "sub", "made.txt")))  # never removed

    def test_bad_workspace_is_refused_naming_the_field(self):
        r = self.d.cli("run", "--workspace", "ftp://host/repo", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("workspace", r.stderr)
        r = self.d.cli("run", "--workspace", "/nonexistent/lathe-ws", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("/nonexistent/lathe-ws", r.stderr)
        spec = os.path.join(self.d.home, "bad.yaml")
        with open(spec, "w") as f:
            f.write("command: [true]\nworkspace: {git: %s, ref: '-x'}\n" % self.url)
        r = self.d.cli("run", "-f", spec, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("workspace.ref", r.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "a read-only mount needs a root daemon")
    def test_readonly_workspace(self):
        spec = os.path.join(self.d.home, "ro.yaml")
        with open(spec, "w") as f:
            f.write("command: [sh, -c, 'cat f; touch new || echo refused']\n"
                    "workspace: {git: '%s', ref: dev, readonly: true}\n" % self.url)
        run, r = self.run_ok("-f", spec)
        log = self.d.logs(run)
        self.assertIn("dev\n", log)
        self.assertIn("Read-only file system", log)
        self.assertIn("refused", log)
        self.assertTrue(r["workspace"]["readonly"])
        self.assertEqual(r["workspace"]["commit"], self.rev("dev"))
        self.assertFalse(os.path.exists(os.path.join(r["workspace"]["dir"], "new")))

    def test_second_user_clones_into_their_home_as_themselves(self):
        pw = second_user(self, USER)
        if not os.path.isdir(pw.pw_dir):
            os.makedirs(pw.pw_dir)
            self.addCleanup(shutil.rmtree, pw.pw_dir, True)
        os.chown(pw.pw_dir, pw.pw_uid, pw.pw_gid)
        env = self.d.env(HOME=pw.pw_dir)
        run, r = self.run_ok("--workspace", self.url + "#v1", "--", "sh", "-c", "id -u; cat f",
                             user=USER, env=env)
        ws = r["workspace"]
        self.assertEqual(ws["dir"], os.path.join(pw.pw_dir, ".lathe", "workspaces", r["id"]))
        self.assertEqual(ws["commit"], self.rev("v1"))
        for p in (ws["dir"], os.path.join(ws["dir"], "f"), os.path.join(ws["dir"], ".git")):
            self.assertEqual(os.stat(p).st_uid, pw.pw_uid, p)
        self.assertIn(str(pw.pw_uid) + "\none\n", self.d.cli("logs", run, user=USER, env=env).stdout)
        self.d.cli("rm", run, user=USER, env=env)
        self.assertFalse(os.path.exists(ws["dir"]))


if __name__ == "__main__":
    unittest.main()

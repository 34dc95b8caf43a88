"""Per-user secrets: `lathe secret set|ls|rm`, `lathe run --secret NAME` and
`lathe run --secret-file NAME`.

The value reaches the run's environment (or a 0600 file of the run's user's)
and nothing else: not the spec, an API answer, an event, the run list, the
daemon's log, the database file or launch.json; `lathe logs` shows it as ***.
A second user neither lists nor uses it, nor reads the file.
"""
import glob
import hashlib
import json
import os
import pwd
import stat
import subprocess
import tempfile
import time
import unittest

from harness import LATHE, DaemonTest, second_user

USER = "lathe-it-user"
OTHER = "lathe-it-other"
VALUE = "hf_Zq8uVw3ExampleSecretValue77"


class Secrets(DaemonTest):
    gpus = "sim:1x24GB"

    def set_secret(self, name, value, user=None, env=None, check=True):
        cmd = [LATHE, "secret", "set", name]
        if user is not None:
            cmd = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", *cmd]
        r = subprocess.run(cmd, input=value + "\n", capture_output=True, text=True,
                           env=env or self.d.env())
        if check:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def everything_shown(self, run, attempt_files=()):
        """Every API answer about the run and the daemon's files, as text."""
        attempt_files = list(attempt_files)
        texts = {
            "inspect": self.d.cli("inspect", "--json", run).stdout,
            "inspect-text": self.d.cli("inspect", run).stdout,
            "ps": self.d.cli("ps", "--json", "--all").stdout,
            "ps-text": self.d.cli("ps", "--all").stdout,
            "logs": self.d.cli("logs", run).stdout,
            "logs-follow": self.d.cli("logs", "-f", run).stdout,
            "secret-ls": self.d.cli("secret", "ls", "--json").stdout,
            "status": self.d.cli("status", "--json").stdout,
            "daemon-log": self.d.daemon_log(),
        }
        for path in glob.glob(os.path.join(self.d.home, "lathe.db*")) + [
                os.path.join(self.d.home, "daemon.test.log")] + attempt_files:
            with open(path, "rb") as f:
                texts[path] = f.read().decode("latin-1")
        return texts

    def test_value_reaches_the_run_and_nothing_else(self):
        r = self.set_secret("HF_TOKEN", VALUE)
        self.assertIn("HF_TOKEN", r.stdout)
        key = os.path.join(self.d.home, "secret.key")
        st = os.stat(key)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        out = tempfile.mkdtemp(prefix="lathe-secret-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", out]))
        file = os.path.join(out, "file")
        run = self.d.submit("--secret", "HF_TOKEN", "--", "sh", "-c",
                            f'echo "$HF_TOKEN" > {file}; echo token=$HF_TOKEN')
        self.d.wait_state(run, "succeeded")
        with open(file) as f:
            self.assertEqual(f.read().strip(), VALUE)
        self.assertEqual(self.d.logs(run).strip(), "token=***")
        spec = self.d.inspect(run)["spec"]
        self.assertEqual(spec["secrets"], ["HF_TOKEN"])
        self.assertNotIn("HF_TOKEN", spec["env"])
        for where, text in self.everything_shown(run).items():
            self.assertNotIn(VALUE, text, where)
        ls = json.loads(self.d.cli("secret", "ls", "--json").stdout)
        self.assertEqual([s["name"] for s in ls], ["HF_TOKEN"])
        self.assertEqual(set(ls[0]), {"name", "created_at_ms", "updated_at_ms"})

    def test_a_missing_secret_is_refused_at_submit_and_fails_a_later_start(self):
        r = self.d.cli("run", "--secret", "NOPE", "--", "true", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("NOPE", r.stderr)
        self.assertIn("lathe secret set NOPE", r.stderr)
        # Set at submit, removed before the start: that start fails, naming it.
        self.set_secret("WANDB_KEY", VALUE)
        blocker = self.d.submit("--gpus", "1", "--", "sleep", "60")
        self.d.wait_state(blocker, "running")
        waiting = self.d.submit("--gpus", "1", "--secret", "WANDB_KEY", "--", "true")
        self.assertEqual(self.d.inspect(waiting)["state"], "queued")
        self.d.cli("secret", "rm", "WANDB_KEY")
        self.d.cli("stop", blocker)
        failed = self.d.wait_state(waiting, "failed")
        self.assertIn("WANDB_KEY", failed["reason"])
        self.assertIn("removed", failed["reason"])
        r = self.d.cli("secret", "rm", "WANDB_KEY", check=False)
        self.assertEqual(r.returncode, 3)

    def test_bad_names_and_values_name_the_field(self):
        r = self.set_secret("1BAD", VALUE, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("name", r.stderr)
        r = subprocess.run([LATHE, "secret", "set", "EMPTY"], input="", capture_output=True,
                           text=True, env=self.d.env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(self.d.cli("secret", "ls").stdout.strip(), "no secrets")

    def test_from_file_and_replace(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("first-value\n")
        self.addCleanup(os.unlink, f.name)
        self.assertIn("set", self.d.cli("secret", "set", "A_KEY", "--from-file", f.name).stdout)
        self.assertIn("replaced", self.set_secret("A_KEY", "second-value").stdout)
        run = self.d.submit("--secret", "A_KEY", "--", "sh", "-c", 'test "$A_KEY" = second-value')
        self.d.wait_state(run, "succeeded")

    def test_another_user_neither_lists_nor_uses_them(self):
        second_user(self, USER)
        self.set_secret("HF_TOKEN", VALUE)
        env = self.d.env(HOME="/tmp")
        ls = self.d.cli("secret", "ls", "--json", user=USER, env=env)
        self.assertEqual(json.loads(ls.stdout), [])
        r = self.d.cli("run", "--workdir", "/tmp", "--secret", "HF_TOKEN", "--", "true",
                       user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertNotIn(VALUE, r.stdout + r.stderr)
        r = self.d.cli("secret", "rm", "HF_TOKEN", user=USER, env=env, check=False)
        self.assertEqual(r.returncode, 3)
        # Their own secret of the same name is theirs alone.
        self.set_secret("HF_TOKEN", "theirs-value", user=USER, env=env)
        run = self.d.cli("run", "--workdir", "/tmp", "--secret", "HF_TOKEN", "--", "sh", "-c",
                         'test "$HF_TOKEN" = theirs-value', user=USER, env=env).stdout.strip()
        self.d.wait_state(run, "succeeded")
        self.assertEqual(json.loads(self.d.cli("secret", "ls", "--json").stdout)[0]["name"],
                         "HF_TOKEN")
        run = self.d.submit("--secret", "HF_TOKEN", "--", "sh", "-c", f'test "$HF_TOKEN" = {VALUE}')
        self.d.wait_state(run, "succeeded")

    def wait_file(self, path, run):
        deadline = time.time() + 60
        while not os.path.exists(path):
            if time.time() > deadline:
                self.fail(f"{path} never appeared; run: {self.d.inspect(run)}")
            time.sleep(0.05)

    def workdir_of(self, user):
        out = tempfile.mkdtemp(prefix="lathe-secret-file-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", out]))
        pw = pwd.getpwnam(user)
        os.chown(out, pw.pw_uid, pw.pw_gid)
        os.chmod(out, 0o755)
        return out

    # The run records where the file is, its hash and its environment, then
    # waits for `go` and prints the value (which the log masks).
    SCRIPT = ('d="$LATHE_SECRETS_DIR"; echo "$d" > dir; '
              'echo "hash=$(sha256sum < "$d/HF_TOKEN" | cut -d" " -f1)"; '
              'env > env.txt; touch ready; '
              'while [ ! -e go ]; do sleep 0.05; done; echo "token=$(cat "$d/HF_TOKEN")"')

    def test_value_as_a_file_of_the_runs_user_only(self):
        owner = second_user(self, USER)
        second_user(self, OTHER)
        env = self.d.env(HOME="/tmp")
        self.set_secret("HF_TOKEN", VALUE, user=USER, env=env)
        out = self.workdir_of(USER)
        run = self.d.cli("run", "--workdir", out, "--secret-file", "HF_TOKEN", "--", "sh", "-c",
                         self.SCRIPT, user=USER, env=env).stdout.strip()
        self.wait_file(os.path.join(out, "ready"), run)
        with open(os.path.join(out, "dir")) as f:
            secrets_dir = f.read().strip()
        path = os.path.join(secrets_dir, "HF_TOKEN")
        st_dir, st_file = os.lstat(secrets_dir), os.lstat(path)
        self.assertTrue(stat.S_ISDIR(st_dir.st_mode))
        self.assertEqual((st_dir.st_uid, st_dir.st_mode & 0o7777), (owner.pw_uid, 0o700))
        self.assertTrue(stat.S_ISREG(st_file.st_mode))
        self.assertEqual((st_file.st_uid, st_file.st_mode & 0o7777), (owner.pw_uid, 0o600))
        self.assertTrue(secrets_dir.startswith(os.path.join(self.d.home, "runs") + "/"))
        with open(os.path.join(out, "env.txt")) as f:
            environment = f.read()
        self.assertIn(f"LATHE_SECRETS_DIR={secrets_dir}\n", environment)
        self.assertNotIn(VALUE, environment)
        self.assertNotIn("HF_TOKEN=", environment)
        # Another user reads neither the file nor the directory, while the run runs.
        for cmd in (["cat", path], ["ls", secrets_dir], ["ls", os.path.dirname(secrets_dir)]):
            r = subprocess.run(["setpriv", "--reuid", OTHER, "--regid", OTHER, "--init-groups",
                                *cmd], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, (cmd, r.stdout))
            self.assertNotIn(VALUE, r.stdout + r.stderr)
        shown = {"inspect-running": self.d.cli("inspect", "--json", run).stdout}
        for launch in glob.glob(os.path.join(self.d.home, "runs", "*", "attempt-*", "*.json")):
            with open(launch) as f:
                shown["running-" + launch] = f.read()
        self.assertTrue(any("launch.json" in k for k in shown), shown.keys())
        open(os.path.join(out, "go"), "w").close()
        r = self.d.wait_state(run, "succeeded")
        digest = hashlib.sha256(VALUE.encode()).hexdigest()
        self.assertEqual(self.d.logs(run), f"hash={digest}\ntoken=***\n")
        self.assertEqual(r["spec"]["secret_files"], ["HF_TOKEN"])
        self.assertNotIn("secrets", r["spec"])
        self.assertFalse(os.path.exists(secrets_dir))
        attempt_files = glob.glob(os.path.join(self.d.home, "runs", "*", "attempt-*", "*.json"))
        shown.update({"after-" + k: v
                      for k, v in self.everything_shown(run, attempt_files).items()})
        for where, text in shown.items():
            self.assertNotIn(VALUE, text, where)

    def test_a_restarted_daemon_removes_the_file_of_a_run_that_ended_meanwhile(self):
        self.set_secret("HF_TOKEN", VALUE)
        out = self.workdir_of("root")
        run = self.d.submit("--workdir", out, "--secret-file", "HF_TOKEN", "--", "sh", "-c",
                            self.SCRIPT)
        self.wait_file(os.path.join(out, "ready"), run)
        with open(os.path.join(out, "dir")) as f:
            secrets_dir = f.read().strip()
        self.assertTrue(os.path.exists(os.path.join(secrets_dir, "HF_TOKEN")))
        self.d.kill9()
        open(os.path.join(out, "go"), "w").close()
        deadline = time.time() + 60
        while not glob.glob(os.path.join(self.d.home, "runs", "*", "attempt-1", "exit.json")):
            self.assertLess(time.time(), deadline, "the run never ended")
            time.sleep(0.05)
        self.assertTrue(os.path.exists(secrets_dir))  # nobody removed it while the daemon was down
        self.d.start()
        self.d.wait_state(run, "succeeded")
        self.assertFalse(os.path.exists(secrets_dir))

    def test_secret_files_are_checked_like_secrets(self):
        r = self.d.cli("run", "--secret-file", "NOPE", "--", "true", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("lathe secret set NOPE", r.stderr)
        self.set_secret("HF_TOKEN", VALUE)
        r = self.d.cli("run", "--secret", "HF_TOKEN", "--secret-file", "HF_TOKEN", "--", "true",
                       check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("secret_files", r.stderr)
        r = self.d.cli("run", "--secret-file", "1BAD", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("secret_files[0]", r.stderr)


if __name__ == "__main__":
    unittest.main()

"""Per-user secrets: `lathe secret set|ls|rm` and `lathe run --secret NAME`.

The value reaches the run's environment and nothing else: not the spec, an
API answer, an event, the run list, the daemon's log or the database file;
`lathe logs` shows it as ***. A second user neither lists nor uses it.
"""
import glob
import json
import os
import subprocess
import tempfile
import unittest

from harness import LATHE, DaemonTest, second_user

USER = "lathe-it-user"
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

    def everything_shown(self, run):
        """Every API answer about the run and the daemon's files, as text."""
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
                os.path.join(self.d.home, "daemon.test.log")]:
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


if __name__ == "__main__":
    unittest.main()

"""Commands that accept --json print JSON, with the documented fields: `run` (and its
followed log as JSON lines), `stop`, `logs` (JSON lines, with `time` under -t), `top`, `rm RUN`
(a line per run), `up`, `down`, `notebook start` without --wait, `notebook stop`. A notebook's --wait says why it waits while it is
queued (here: the notebooks quota) and gives up after --timeout, saying so.

A command that fails under --json prints the API's error object (docs/api.md "Errors") on stdout, keeps
its exit code and its line on stderr: a run, deployment, model or project that does not exist, a share
of one; `rm` of several runs answers for each; a notebook whose --wait times out still gives its id.
"""
import json
import os
import shutil
import unittest

from harness import Daemon, second_user, shared_scratch
import test_notebook

USER = "lathe-it-json"


class CliJson(unittest.TestCase):
    def setUp(self):
        second_user(self, USER)
        self.base = shared_scratch(self, "lathe-it-json-")
        self.d = Daemon(gpus="sim:2x24GB")
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("quotas:\n  default: {notebooks: 1}\nnotebooks: {poll: 200ms}\n")
        self.d.start()
        self.addCleanup(self.d.cleanup)
        self.work = os.path.join(self.base, "work")
        os.makedirs(self.work)
        os.chmod(self.work, 0o777)

    def cli(self, *args, check=True):
        r = test_notebook.subprocess_cli(self.d, list(args), USER, self.d.env(HOME=self.work),
                                         self.work)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_run_stop_and_logs_print_json(self):
        r = json.loads(self.cli("run", "--json", "--", "sh", "-c", "echo one; echo two").stdout)
        self.assertEqual(sorted(r), ["id", "name", "state"])
        self.d.wait_state(r["id"], "succeeded")
        lines = [json.loads(x) for x in self.cli("logs", "--json", r["id"]).stdout.splitlines()]
        self.assertEqual([x["line"] for x in lines], ["one", "two"])
        timed = [json.loads(x) for x in
                 self.cli("logs", "--json", "-t", r["id"]).stdout.splitlines()]
        self.assertEqual([x["line"] for x in timed], ["one", "two"])
        self.assertTrue(all(x["time"][:2] == "20" for x in timed), timed)
        followed = self.cli("run", "--json", "--follow", "--", "echo", "three").stdout
        self.assertIn({"line": "three"}, [json.loads(x) for x in followed.splitlines()])
        sleeper = json.loads(self.cli("run", "--json", "--", "sleep", "300").stdout)["id"]
        self.d.wait_state(sleeper, "running")
        stopped = json.loads(self.cli("stop", "--json", sleeper).stdout)
        self.assertEqual(stopped["id"], sleeper)
        self.assertIn(stopped["state"], ["stopping", "stopped"])
        top = json.loads(self.cli("top", "--json").stdout)
        self.assertEqual(sorted(top), ["at_ms", "gpus", "runs"])
        self.assertEqual(len(top["gpus"]["gpus"]), 2)
        gone = [json.loads(x) for x in self.cli("rm", "--json", r["id"]).stdout.splitlines()]
        self.assertEqual([g["id"] for g in gone], [r["id"]])
        up = json.loads(self.d.cli("up", "--json").stdout)
        self.assertEqual(up["started"], False)
        self.assertTrue(up["url"].startswith("http://127.0.0.1:"), up)
        down = json.loads(self.d.cli("down", "--json").stdout)
        self.assertEqual(down, {"stopped": True, "front_stopped": False})

    @unittest.skipUnless(shutil.which("jupyter-notebook"), "needs jupyter-notebook")
    def test_notebook_json_and_a_wait_that_says_why_and_gives_up(self):
        first = json.loads(self.cli("notebook", "start", "--json").stdout)
        self.assertEqual(sorted(first), ["id", "name", "state"])
        # The second waits on the notebooks quota: said while waiting, given up after --timeout.
        r = self.cli("notebook", "start", "--wait", "--timeout", "3s", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is queued:", r.stderr)
        self.assertIn("notebook", r.stderr.split("is queued:", 1)[1].lower())
        self.assertIn("is not ready after 3s", r.stderr)
        r = self.cli("notebook", "start", "--wait", "--timeout", "soon", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--timeout", r.stderr)
        stopped = json.loads(self.cli("notebook", "stop", "--json", first["id"]).stdout)
        self.assertEqual(stopped["id"], first["id"])

    def assertErrorObject(self, r, code, rc):
        """`r` failed with exit code `rc`, its stdout the API's one error object."""
        self.assertEqual(r.returncode, rc, r.stdout + r.stderr)
        e = json.loads(r.stdout)
        self.assertEqual(e["code"], code, e)
        for key in ("error", "en", "zh"):
            self.assertIsInstance(e[key], str, e)
        self.assertTrue(r.stderr.splitlines()[-1].startswith("lathe: "), r.stderr)
        return e

    def test_a_failure_under_json_prints_the_error_object(self):
        for args in (["stop", "nosuch"], ["rm", "nosuch"], ["inspect", "nosuch"],
                     ["logs", "nosuch"], ["deploy", "show", "nosuch"], ["model", "show", "nosuch"],
                     ["project", "show", "nosuch"], ["share", "run:nosuch", "--user", "x"]):
            r = self.cli(*args, "--json", check=False)
            e = self.assertErrorObject(r, "not_found", 3)
            self.assertIn("msg_id", e, args)
            self.assertIn("nosuch", e["en"], args)
            self.assertIn("nosuch", e["zh"], args)
        # Several runs: a line for each, what went and what could not.
        done = json.loads(self.cli("run", "--json", "--", "true").stdout)["id"]
        self.d.wait_state(done, "succeeded")
        r = self.cli("rm", done, "nosuch", "--json", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertEqual(lines[0]["id"], done)
        self.assertEqual((lines[1]["run"], lines[1]["code"]), ("nosuch", "not_found"))
        self.assertEqual(len(lines), 2, lines)
        # A usage error the command finds: the same object, exit 2.
        r = self.cli("notebook", "start", "--timeout", "2s", "--json", check=False)
        e = self.assertErrorObject(r, "invalid_argument", 2)
        self.assertEqual(e["msg_id"], "notebook.timeout_needs_wait")
        for text in (e["en"], e["zh"]):
            self.assertIn("--timeout", text)
            self.assertIn("--wait", text)
        self.assertEqual(self.cli("notebook", "restart", "x", "--timeout", "2s",
                                  check=False).returncode, 2)
        # An error of the command line itself: the same object, in both languages.
        r = self.cli("ps", "--json", "--colour", check=False)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        e = json.loads(r.stdout)
        self.assertEqual((e["code"], e["msg_id"]), ("invalid_argument", "cli.usage"))
        self.assertIn("lathe ps --help", r.stderr)
        self.assertIn("`lathe ps` has no flag --colour", e["en"])
        self.assertIn("`lathe ps` 没有 --colour 这个选项", e["zh"])

    def test_up_json_names_the_running_daemons_pid_and_model_rm_its_ref(self):
        up = json.loads(self.d.cli("up", "--json").stdout)
        self.assertEqual((up["started"], up["pid"]), (False, self.d.proc.pid))
        d = os.path.join(self.base, "digits")
        os.makedirs(d)
        with open(os.path.join(d, "handler.py"), "w") as f:
            f.write("def predict(x):\n    return x\n")
        made = json.loads(self.d.cli("model", "create", "digits", "--from-dir", d, "--handler",
                                     "handler.py", "--json").stdout)
        gone = json.loads(self.d.cli("model", "rm", "digits/1", "--json").stdout)
        self.assertEqual(gone["ref"], made["ref"])
        self.assertTrue(gone["ref"].endswith("/digits/1"), gone)

    @unittest.skipUnless(shutil.which("jupyter-notebook"), "needs jupyter-notebook")
    def test_a_notebook_wait_that_times_out_gives_its_id_and_the_error(self):
        busy = json.loads(self.cli("run", "--gpus", "2", "--json", "--", "sleep", "300").stdout)
        self.d.wait_state(busy["id"], "running")
        r = self.cli("notebook", "start", "--gpus", "1", "--wait", "--timeout", "2s", "--json",
                     check=False)
        e = self.assertErrorObject(r, "deadline_exceeded", 1)
        self.assertEqual(e["msg_id"], "notebook.wait_timeout")
        self.assertEqual(self.d.inspect(e["id"])["state"], "queued")
        self.assertIn("not ready after 2s", e["en"])
        self.assertIn("在 2s 后仍未就绪", e["zh"])
        r = self.cli("--lang", "zh", "notebook", "start", "--gpus", "1", "--wait", "--timeout", "1",
                     check=False)
        self.assertIn("在 1s 后仍未就绪", r.stderr)
        for run in (busy["id"], e["id"]):
            self.cli("stop", run, check=False)


if __name__ == "__main__":
    unittest.main()

"""Commands that accept --json print JSON, with the documented fields: `run` (and its
followed log as JSON lines), `stop`, `logs` (JSON lines, with `time` under -t), `top`, `rm RUN`
(a line per run), `up`, `down`, `notebook start` without --wait, `notebook stop`. A notebook's --wait says why it waits while it is
queued (here: the notebooks quota) and gives up after --timeout, saying so.
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


if __name__ == "__main__":
    unittest.main()

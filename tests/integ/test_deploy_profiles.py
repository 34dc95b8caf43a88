"""Resource profiles beyond `lathe run`: a deployment's `profile:` (in deploy.yaml, or
`lathe deploy create --profile`) gives each replica the profile's gpus, gpu_type, cpus and
memory, flags and fields given win, and the replicas land on GPUs of the profile's type; an
unknown profile, or one whose fields a replica cannot take (nodes: 4), is refused naming it.
A profile's `nodes` shows in `lathe profiles` and is refused for a run on this machine, as
`--nodes` is; a notebook's unknown profile is refused as a run's.
"""
import json
import os
import unittest

from harness import PY, Daemon

ZH = "zh_CN.UTF-8"

CONFIG = """\
profiles:
  small: {gpus: 1, gpu_type: A100, memory: 1GB, cpus: 1}
  wide: {gpus: 1, nodes: 4}
"""

# A replica that is ready as soon as it listens.
APP = r"""
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""

PORT = 18461


class DeployProfiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(gpus="sim:2x80GB:A100,2x24GB:L4")
        try:
            with open(os.path.join(cls.d.home, "config.yaml"), "w") as f:
                f.write(CONFIG)
            cls.d.start()
            gpus = json.loads(cls.d.cli("gpus", "--json").stdout)["gpus"]
            cls.a100 = {g["index"] for g in gpus if "A100" in g["name"]}
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()

    def show(self, name):
        return json.loads(self.d.cli("deploy", "show", name, "--json").stdout)

    def deploy_file(self, name, **fields):
        path = os.path.join(self.d.home, f"{name}.yaml")
        with open(path, "w") as f:
            json.dump({"name": name, "command": [PY, "-c", APP], "port": PORT, **fields}, f)
        return path

    def refused(self, *args, lang="C.UTF-8"):
        r = self.d.cli(*args, check=False, env=self.d.env(LANG=lang))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        return r.stderr

    def test_a_deployment_takes_its_profiles_resources(self):
        path = self.deploy_file("small-web", profile="small")
        self.d.cli("deploy", "create", "-f", path, "--wait")
        s = self.show("small-web")
        self.assertEqual(s["spec"]["profile"], "small")
        self.assertEqual(s["spec"]["gpus"], 1)
        self.assertEqual(s["spec"]["gpu_type"], "A100")
        self.assertEqual(s["spec"]["memory"], 1000000000)
        self.assertEqual(s["spec"]["cpus"], 1)
        replica = self.d.inspect(s["replicas"]["list"][0]["run"])
        self.assertEqual(replica["spec"]["gpus"], 1)
        self.assertEqual(replica["spec"]["memory"], 1000000000)
        self.assertEqual(replica["spec"]["profile"], "small")
        self.assertTrue(set(replica["gpus"]) <= self.a100, replica["gpus"])
        self.assertEqual(len(replica["gpus"]), 1)
        self.d.cli("deploy", "rm", "small-web")

    def test_flags_given_win_over_the_profile(self):
        self.d.cli("deploy", "create", "flag-web", "--profile", "small", "--memory", "2GB",
                   "--gpus", "0", "--port", str(PORT + 1), "--", PY, "-c", APP)
        s = self.show("flag-web")
        self.assertEqual(s["spec"]["profile"], "small")
        self.assertEqual(s["spec"]["memory"], 2000000000)
        self.assertEqual(s["spec"]["gpus"], 0)
        self.assertEqual(s["spec"]["cpus"], 1)  # from the profile
        self.d.cli("deploy", "rm", "flag-web")

    def test_an_unknown_profile_is_refused_naming_the_allowed_ones(self):
        err = self.refused("deploy", "create", "-f", self.deploy_file("nope-web", profile="nope"))
        self.assertIn("field 'profile': no profile 'nope'", err)
        self.assertIn("small, wide", err)
        err = self.refused("deploy", "create", "nope-web", "--profile", "nope", "--port",
                           str(PORT), "--", PY, "-c", APP, lang=ZH)
        self.assertIn("字段 “profile”：本守护进程没有名为 “nope” 的资源配置", err)
        # A notebook's, as a run's.
        err = self.refused("notebook", "start", "--profile", "nope")
        self.assertIn("field 'profile': no profile 'nope'", err)
        names = [d["name"] for d in json.loads(self.d.cli("deploy", "ls", "--json").stdout)]
        self.assertNotIn("nope-web", names)

    def test_a_profile_a_replica_cannot_take_is_refused(self):
        err = self.refused("deploy", "create", "-f", self.deploy_file("wide-web", profile="wide"))
        self.assertIn("profile 'wide' sets nodes: 4", err)
        self.assertIn("deployment", err)

    def test_a_profiles_nodes_are_listed_and_refused_on_this_machine(self):
        p = {x["name"]: x for x in json.loads(self.d.cli("profiles", "--json").stdout)}
        self.assertEqual(p["wide"]["fields"], {"gpus": 1, "nodes": 4})
        self.assertEqual(p["wide"]["fits"], "never")
        self.assertEqual(p["wide"]["reason"]["msg_id"], "profile.nodes_not_supported")
        table = self.d.cli("profiles").stdout
        self.assertIn("NODES", table)
        self.assertIn("profile 'wide' sets nodes: 4", table)
        err = self.refused("run", "--profile", "wide", "--", "true")
        self.assertIn("profile 'wide' sets nodes: 4", err)
        self.assertIn("local runs an attempt on one node", err)
        zh = self.refused("run", "--profile", "wide", "--", "true", lang=ZH)
        self.assertIn("资源配置 “wide” 设置了 nodes: 4", zh)
        # The run's own --nodes 1 wins over the profile's.
        run = self.d.submit("--profile", "wide", "--nodes", "1", "--", "true")
        r = self.d.wait_state(run, "succeeded")
        self.assertEqual(r["spec"].get("nodes", 1), 1)
        self.assertEqual(r["spec"]["profile"], "wide")


if __name__ == "__main__":
    unittest.main()

"""Resource profiles (config.yaml `profiles:`): `lathe run --profile` places a run on the
GPUs of the profile's type, flags override the profile's fields, an unknown profile and one
this machine can never satisfy are refused naming the field (English and Chinese), and
`lathe profiles --json` lists each with whether it fits now, for every user alike.
"""
import json
import os
import unittest

from harness import Daemon, second_user

OTHER = "lathe-profiles-b"
ZH = "zh_CN.UTF-8"

CONFIG = """\
profiles:
  a100x1: {gpus: 1, gpu_type: A100}
  a100x2: {gpus: 2, gpu_type: a100, memory: 1GB, cpus: 1}
  l4x1: {gpus: 1, gpu_type: L4}
  h100: {gpus: 1, gpu_type: H100}
  huge: {gpus: 8}
"""


class Profiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(gpus="sim:2x80GB:A100,2x24GB:L4")
        try:
            with open(os.path.join(cls.d.home, "config.yaml"), "w") as f:
                f.write(CONFIG)
            cls.d.start()
            gpus = json.loads(cls.d.cli("gpus", "--json").stdout)["gpus"]
            cls.a100 = {g["index"] for g in gpus if "A100" in g["name"]}
            cls.l4 = {g["index"] for g in gpus if "L4" in g["name"]}
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()

    def tearDown(self):
        for r in self.d.runs():
            self.d.cli("stop", r["id"], check=False)
        self.d.wait_for(lambda: not any(r["state"] in ("starting", "running", "stopping")
                                        for r in self.d.runs()), "runs to stop")

    def refused(self, *args, lang="C.UTF-8"):
        r = self.d.cli("run", *args, "--", "true", check=False,
                       env=self.d.env(LANG=lang))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        return r.stderr

    def profiles(self, user=None):
        env = self.d.env(HOME="/tmp") if user else None
        return {p["name"]: p for p in json.loads(
            self.d.cli("profiles", "--json", user=user, env=env).stdout)}

    def test_the_simulated_gpus_have_both_types(self):
        self.assertEqual(len(self.a100), 2)
        self.assertEqual(len(self.l4), 2)

    def test_a_profile_places_runs_on_gpus_of_its_type(self):
        a = self.d.submit("--profile", "a100x1", "--", "sleep", "60")
        l4 = self.d.submit("--profile", "l4x1", "--", "sleep", "60")
        ra = self.d.wait_state(a, "running")
        rl = self.d.wait_state(l4, "running")
        self.assertEqual(len(ra["gpus"]), 1)
        self.assertTrue(set(ra["gpus"]) <= self.a100, ra["gpus"])
        self.assertTrue(set(rl["gpus"]) <= self.l4, rl["gpus"])
        self.assertEqual(ra["spec"]["profile"], "a100x1")
        self.assertEqual(ra["spec"]["gpu_type"], "A100")
        # One A100 is taken: a profile needing two does not fit now, one needing one does.
        p = self.profiles()
        self.assertEqual(p["a100x2"]["fits"], "no")
        self.assertEqual(p["a100x1"]["fits"], "yes")
        self.assertEqual(p["a100x1"]["free_gpus"], 1)
        self.assertEqual(p["a100x2"]["fields"],
                         {"gpus": 2, "gpu_type": "a100", "memory": 1000000000, "cpus": 1})
        self.assertEqual(p["a100x2"]["pool"], "local")
        # A second A100 run takes the other A100, never an L4.
        b = self.d.submit("--profile", "a100x1", "--", "sleep", "60")
        rb = self.d.wait_state(b, "running")
        self.assertEqual(set(rb["gpus"]) | set(ra["gpus"]), self.a100)
        # A third waits for an A100 although an L4 is free.
        c = self.d.submit("--profile", "a100x1", "--", "sleep", "60")
        self.d.wait_for(lambda: self.d.inspect(c).get("waiting_on") == "resources",
                        "the third A100 run to wait")
        self.assertEqual(self.d.inspect(c)["state"], "queued")

    def test_flags_override_the_profile(self):
        run = self.d.submit("--profile", "a100x2", "--gpus", "1", "--memory", "2GB", "--",
                            "sleep", "60")
        r = self.d.wait_state(run, "running")
        self.assertEqual(r["spec"]["gpus"], 1)
        self.assertEqual(r["spec"]["memory"], 2000000000)
        self.assertEqual(r["spec"]["cpus"], 1)  # from the profile
        self.assertTrue(set(r["gpus"]) <= self.a100, r["gpus"])
        # A type given on the command line wins over the profile's.
        run = self.d.submit("--profile", "a100x1", "--gpu-type", "L4", "--", "sleep", "60")
        r = self.d.wait_state(run, "running")
        self.assertTrue(set(r["gpus"]) <= self.l4, r["gpus"])

    def test_an_unknown_profile_is_refused_naming_the_field(self):
        err = self.refused("--profile", "nope")
        self.assertIn("field 'profile': no profile 'nope'", err)
        self.assertIn("a100x1", err)  # what is allowed
        zh = self.refused("--profile", "nope", lang=ZH)
        self.assertIn("字段 “profile”：本守护进程没有名为 “nope” 的资源配置", zh)

    def test_a_profile_this_machine_cannot_satisfy_is_refused(self):
        err = self.refused("--profile", "h100")
        self.assertIn("profile 'h100' can never run on this machine: field 'gpu_type'", err)
        self.assertIn("matching 'H100'", err)
        zh = self.refused("--profile", "h100", lang=ZH)
        self.assertIn("资源配置 “h100” 在本机永远无法运行：字段 “gpu_type”", zh)
        err = self.refused("--profile", "huge")
        self.assertIn("profile 'huge' can never run on this machine: field 'gpus' asks for 8",
                      err)
        # Without a profile, a type no GPU has is refused too, naming the field.
        err = self.refused("--gpus", "1", "--gpu-type", "V100")
        self.assertIn("field 'gpu_type'", err)
        self.assertEqual([r for r in self.d.runs(all_runs=True)
                          if r.get("spec", {}).get("profile") in ("h100", "huge")], [])

    def test_profiles_lists_what_each_maps_to_and_whether_it_fits(self):
        p = self.profiles()
        self.assertEqual(set(p), {"a100x1", "a100x2", "l4x1", "h100", "huge"})
        self.assertEqual(p["a100x2"]["fits"], "yes")
        self.assertEqual(p["h100"]["fits"], "never")
        self.assertEqual(p["h100"]["reason"]["msg_id"], "profile.gpu_type_unmatched")
        self.assertEqual(p["huge"]["fits"], "never")
        table = self.d.cli("profiles").stdout
        self.assertIn("1 × A100", table)
        self.assertIn("never: profile 'h100' can never run on this machine", table)
        zh = self.d.cli("profiles", env=self.d.env(LANG=ZH)).stdout
        self.assertIn("当前可放下", zh)
        self.assertIn("永远不能：资源配置 “h100” 在本机永远无法运行", zh)

    def test_a_second_user_sees_the_same_profiles(self):
        second_user(self, OTHER)
        self.assertEqual(self.profiles(user=OTHER), self.profiles())


if __name__ == "__main__":
    unittest.main()

"""Scripted simulated GPUs: `--gpus sim:…:MODEL@LOADFILE` reports what the load file says,
through `lathe gpus` and GET /api/v1/gpus, and follows the file when a test rewrites it."""
import http.client
import json
import os
import shutil
import tempfile
import unittest

from harness import Daemon


def write_load(path, load):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(load, f)
    os.replace(tmp, path)


class SimGpus(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lathe-it-simgpu-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.load = os.path.join(self.dir, "load.json")
        self.d = Daemon(gpus=f"sim:2x80GB:A100,2x24GB:L4@{self.load}").start()
        self.addCleanup(self.d.cleanup)

    def cli_gpus(self):
        return json.loads(self.d.cli("gpus", "--json").stdout)

    def api_gpus(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            host, port = json.load(f)["tcp"].rsplit(":", 1)
        with open(os.path.join(self.d.home, "token")) as f:
            token = f.read().strip()
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("GET", "/api/v1/gpus", headers={"Authorization": f"Bearer {token}"})
        try:
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            return json.loads(r.read())
        finally:
            c.close()

    def test_models_and_load_file(self):
        # No file yet: named, simulated, idle.
        inv = self.cli_gpus()
        self.assertTrue(inv["simulated"])
        self.assertEqual([g["name"] for g in inv["gpus"]],
                         ["NVIDIA A100 (simulated)"] * 2 + ["NVIDIA L4 (simulated)"] * 2)
        self.assertEqual([g["memory_total_bytes"] for g in inv["gpus"]],
                         [80 * 10**9] * 2 + [24 * 10**9] * 2)
        self.assertEqual({g["utilization_gpu_pct"] for g in inv["gpus"]}, {0})
        self.assertIn("no load file at " + self.load, inv["note"])

        write_load(self.load, {"gpus": [
            {"index": 1, "utilization_gpu_pct": 87, "memory_used_bytes": "20GB",
             "temperature_c": 84, "sm_clock_mhz": 1100, "power_w": 310,
             "throttle_reason_names": ["sw_thermal"],
             "processes": [{"pid": 4242, "used_memory_bytes": "12GB"}]}]})
        for inv in (self.cli_gpus(), self.api_gpus()):
            g = inv["gpus"][1]
            self.assertEqual(g["utilization_gpu_pct"], 87)
            self.assertEqual(g["memory_used_bytes"], 20 * 10**9)
            self.assertEqual(g["temperature_c"], 84)
            self.assertEqual(g["sm_clock_mhz"], 1100)
            self.assertEqual(g["throttle_reason_names"], ["sw_thermal"])
            self.assertEqual(g["throttle_reasons"], 0x20)
            self.assertEqual(g["processes"], [{"pid": 4242, "used_memory_bytes": 12 * 10**9}])
            self.assertIn("allocated_to", g)
            self.assertEqual(inv["gpus"][0]["utilization_gpu_pct"], 0)
            self.assertIn("load from " + self.load, inv["note"])
        table = self.d.cli("gpus").stdout
        self.assertIn("87%", table)
        self.assertIn("NVIDIA A100 (simulated)", table)
        self.assertNotIn("(simulated) (simulated)", table)

        # The test rewrites the file: the next sample says so.
        write_load(self.load, {"gpus": [
            {"index": 3, "utilization_gpu_pct": 12, "memory_used_bytes": 5000000000}]})
        for inv in (self.cli_gpus(), self.api_gpus()):
            self.assertEqual(inv["gpus"][1]["utilization_gpu_pct"], 0)
            self.assertEqual(inv["gpus"][1]["throttle_reason_names"], [])
            self.assertEqual(inv["gpus"][3]["utilization_gpu_pct"], 12)
            self.assertEqual(inv["gpus"][3]["memory_used_bytes"], 5 * 10**9)

        # A bad file: the daemon keeps answering, the note names the field, the last load stays.
        write_load(self.load, {"gpus": [{"index": 3, "utilization_gpu_pct": 300}]})
        for inv in (self.cli_gpus(), self.api_gpus()):
            self.assertIn("field 'gpus[0].utilization_gpu_pct' is not valid", inv["note"])
            self.assertEqual(inv["gpus"][3]["utilization_gpu_pct"], 12)

    def test_a_bad_spec_is_refused_naming_the_part(self):
        d = Daemon(gpus="sim:2x80GB:A100@relative/load.json")
        self.addCleanup(d.cleanup)
        with self.assertRaises(RuntimeError) as e:
            d.start()
        self.assertIn("@FILE", str(e.exception))


if __name__ == "__main__":
    unittest.main()

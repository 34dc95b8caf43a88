"""`lathe run --torchrun` on this machine: one torchrun, standalone, with
--nproc_per_node from --gpus (1 without GPUs); the run's arguments reach the
script as they were given; NCCL settings become NCCL_* variables; several
nodes are refused on this machine, naming the field (exec/torchrun.h)."""
import json
import os
import shutil
import tempfile
import unittest

from harness import PY, Daemon
from torchrun_fix import run_path

# Each rank prints one line: what torchrun and Lathe told it.
SCRIPT = r"""
import json, os, sys
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LATHE_NNODES", "LATHE_GPUS_PER_NODE",
        "LATHE_NODE_RANK", "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME"]
out = {k: os.environ.get(k) for k in keys}
out["argv"] = sys.argv[1:]
hf = os.environ.get("LATHE_HOSTFILE")
out["hosts"] = open(hf).read().splitlines() if hf else None
out["hostfile"] = hf
out["hostfile_mode"] = oct(os.stat(hf).st_mode & 0o777) if hf else None
print("RANKINFO " + json.dumps(out), flush=True)
"""


class Torchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access("/usr/bin/torchrun", os.X_OK):
            raise unittest.SkipTest("no /usr/bin/torchrun (python3-torch)")

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lathe-it-torchrun-")
        os.chmod(self.dir, 0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.script = os.path.join(self.dir, "ranks.py")
        with open(self.script, "w") as f:
            f.write(SCRIPT)
        self.path = run_path(os.path.join(self.dir, "bin"))
        self.d = Daemon(gpus="sim:4x24GB").start()
        self.addCleanup(self.d.cleanup)

    def ranks(self, *flags, args=()):
        rid = self.d.submit("--torchrun", "--env", "PATH=" + self.path, *flags, "--", PY,
                            self.script, *args)
        r = self.d.wait_state(rid, ["succeeded", "failed"], timeout=240)
        logs = self.d.logs(rid)
        self.assertEqual(r["state"], "succeeded", logs)
        out = [json.loads(line.split("RANKINFO ", 1)[1])
               for line in logs.splitlines() if "RANKINFO " in line]
        return rid, sorted(out, key=lambda o: int(o["RANK"]))

    def test_without_gpus_one_process(self):
        _, out = self.ranks("--gpus", "0")
        self.assertEqual(len(out), 1, out)
        self.assertEqual((out[0]["RANK"], out[0]["LOCAL_RANK"], out[0]["WORLD_SIZE"]),
                         ("0", "0", "1"))
        self.assertEqual(out[0]["LATHE_NNODES"], "1")
        self.assertEqual(out[0]["LATHE_GPUS_PER_NODE"], "1")
        self.assertEqual(out[0]["LATHE_NODE_RANK"], "0")
        self.assertEqual(out[0]["hosts"], ["localhost"])
        # The hostfile is the user's alone, and goes with torchrun.
        self.assertEqual(out[0]["hostfile_mode"], "0o600")
        self.assertFalse(os.path.exists(out[0]["hostfile"]), out[0]["hostfile"])
        # No NCCL settings asked for: none set.
        self.assertIsNone(out[0]["NCCL_IB_DISABLE"])
        self.assertIsNone(out[0]["NCCL_SOCKET_IFNAME"])

    def test_gpus_are_processes_per_node_and_arguments_stay_words(self):
        hostile = ["--lr", "0.1", "a b; touch /tmp/x", "$(id)", "'\"`", "--", ""]
        _, out = self.ranks("--gpus", "2", "--nccl-ib", "false", "--nccl-socket-ifname", "lo",
                            args=hostile)
        self.assertEqual([(o["RANK"], o["WORLD_SIZE"]) for o in out], [("0", "2"), ("1", "2")])
        self.assertEqual(sorted(o["LOCAL_RANK"] for o in out), ["0", "1"])
        for o in out:
            self.assertEqual(o["argv"], hostile)
            self.assertEqual(o["LATHE_GPUS_PER_NODE"], "2")
            self.assertEqual(o["NCCL_IB_DISABLE"], "1")
            self.assertEqual(o["NCCL_SOCKET_IFNAME"], "lo")

    def test_spec_is_kept_and_several_nodes_are_refused_here(self):
        r = self.d.cli("run", "--nodes", "2", "--torchrun", "--", PY, self.script, check=False)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("'nodes'", r.stderr)
        r = self.d.cli("run", "--nccl-socket-ifname", "eth0;x", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("nccl.socket_ifname", r.stderr)
        self.assertEqual(self.d.runs(all_runs=True), [])
        rid = self.d.submit("--torchrun", "--nccl-ib", "true", "--env", "PATH=" + self.path, "--",
                            PY, self.script)
        spec = self.d.inspect(rid)["spec"]
        self.assertTrue(spec["torchrun"])
        self.assertEqual(spec["nccl"], {"ib": True})
        self.assertNotIn("nodes", spec)
        self.d.wait_state(rid, ["succeeded", "failed"], timeout=240)


if __name__ == "__main__":
    unittest.main()

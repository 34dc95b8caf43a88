"""`lathe run --pool cluster --nodes 2 --torchrun` against a private Slurm of two nodes on this host
(tests/integ/slurm_cluster.py, `nodes=2`): one batch job of two nodes, one torchrun per node
through srun, a c10d rendezvous on the first node, and a gloo all_reduce on CPU over both ranks
(exec/torchrun.h). Skipped without root, Slurm and munge, or without python3-torch.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PY  # noqa: E402
from test_slurm_pool import USER, PoolCase  # noqa: E402
from torchrun_fix import run_path  # noqa: E402

# Each rank adds its rank + 1 over every rank (1 + 2 = 3) and prints what it saw.
SCRIPT = r"""
import json, os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
out = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LATHE_NODE_RANK",
                                       "LATHE_NNODES", "LATHE_GPUS_PER_NODE",
                                       "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "SLURMD_NODENAME")}
out["sum"] = t.item()
out["argv"] = sys.argv[1:]
hf = os.environ.get("LATHE_HOSTFILE")
out["hosts"] = open(hf).read().splitlines() if hf else None
out["hostfile"] = hf
out["hostfile_mode"] = oct(os.stat(hf).st_mode & 0o777) if hf else None
print("RANKINFO " + json.dumps(out), flush=True)
dist.destroy_process_group()
"""


class SlurmTorchrun(PoolCase):
    CLUSTER = {"nodes": 2, "gpus": 1, "cpus": 2}

    @classmethod
    def setUpClass(cls):
        if not os.access("/usr/bin/torchrun", os.X_OK):
            raise unittest.SkipTest("no /usr/bin/torchrun (python3-torch)")
        super().setUpClass()

    def test_two_nodes_one_torchrun_each_and_a_gloo_all_reduce(self):
        script = os.path.join(self.shared, "ranks.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        os.chmod(script, 0o644)
        sinfo = self.cluster.run("sinfo", "-h", "-N", "-o", "%N %t")
        self.assertEqual(len(sinfo.stdout.split("\n")) - 1, 2, sinfo.stdout)
        args = ["--tag", "a b", "$(id)"]
        path = run_path(os.path.join(self.shared, "bin"))
        rid = self.submit("--nodes", "2", "--torchrun", "--env", "PATH=" + path,
                          "--nccl-ib", "false", "--nccl-socket-ifname", "lo",
                          "--", PY, script, *args)
        r = self.d.wait_state(rid, ["succeeded", "failed"], timeout=240)
        logs = self.run_as(USER, "logs", rid).stdout
        self.assertEqual(r["state"], "succeeded", logs + self.cluster.tail("slurm/slurmctld.log"))
        ranks = sorted((json.loads(line.split("RANKINFO ", 1)[1])
                        for line in logs.splitlines() if "RANKINFO " in line),
                       key=lambda o: int(o["RANK"]))
        self.assertEqual([o["RANK"] for o in ranks], ["0", "1"], logs)
        for o in ranks:
            self.assertEqual(o["WORLD_SIZE"], "2")
            self.assertEqual(o["LOCAL_RANK"], "0")  # one process per node without GPUs asked
            self.assertEqual(o["sum"], 3.0)  # both ranks took part
            self.assertEqual(o["LATHE_NNODES"], "2")
            self.assertEqual(o["LATHE_GPUS_PER_NODE"], "1")
            # The rendezvous is on the allocation's first node, as Slurm lists them.
            self.assertEqual(sorted(o["hosts"]), sorted(self.cluster.node_names))
            self.assertEqual(o["hosts"], ranks[0]["hosts"])
            self.assertEqual(o["NCCL_IB_DISABLE"], "1")
            self.assertEqual(o["NCCL_SOCKET_IFNAME"], "lo")
            self.assertEqual(o["argv"], args)
            # Each node's hostfile is the user's alone, and goes with its torchrun (the
            # nodes here share this host's /tmp).
            self.assertEqual(o["hostfile_mode"], "0o600")
            self.assertFalse(os.path.exists(o["hostfile"]), o["hostfile"])
        self.assertNotEqual(ranks[0]["hostfile"], ranks[1]["hostfile"])
        # One rank on each node, and each node knows its rank.
        self.assertEqual(sorted(o["SLURMD_NODENAME"] for o in ranks),
                         sorted(self.cluster.node_names))
        self.assertEqual(sorted(o["LATHE_NODE_RANK"] for o in ranks), ["0", "1"])


if __name__ == "__main__":
    unittest.main()
